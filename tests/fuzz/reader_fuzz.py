"""Fuzz tracekit's XSpace and nsys readers with mutated real files.

    python tests/fuzz/reader_fuzz.py xspace|nsys [N] [--seed S]

Seeds are real traces from ../shared/traces cut down to a few events per line (XSpace) or rows per
table (nsys SQLite), so that one input reads in milliseconds; each input is a seed with byte-level
mutations (flips, varint-limit bytes, truncation, repeated or deleted runs). Every input must end in
a table or in a ``TracekitError``; any other exception, or an input taking more than 10 s, is a
failure. Prints one summary line; exits 1 on any failure. ``tests/test_sanitized_scanner.py`` runs
20,000 inputs of each in CI; ``benchmarks/fuzz_long.py`` runs more.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
XSPACE_SEEDS = ["xprof/cpu_tf2.21/lstm_raw_blocklstm_fn.xplane.pb", "xprof/cpu_tf2.21/lstm_keras_fn.xplane.pb",
                "xprof/tf_bert_8xV100_gpu_multi_worker.xplane.pb"]
NSYS_SEEDS = ["nsys/dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite", "nsys/nvfuser_matmul_nsys2024.6.sqlite"]
EVENTS_PER_LINE = 6
ROWS_PER_TABLE = 30
SLOW_S = 10.0
# Bytes that end or extend protobuf varints and lengths, and SQLite's page-header values.
SPECIAL = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]


def xspace_seeds(work: Path) -> list[bytes]:
    from tracekit.ingest.xplane import XSpace

    out = []
    for name in XSPACE_SEEDS:
        path = TRACES / name
        if not path.exists():
            continue
        xs = XSpace()
        xs.ParseFromString(path.read_bytes())
        for plane in xs.planes:
            for line in plane.lines:
                del line.events[EVENTS_PER_LINE:]
        out.append(xs.SerializeToString())
    return out


def nsys_seeds(work: Path) -> list[bytes]:
    out = []
    for i, name in enumerate(NSYS_SEEDS):
        path = TRACES / name
        if not path.exists():
            continue
        copy = work / f"seed{i}.sqlite"
        shutil.copy(path, copy)
        con = sqlite3.connect(copy)
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            con.execute(f'DELETE FROM "{table}" WHERE rowid NOT IN (SELECT rowid FROM "{table}" LIMIT {ROWS_PER_TABLE})')
        con.commit()
        con.execute("VACUUM")
        con.close()
        out.append(copy.read_bytes())
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        op = rng.randrange(6)
        pos = rng.randrange(len(b))
        if op == 0:
            b[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[pos] = rng.choice(SPECIAL)
        elif op == 2:
            del b[rng.randrange(len(b) // 2, len(b) + 1):]
        elif op == 3:
            end = min(len(b), pos + rng.randint(1, 64))
            b[pos:end] = b[pos:end] * rng.randint(0, 3)
        elif op == 4:
            b[pos:pos + 8] = rng.randbytes(8)
        else:
            b[pos:pos] = bytes([rng.choice(SPECIAL)]) * rng.randint(1, 16)
    return bytes(b)


def run(kind: str, n: int, seed: int = 0) -> tuple[int, list[str]]:
    """Feed n inputs; returns (inputs read as tables, failure descriptions)."""
    import tracekit
    from tracekit.errors import TracekitError

    rng = random.Random(seed)
    ok, failures = 0, []
    run.unmapped = 0  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="tracekit-fuzz-") as tmp:
        work = Path(tmp)
        seeds = xspace_seeds(work) if kind == "xspace" else nsys_seeds(work)
        if not seeds:
            raise RuntimeError(f"no seed traces under {TRACES}")
        target = work / ("input.xplane.pb" if kind == "xspace" else "input.sqlite")
        for i in range(n):
            data = mutate(rng.choice(seeds), rng) if i % 10 else rng.choice(seeds)
            target.write_bytes(data)
            started = time.perf_counter()
            try:
                tracekit.load(target)
                ok += 1
            except TracekitError as e:
                # Refused by load()'s last-resort mapping, not by a reader's own check: counted apart.
                run.unmapped += "cannot be read as" in str(e)  # type: ignore[attr-defined]
            except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
                failures.append(f"input {i}: {type(e).__name__}: {str(e)[:200]}")
            if time.perf_counter() - started > SLOW_S:
                failures.append(f"input {i}: took {time.perf_counter() - started:.1f} s")
    return ok, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("xspace", "nsys"))
    parser.add_argument("n", type=int, nargs="?", default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    ok, failures = run(args.kind, args.n, args.seed)
    for f in failures[:10]:
        print(f, file=sys.stderr)
    print(f"{args.kind}: {args.n} inputs, {ok} read as tables, {args.n - ok - len(failures)} refused with one-line "
          f"errors ({run.unmapped} of them by the last-resort mapping), {len(failures)} failures "  # type: ignore[attr-defined]
          f"({time.perf_counter() - started:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
