"""Fuzz the C Kineto scanner built with AddressSanitizer and UndefinedBehaviorSanitizer.

    python tests/fuzz/sanitized_scan.py [N] [--seed S]

Builds ``tracekit/_native/kineto_scan.c`` with ``-fsanitize=address,undefined`` into a temporary
directory, then runs N inputs (default 20,000) through its ``scan`` in a child Python with the ASan
runtime preloaded. Inputs are slices of real Kineto traces from ../shared/traces, re-wrapped as
documents and mutated with structure-aware mutations: numbers at and beyond the int64 limits,
truncation, unicode escapes (lone surrogates, \\u0000, bad hex), deep nesting, duplicate keys, byte
flips. Each input is scanned on one thread and again cut into 64-byte parts on three threads, which
must give the same columns or the same error. A sanitizer report aborts the child (non-zero exit,
the report on stderr); any exception other than ValueError, or a difference, is counted as a failure. Prints one summary line; exits 1 on any failure.
``tests/test_sanitized_scanner.py`` runs it in CI; ``benchmarks/fuzz_long.py`` runs it longer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tracekit" / "_native" / "kineto_scan.c"
TRACES = REPO.parent / "shared" / "traces"
SEED_TRACES = ["hta/trace_compare/base/base.json.gz", "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
               "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"]
EVENTS_PER_SEED = 40

NUMBERS = ["9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551616",
           "1e308", "1e309", "-1e309", "1.7976931348623157e308", "4.9e-324", "0", "-0", "00", "1e", "-", "1.", ".5",
           "123456789012345678901234567890", "NaN", "Infinity"]
STRINGS = ['"\\ud800"', '"\\udc00\\ud800"', '"\\u0000"', '"\\uZZZZ"', '"\\u12"', '"\\"', '"\\x41"', '"\u00e9\u4e2d"',
           '"' + "a" * 5000 + '"', '""', '"\\/\\b\\f\\n\\r\\t"']


def build(directory: Path) -> Path:
    """The sanitized extension, named so that ``PyInit__kineto_scan`` is found."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler")
    out = directory / ("_kineto_scan" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    cmd = [cc, "-shared", "-fPIC", "-O1", "-g", "-std=c11", "-pthread", "-fno-omit-frame-pointer",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
           f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sanitized build failed: {proc.stderr[-2000:]}")
    return out


def seeds() -> list[str]:
    """Small real documents: runs of consecutive events from real traces, with their header keys."""
    rng = random.Random(0)
    docs = []
    for name in SEED_TRACES:
        path = TRACES / name
        if not path.exists():
            continue
        doc = json.loads(gzip.decompress(path.read_bytes()))
        events = doc.get("traceEvents") or []
        header = {k: v for k, v in doc.items() if k != "traceEvents"}
        for _ in range(8):
            at = rng.randrange(max(len(events) - EVENTS_PER_SEED, 1))
            docs.append(json.dumps({**header, "traceEvents": events[at:at + EVENTS_PER_SEED]}))
    return docs


def mutate(doc: str, rng: random.Random) -> bytes:
    """One to three structure-aware mutations of a JSON document."""
    text = doc
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(8)
        if op == 0:  # a number replaced by a limit or a malformed number
            spots = [i for i in range(len(text) - 1) if text[i] in ":," and (text[i + 1].isdigit() or text[i + 1] == "-")]
            if spots:
                i = rng.choice(spots) + 1
                j = i
                while j < len(text) and text[j] in "0123456789.eE+-":
                    j += 1
                text = text[:i] + rng.choice(NUMBERS) + text[j:]
        elif op == 1:  # truncation
            text = text[:rng.randrange(len(text) + 1)]
        elif op == 2:  # a string replaced by an odd escape
            starts = [i for i in range(len(text)) if text[i] == '"']
            if len(starts) >= 2:
                k = rng.randrange(len(starts) - 1)
                text = text[:starts[k]] + rng.choice(STRINGS) + text[starts[k + 1] + 1:]
        elif op == 3:  # deep nesting inside an args value
            depth = rng.choice([10, 255, 256, 257, 1000, 5000])
            text = text.replace('"args": {', '"args": {"deep": ' + "[" * depth + "]" * depth + ", ", 1)
        elif op == 4:  # duplicate keys
            text = text.replace('"ts":', '"ts": 1, "ts":', 1).replace('"name":', '"name": "x", "name":', 1)
        elif op == 5:  # byte flips
            b = bytearray(text.encode())
            for _ in range(rng.randint(1, 8)):
                if b:
                    b[rng.randrange(len(b))] = rng.randrange(256)
            return b.decode("latin-1").encode("latin-1") if rng.random() < 0.5 else bytes(b)
        elif op == 6:  # structure removed or repeated
            i = rng.randrange(len(text) + 1)
            j = min(len(text), i + rng.randint(1, 200))
            text = text[:i] + (text[i:j] * rng.randint(0, 3)) + text[j:]
        else:  # a wrong type where an object or list is expected
            text = text.replace('"traceEvents": [', rng.choice(['"traceEvents": [1, "a", null, ', '"traceEvents": {"a": [',
                                                                '"traceEvents": "', '"traceEvents": [[[']), 1)
    return text.encode("utf-8", "surrogatepass")


def outcome(scanner: object, data: bytes, *threads_and_part: int) -> dict | str:
    """What scan() gives, with column buffers as bytes, or its ValueError as text."""
    try:
        r = scanner.scan(data, False, *threads_and_part)  # type: ignore[attr-defined]
    except ValueError as e:
        return f"ValueError: {e}"
    return {k: v if isinstance(v, (int, list)) else bytes(memoryview(v)) for k, v in r.items()}


CHILD = r"""
import importlib.util, random, sys
sys.path.insert(0, sys.argv[3])
import sanitized_scan as harness
spec = importlib.util.spec_from_file_location("_kineto_scan", sys.argv[1])
scanner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scanner)
n, seed = int(sys.argv[2]), int(sys.argv[4])
docs = harness.seeds()
rng = random.Random(seed)
failures = rejected = 0
for i in range(n):
    data = harness.mutate(rng.choice(docs), rng) if i % 10 else rng.choice(docs).encode()
    try:
        serial = harness.outcome(scanner, data)
        # The same input cut into parts of 64 bytes on 3 threads: the same columns or the same error.
        parallel = harness.outcome(scanner, data, 3, 64)
        if isinstance(serial, str):
            rejected += 1
        if parallel != serial:
            raise AssertionError("3 threads gave another result than 1: " + str(parallel)[:200])
    except Exception as e:
        failures += 1
        if failures <= 5:
            print(f"input {i}: {type(e).__name__}: {e}", file=sys.stderr)
print(f"{n} inputs, {rejected} rejected with ValueError, {n - rejected - failures} scanned, {failures} other exceptions")
sys.exit(1 if failures else 0)
"""


def run(n: int, seed: int = 0, timeout: float = 900) -> subprocess.CompletedProcess:
    if not seeds():
        raise RuntimeError(f"no seed traces under {TRACES}")
    with tempfile.TemporaryDirectory(prefix="tracekit-asan-") as tmp:
        so = build(Path(tmp))
        libasan = subprocess.run([os.environ.get("CC") or "gcc", "-print-file-name=libasan.so"], capture_output=True,
                                 text=True).stdout.strip()
        env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
               "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1", "PYTHONMALLOC": "malloc"}
        return subprocess.run([sys.executable, "-c", CHILD, str(so), str(n), str(Path(__file__).parent), str(seed)],
                              capture_output=True, text=True, env=env, timeout=timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    proc = run(args.n, args.seed, timeout=24 * 3600)
    sys.stderr.write(proc.stderr[-4000:])
    print(proc.stdout.strip() + f" ({time.perf_counter() - started:.0f} s)")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
