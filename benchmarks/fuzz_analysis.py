"""Real Kineto traces, mutated the ways real files differ, through report, whatif and critical-path.

    python benchmarks/fuzz_analysis.py [--seconds 600] [--seed N] [TRACE ...]

tests/fuzz fuzzes the parsers with broken bytes; this fuzzes the analyses with files that parse:
each trace (default: every Kineto trace in tests/data and ../shared/traces) is rewritten with 10% of
its events dropped, a third of its categories dropped, its events shuffled, 10% of them repeated,
timestamps jittered, durations zeroed, or only its middle third kept, and each analysis must give
a result or a one-line tracekit error, never an exception. Mutations are seeded (the date, or
--seed), so a crash can be replayed; prints one line per crash and a summary, exits 1 on any crash.
Found in stop 75: the subnormal-products rule indexed past its matrix on a shuffled file
(`--seed 3 tests/data/cpu/grad_accumulation.pt.trace.json.gz` replays it on the code before the fix),
and whatif and critical-path raised numpy's error on a trace with no event left (every category
dropped). The first run over all 193 stored traces: 4,053 runs, those 8 crashes, 331 s.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import tracekit
from tracekit.errors import TracekitError

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces"
ANALYSES = ("report", "whatif", "critical_path")
Event = dict


def _drop(events: list[Event], rnd: random.Random) -> list[Event]:
    return [e for e in events if rnd.random() > 0.1]


def _drop_categories(events: list[Event], rnd: random.Random) -> list[Event]:
    categories = sorted({str(e.get("cat")) for e in events})
    gone = set(rnd.sample(categories, max(1, len(categories) // 3)))
    return [e for e in events if str(e.get("cat")) not in gone]


def _shuffle(events: list[Event], rnd: random.Random) -> list[Event]:
    out = events[:]
    rnd.shuffle(out)
    return out


def _repeat(events: list[Event], rnd: random.Random) -> list[Event]:
    return events + rnd.sample(events, len(events) // 10)


def _jitter(events: list[Event], rnd: random.Random) -> list[Event]:
    return [dict(e, ts=e["ts"] + rnd.uniform(-5, 5)) if "ts" in e and rnd.random() < 0.2 else e for e in events]


def _zero_durations(events: list[Event], rnd: random.Random) -> list[Event]:
    return [dict(e, dur=0) if "dur" in e and rnd.random() < 0.1 else e for e in events]


def _middle(events: list[Event], rnd: random.Random) -> list[Event]:
    starts = sorted(float(e["ts"]) for e in events if e.get("ph") == "X" and "ts" in e)
    if not starts:
        return events
    lo, hi = starts[len(starts) // 3], starts[2 * len(starts) // 3]
    return [e for e in events if e.get("ph") == "M" or "ts" not in e or lo <= float(e["ts"]) <= hi]


MUTATIONS: dict[str, Callable[[list[Event], random.Random], list[Event]]] = {
    "drop": _drop, "drop-categories": _drop_categories, "shuffle": _shuffle, "repeat": _repeat,
    "jitter": _jitter, "zero-durations": _zero_durations, "middle": _middle}


def default_traces() -> list[Path]:
    """Every gzipped JSON trace of tests/data and ../shared/traces (those that are no Kineto-style
    Chrome trace are skipped as they are read)."""
    return sorted((REPO / "tests" / "data").rglob("*.json.gz")) + sorted(SHARED.rglob("*.json.gz"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--seconds", type=float, default=600.0, help="stop starting new traces after this long")
    ap.add_argument("--seed", default=datetime.date.today().strftime("%Y%m%d"))
    args = ap.parse_args()
    traces = args.traces or default_traces()
    started, runs, crashes, done = time.perf_counter(), 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        mutated = Path(tmp) / "mutated.json"
        for path in traces:
            if time.perf_counter() - started > args.seconds:
                break
            try:
                doc = json.loads(gzip.decompress(path.read_bytes()))
                events = doc["traceEvents"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not a Kineto JSON trace (ONNX Runtime, Paddle, ...): the parsers' fuzz covers those
            for name, mutate in MUTATIONS.items():
                rnd = random.Random(f"{args.seed}/{path.name}/{name}")  # a str seed: the same in every process
                mutated.write_text(json.dumps(dict(doc, traceEvents=mutate(events, rnd))))
                for analysis in ANALYSES:
                    runs += 1
                    try:
                        tracekit.render(getattr(tracekit, analysis)(mutated), "json")
                    except TracekitError:
                        pass
                    except Exception as exc:  # the point: anything but tracekit's own errors is a crash
                        crashes += 1
                        where = traceback.extract_tb(exc.__traceback__)[-1]
                        print(f"CRASH {path.name} {name} {analysis}: {type(exc).__name__}: {exc} "
                              f"({Path(where.filename).name}:{where.lineno}; replay with --seed {args.seed} {path})")
            done += 1
    print(f"{done} traces x {len(MUTATIONS)} mutations x {len(ANALYSES)} analyses: {runs:,} runs, {crashes} crashes, "
          f"{time.perf_counter() - started:,.0f} s, seed {args.seed}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
