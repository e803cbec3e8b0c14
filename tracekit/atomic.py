"""Atomic file output: write beside the target, then rename, with the permissions a plain open gives.

``tempfile.mkstemp`` creates files 0600 whatever the umask; a report or Parquet file renamed from
it would be unreadable by colleagues on a shared file system, so the temp file gets the mode
``open()`` would have given (0666 less the umask) before it takes the target's name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def current_umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temp path in ``target``'s directory; renamed onto ``target`` when the block succeeds,
    removed when it fails, so a half-written file never carries the target's name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_text_atomic(target: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
