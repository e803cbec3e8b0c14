"""Reading input files safely: regular files only, bounded decompression."""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from tracekit.errors import InputError

# A gzip trace may expand at most this many times its compressed size (JSON traces expand 5-30x;
# a run of zeros or spaces, 1000x). TRACEKIT_MAX_GZIP_RATIO changes it.
MAX_GZIP_RATIO = 200
# Below this many decompressed bytes the ratio is not checked (tiny files have odd ratios).
GZIP_RATIO_FLOOR = 64 << 20
CHUNK = 16 << 20


def regular_file(path: Path) -> None:
    """Raise InputError unless ``path`` is a regular file: a FIFO, socket or device would block or
    never end, so tracekit refuses to read one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(path, "no such file or directory") from None
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        raise InputError(path, "is a directory, not a trace file")
    if not stat.S_ISREG(mode):
        what = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
        raise InputError(path, f"is {what}, not a regular file: save the trace to a file first")




def gunzip(path: Path) -> bytearray:
    """The decompressed bytes of a gzip trace, read in chunks with two guards: JSON text never holds a
    NUL byte (a gzip bomb of zeros stops at its first chunk), and the output may not exceed
    ``MAX_GZIP_RATIO`` times the compressed size.

    The output goes straight into one buffer sized from the gzip trailer's length field (the size
    mod 2^32, a hint only): joining a list of chunks held the trace twice at the peak.
    """
    limit = _gzip_limit(path)
    buf = bytearray(min(_gzip_size_hint(path), limit) or CHUNK)
    total = 0
    try:
        with gzip.open(path, "rb") as f:
            while True:
                if total == len(buf):
                    # At the stated size: one more byte says whether the buffer must grow (most files end here).
                    more = f.read(1)
                    if not more:
                        break
                    buf += more
                    buf.extend(bytes(min(max(total // 2, CHUNK), limit + 1 - total)))
                    n = 1
                else:
                    with memoryview(buf) as view:
                        n = f.readinto(view[total:total + CHUNK])
                    if not n:
                        break
                _check_chunk(path, buf, total, total + n, limit)
                total += n
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, f"corrupt gzip data ({e})") from None
    del buf[total:]
    return buf


def gunzip_to_file(path: Path, out: BinaryIO) -> str:
    """Decompress a gzip trace into ``out`` (a file), with ``gunzip``'s guards, in bounded memory;
    returns the sha256 of the gzip file as stored."""
    limit = _gzip_limit(path)
    sha = hashlib.sha256()
    total = 0
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise InputError(path, f"cannot be read: {e.strerror or e}") from None
    with raw, gzip.GzipFile(fileobj=_HashingReader(raw, sha), mode="rb") as f:  # type: ignore[call-overload]
        while True:
            try:
                chunk = f.read(CHUNK)
            except (OSError, EOFError, zlib.error) as e:
                raise InputError(path, f"corrupt gzip data ({e})") from None
            if not chunk:
                break
            _check_chunk(path, chunk, 0, len(chunk), limit - total, total)
            out.write(chunk)  # an OSError here (disk full) is the output's, not the trace's
            total += len(chunk)
    out.flush()
    return sha.hexdigest()


class _HashingReader:
    """A binary file whose bytes are hashed as they are read (the gzip reader's input)."""

    def __init__(self, f: BinaryIO, sha: Any) -> None:
        self._f, self._sha = f, sha

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self._sha.update(data)
        return data


def _gzip_limit(path: Path) -> int:
    """The most bytes a gzip trace may decompress to: MAX_GZIP_RATIO (or TRACEKIT_MAX_GZIP_RATIO)
    times its size, at least GZIP_RATIO_FLOOR."""
    return max(int(_gzip_ratio() * os.path.getsize(path)), GZIP_RATIO_FLOOR)


def _gzip_ratio() -> float:
    return float(os.environ.get("TRACEKIT_MAX_GZIP_RATIO") or MAX_GZIP_RATIO)


def _check_chunk(path: Path, buf: bytes | bytearray, lo: int, hi: int, limit: int, before: int = 0) -> None:
    """A decompressed chunk buf[lo:hi] holds no NUL byte and stays within the size limit (``before``
    bytes came earlier, for the messages)."""
    nul = buf.find(b"\0", lo, hi)
    if nul >= 0:
        raise InputError(path, f"NUL byte at decompressed byte {before + nul:,}: not JSON text "
                               "(binary data or padding after the document)")
    if hi > limit:
        raise InputError(path, f"decompresses to more than {before + limit:,} bytes ({_gzip_ratio():g}x its size): a "
                               "gzip bomb? Set TRACEKIT_MAX_GZIP_RATIO to allow more")


def _gzip_size_hint(path: Path) -> int:
    """The uncompressed size a gzip file's trailer states (mod 2^32; 0 when unreadable)."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) < 18:
                return 0
            f.seek(-4, 2)
            return int.from_bytes(f.read(4), "little")
    except OSError:
        return 0
