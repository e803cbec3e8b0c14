"""Real traces of every format, mutated the ways real files differ, through report, whatif and critical-path.

    python benchmarks/fuzz_analysis.py [--seconds 600] [--seed N] [--format kineto,nsys,xspace]
                                       [--mutations original,shuffle,...] [TRACE ...]

tests/fuzz fuzzes the parsers with broken bytes; this fuzzes the analyses with files that parse.
Each trace (default: every Kineto JSON, Nsight Systems SQLite and XSpace trace in tests/data and
../shared/traces) is rewritten with 10% of its events dropped, a third of its event kinds dropped
(Kineto categories, nsys activity tables, XSpace lines), its events shuffled or reversed (Kineto:
each thread's in its order, the threads interleaved or last first), 10% of them repeated,
timestamps jittered, durations zeroed, or only its middle third kept; nsys files also with NVTX
ranges turned into marks and their text into registered ids (both as real nsys files hold them).
Each analysis (report, whatif, critical-path, ranges, and compare of the original against the
mutated file) must give a result or a one-line tracekit error, never an exception; every result must
keep the facts `check_facts` lists; the shuffled and the reversed file, and the original's tracekit
Parquet (`tracekit ingest`), must give the original's results. Mutations are seeded (the date, or --seed), so a case can be replayed; prints one line per
crash or false fact and a summary, exits 1 on any.
Found in stop 75: the subnormal-products rule indexed past its matrix on a shuffled file
(`--seed 3 tests/data/cpu/grad_accumulation.pt.trace.json.gz` replays it on the code before the fix),
and whatif and critical-path raised numpy's error on a trace with no event left (every category
dropped). The first run over all 193 stored Kineto traces: 4,053 runs, those 8 crashes, 331 s.
Found in stop 76, by the facts check: critical-path's path longer than its window (Paddle's real
encoder step: 134.7%; overlapping events counted twice on a thread or a stream; GPU work past the
window's end); results that follow the file's order of events (the order check): a range list, the
eager ops between compiled graphs tied on count, a message-passing step's first gather/scatter pair.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import io
import json
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import tracekit
from tracekit import cli as tracekit_cli
from tracekit.errors import TracekitError

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces"
ANALYSES = ("report", "whatif", "critical_path", "ranges", "compare")  # compare: the original against the mutated
MUTATION_NAMES = ("original", "drop", "drop-kinds", "shuffle", "reverse", "repeat", "jitter", "zero-durations", "middle")


# --- Kineto JSON: a list of event dicts ----------------------------------------------------------
Event = dict


def _kineto_mutate(name: str, events: list[Event], rnd: random.Random) -> list[Event]:
    if name == "original":
        return events
    if name == "drop":
        return [e for e in events if rnd.random() > 0.1]
    if name == "drop-kinds":
        categories = sorted({str(e.get("cat")) for e in events})
        gone = set(rnd.sample(categories, max(1, len(categories) // 3)))
        return [e for e in events if str(e.get("cat")) not in gone]
    if name in ("shuffle", "reverse"):
        # Each thread's events keep their order, the threads interleaved at random or written last
        # first: profilers and merging tools order files so, and where µs timestamps tie a parent
        # and its child (Kineto's older traces) that order is the only record of which encloses which.
        # Metadata (process and thread names) stays first, where formats that are told apart by
        # their head put it (xprof's trace-viewer JSON names its /host: plane there).
        named = [e for e in events if e.get("ph") == "M"]
        threads: dict[tuple[str, str], list[Event]] = {}
        for e in events:
            if e.get("ph") != "M":
                threads.setdefault((str(e.get("pid")), str(e.get("tid"))), []).append(e)
        if name == "reverse":
            return named + [e for key in reversed(list(threads)) for e in threads[key]]
        cursors = {key: iter(v) for key, v in threads.items()}
        turns = [key for key, v in threads.items() for _ in v]
        rnd.shuffle(turns)
        return named + [next(cursors[key]) for key in turns]
    if name == "repeat":
        return events + rnd.sample(events, len(events) // 10)
    if name == "jitter":
        return [dict(e, ts=e["ts"] + rnd.uniform(-5, 5)) if "ts" in e and rnd.random() < 0.2 else e for e in events]
    if name == "zero-durations":
        return [dict(e, dur=0) if "dur" in e and rnd.random() < 0.1 else e for e in events]
    starts = sorted(float(e["ts"]) for e in events if e.get("ph") == "X" and "ts" in e)  # middle
    if not starts:
        return events
    lo, hi = starts[len(starts) // 3], starts[2 * len(starts) // 3]
    return [e for e in events if e.get("ph") == "M" or "ts" not in e or lo <= float(e["ts"]) <= hi]


def kineto_variants(path: Path, out: Path, seed: str) -> list[tuple[str, Callable[[], Path]]] | None:
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        events = doc["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a Kineto JSON trace (ONNX Runtime, Paddle, ...): the parsers' fuzz covers those
    target = out / "mutated.json"

    def make(name: str) -> Callable[[], Path]:
        def write() -> Path:
            rnd = random.Random(f"{seed}/{path.name}/{name}")  # a str seed: the same in every process
            target.write_text(json.dumps(dict(doc, traceEvents=_kineto_mutate(name, events, rnd))))
            return target
        return write
    return [(name, make(name)) for name in MUTATION_NAMES]


# --- Nsight Systems SQLite: rows of the activity tables ------------------------------------------
NSYS_ACTIVITY_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "NVTX_EVENTS", "OSRT_API", "CUDNN_EVENTS", "CUBLAS_EVENTS", "CUDA_GRAPH_EVENTS", "CUDA_GRAPH_NODE_EVENTS")
NSYS_MUTATIONS = MUTATION_NAMES + ("nvtx-marks", "nvtx-text-ids")


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _nsys_mutate(name: str, db: sqlite3.Connection, rnd: random.Random) -> None:
    tables = [t for t in NSYS_ACTIVITY_TABLES
              if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (t,)).fetchone()]
    if name == "original":
        return
    if name == "drop-kinds":
        for table in rnd.sample(tables, max(1, len(tables) // 3)):
            db.execute(f"DROP TABLE {table}")
        return
    if name == "middle":
        starts = sorted(s for t in tables for (s,) in db.execute(f"SELECT start FROM {t} WHERE start IS NOT NULL"))
        if starts:
            lo, hi = starts[len(starts) // 3], starts[2 * len(starts) // 3]
            for table in tables:
                db.execute(f"DELETE FROM {table} WHERE start < ? OR start > ?", (lo, hi))
        return
    if name == "nvtx-marks" and "NVTX_EVENTS" in tables:  # a range's end gone: what a mark holds
        ids = [r for (r,) in db.execute("SELECT rowid FROM NVTX_EVENTS") if rnd.random() < 0.1]
        db.executemany("UPDATE NVTX_EVENTS SET end = NULL WHERE rowid = ?", [(r,) for r in ids])
        return
    if name == "nvtx-text-ids" and "NVTX_EVENTS" in tables and "textId" in _columns(db, "NVTX_EVENTS"):
        # nsys stores a registered string's text in StringIds and leaves `text` NULL
        texts = sorted({t for (t,) in db.execute("SELECT text FROM NVTX_EVENTS WHERE text IS NOT NULL")})
        next_id = (db.execute("SELECT max(id) FROM StringIds").fetchone()[0] or 0) + 1
        for i, text in enumerate(texts):
            db.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (next_id + i, text))
            db.execute("UPDATE NVTX_EVENTS SET textId = ?, text = NULL WHERE text = ?", (next_id + i, text))
        return
    for table in tables:
        cols = _columns(db, table)
        rows = db.execute(f"SELECT rowid, * FROM {table}").fetchall()
        at = {c: i + 1 for i, c in enumerate(cols)}
        if name == "drop":
            db.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r[0],) for r in rows if rnd.random() < 0.1])
            continue
        if name in ("shuffle", "reverse", "repeat"):
            body = [r[1:] for r in rows]
            if name in ("shuffle", "reverse"):  # the table's rows in another order (nsys's are by start, ns)
                if name == "shuffle":
                    rnd.shuffle(body)
                else:
                    body.reverse()
                db.execute(f"DELETE FROM {table}")
            else:
                body = rnd.sample(body, len(body) // 10)
            db.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({', '.join('?' * len(cols))})", body)
            continue
        if "start" not in at or "end" not in at:
            continue
        for row in rows:
            if name == "jitter" and rnd.random() < 0.2:
                shift = rnd.randint(-5000, 5000)
                db.execute(f"UPDATE {table} SET start = start + ?, end = end + ? WHERE rowid = ?", (shift, shift, row[0]))
            elif name == "zero-durations" and rnd.random() < 0.1:
                db.execute(f"UPDATE {table} SET end = start WHERE rowid = ? AND end IS NOT NULL", (row[0],))


def nsys_variants(path: Path, out: Path, seed: str) -> list[tuple[str, Callable[[], Path]]] | None:
    def make(name: str) -> Callable[[], Path]:
        def write() -> Path:
            target = out / f"{name}.sqlite"  # a new name each time: tracekit caches by path and content
            shutil.copyfile(path, target)
            target.chmod(0o644)
            rnd = random.Random(f"{seed}/{path.name}/{name}")
            with sqlite3.connect(target) as db:
                _nsys_mutate(name, db, rnd)
            db.close()
            return target
        return write
    return [(name, make(name)) for name in NSYS_MUTATIONS]


# --- XSpace protobuf: events on the lines of each plane ------------------------------------------
def _xspace_mutate(name: str, space: object, rnd: random.Random) -> None:
    lines = [(plane, line) for plane in space.planes for line in plane.lines]  # type: ignore[attr-defined]
    if name == "original":
        return
    if name == "drop-kinds":
        names = sorted({line.name for _, line in lines})
        gone = set(rnd.sample(names, max(1, len(names) // 3))) if names else set()
        for plane in space.planes:  # type: ignore[attr-defined]
            keep = [line for line in plane.lines if line.name not in gone]
            del plane.lines[:]
            plane.lines.extend(keep)
        return
    if name == "middle":
        starts = sorted(line.timestamp_ns * 1000 + e.offset_ps for _, line in lines for e in line.events)
        if not starts:
            return
        lo, hi = starts[len(starts) // 3], starts[2 * len(starts) // 3]
    for _, line in lines:
        events = list(line.events)
        if name == "drop":
            events = [e for e in events if rnd.random() > 0.1]
        elif name == "shuffle":  # a line's events in another order (ps timestamps: ties are rare)
            rnd.shuffle(events)
        elif name == "reverse":
            events.reverse()
        elif name == "repeat":
            events += rnd.sample(events, len(events) // 10)
        elif name == "middle":
            events = [e for e in events if lo <= line.timestamp_ns * 1000 + e.offset_ps <= hi]
        for e in events:
            if name == "jitter" and rnd.random() < 0.2:
                e.offset_ps = max(0, e.offset_ps + rnd.randint(-5_000_000, 5_000_000))
            elif name == "zero-durations" and rnd.random() < 0.1:
                e.duration_ps = 0
        copies = [type(e)() for e in events]
        for copy, e in zip(copies, events, strict=True):
            copy.CopyFrom(e)
        del line.events[:]
        line.events.extend(copies)


def xspace_variants(path: Path, out: Path, seed: str) -> list[tuple[str, Callable[[], Path]]] | None:
    from tracekit.ingest.xplane import XSpace

    data = path.read_bytes()

    def make(name: str) -> Callable[[], Path]:
        def write() -> Path:
            space = XSpace()
            space.ParseFromString(data)
            _xspace_mutate(name, space, random.Random(f"{seed}/{path.name}/{name}"))
            target = out / f"{name}.xplane.pb"
            target.write_bytes(space.SerializeToString())
            return target
        return write
    return [(name, make(name)) for name in MUTATION_NAMES]


# --- Facts every result must keep, whatever the trace --------------------------------------------
SIGNED_NS = ("start_ns", "end_ns", "saving_ns")  # times that may be negative: positions, a scenario that costs


def _numbers(doc: object, key: str = "") -> list[tuple[str, float]]:
    if isinstance(doc, dict):
        return [kv for k, v in doc.items() for kv in _numbers(v, k)]
    if isinstance(doc, list):
        return [kv for v in doc for kv in _numbers(v, key)]
    if isinstance(doc, (int, float)) and not isinstance(doc, bool):
        return [(key, float(doc))]
    return []


def _dicts(doc: object) -> list[dict]:
    if isinstance(doc, dict):
        return [doc] + [d for v in doc.values() for d in _dicts(v)]
    if isinstance(doc, list):
        return [d for v in doc for d in _dicts(v)]
    return []


STEP_RATIO = re.compile(r"takes (?P<ratio>[\d.]+)x as long as \w+ per step \((?P<b>[\d.,]+) (?P<bu>s|ms|µs|ns) vs "
                        r"(?P<a>[\d.,]+) (?P<au>s|ms|µs|ns)")
UNIT_S = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}
SHARE_OF = re.compile(r"(?<![+\-\d.])(\d+(?:\.\d+)?)% of (?:the|its|their|step|GPU|host|gap|kernel)")


def _seconds(number: str, unit: str) -> float:
    return float(number.replace(",", "")) * UNIT_S[unit]


def check_facts(text: str) -> list[str]:
    """What is false in a JSON result whatever the trace: a non-finite number, a negative duration, a
    share outside 0-100%, busy or idle time over its span, busy and idle not adding up to the span,
    critical-path shares not adding up to 100%, a step range out of order, a what-if saving that
    does not match its prediction, scenarios out of the order of their saving, a step ratio that is
    not its two times' quotient, a verdict's evidence saying more than 100% of a whole. (A range's GPU busy time is the sum of its activities, as nsys's
    projection sums them: over concurrent streams it can exceed the projected span.)"""
    bad: list[str] = []
    doc = json.loads(text, parse_constant=lambda c: bad.append(f"non-finite number {c}"))
    for key, value in _numbers(doc):
        if key.endswith("_ns") and key not in SIGNED_NS and value < 0:
            bad.append(f"{key} = {value:g} < 0")
        if (key.endswith("_pct") or key == "share") and not -0.01 <= value <= 100.01:
            bad.append(f"{key} = {value:g} outside 0-100")
    for d in _dicts(doc):
        span = d.get("span_ns")
        if isinstance(span, (int, float)):
            slack = span * 0.001 + 2
            for part in ("busy_ns", "idle_ns"):
                if isinstance(d.get(part), (int, float)) and d[part] > span + slack:
                    bad.append(f"{part} {d[part]:g} > span_ns {span:g}")
            if "busy_ns" in d and "idle_ns" in d and "activities" in d and abs(d["busy_ns"] + d["idle_ns"] - span) > slack:
                bad.append(f"busy_ns {d['busy_ns']:g} + idle_ns {d['idle_ns']:g} != span_ns {span:g}")
        for middle in ("median_ns", "mean_ns"):
            if all(isinstance(d.get(k), (int, float)) for k in ("min_ns", middle, "max_ns")) and \
                    not d["min_ns"] <= d[middle] * (1 + 1e-9) <= d["max_ns"] * (1 + 2e-9):
                bad.append(f"out of order: min {d['min_ns']} {middle} {d[middle]} max {d['max_ns']}")
        shares = d.get("shares_pct")
        if isinstance(shares, dict) and any(shares.values()) and abs(sum(shares.values()) - 100) > 0.5:
            bad.append(f"critical-path shares add up to {sum(shares.values()):.2f}%")
    verdict = doc.get("verdict") if isinstance(doc, dict) else None
    for sentence in verdict.get("evidence", []) if isinstance(verdict, dict) else []:
        for share in SHARE_OF.findall(str(sentence)):
            if float(share) > 100.5:
                bad.append(f"evidence says {share}% of a whole: {str(sentence)[:120]}")
    for finding in doc.get("findings", []) if isinstance(doc, dict) else []:
        said = STEP_RATIO.search(str(finding))
        if said:
            ratio, b, a = float(said["ratio"]), _seconds(said["b"], said["bu"]), _seconds(said["a"], said["au"])
            if a > 0 and abs(b / a - ratio) > 0.01 * ratio + 0.01:
                bad.append(f"said {ratio}x where {said['b']} {said['bu']} / {said['a']} {said['au']} is {b / a:.3f}")
    if isinstance(doc, dict) and isinstance(doc.get("scenarios"), list):
        base = doc.get("replayed_step_ns")
        savings = [s.get("saving_ns") for s in doc["scenarios"]]
        for s in doc["scenarios"]:
            if isinstance(base, (int, float)) and abs(s["predicted_step_ns"] + s["saving_ns"] - base) > base * 0.001 + 2:
                bad.append(f"{s['scenario']}: predicted {s['predicted_step_ns']} + saving {s['saving_ns']} != replayed {base}")
        if savings != sorted(savings, reverse=True):
            bad.append(f"scenarios not ranked by saving: {savings}")
    return bad


SAME_TRACE = {"original": "", "parquet": "its tracekit Parquet gives another result",
              "shuffle": "the events in another order give another result",
              "reverse": "the events in another order give another result"}
FILE_SPECIFIC = ("title", "row", "parent")  # a result's own file name; row numbers of the file's order


def order_free(text: str, names: tuple[str, ...]) -> object:
    """A JSON result without what depends on the file's name or its order of events, for comparing
    the results of one trace written in two orders."""
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in FILE_SPECIFIC}
        if isinstance(x, list):
            return [strip(v) for v in x]
        if isinstance(x, str):
            for name in names:
                x = x.replace(name, "TRACE")
        return x
    return strip(json.loads(text))


FORMATS = {
    "kineto": ("*.json.gz", kineto_variants),
    "nsys": ("*.sqlite", nsys_variants),
    "xspace": ("*.xplane.pb", xspace_variants),
}


def with_parquet(variants: list[tuple[str, Callable[[], Path]]], out: Path) -> list[tuple[str, Callable[[], Path]]]:
    """The variants with, right after the original, its tracekit Parquet (``tracekit ingest``): the
    same results as the file it was read from."""
    written: dict[str, Path] = {}

    def original(write: Callable[[], Path]) -> Path:
        written["original"] = write()
        return written["original"]

    def parquet() -> Path:
        target = out / "original.parquet"
        with contextlib.redirect_stdout(io.StringIO()):
            if tracekit_cli.main(["ingest", str(written["original"]), "-o", str(target), "--force"]) != 0:
                raise RuntimeError(f"tracekit ingest failed on {written['original']}")
        return target

    result: list[tuple[str, Callable[[], Path]]] = []
    for name, write in variants:
        if name == "original":
            result += [(name, lambda write=write: original(write)), ("parquet", parquet)]
        else:
            result.append((name, write))
    return result


def default_traces(formats: list[str]) -> list[Path]:
    """Every trace of the chosen formats in tests/data and ../shared/traces (files of a pattern that
    are no trace of that format, such as ONNX Runtime's JSON, are skipped as they are read)."""
    return [p for fmt in formats for root in (REPO / "tests" / "data", SHARED)
            for p in sorted(root.rglob(FORMATS[fmt][0]))]


def _format_of(path: Path) -> str:
    return next((fmt for fmt, (pattern, _) in FORMATS.items() if path.match(pattern)), "kineto")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--seconds", type=float, default=600.0, help="stop starting new traces after this long")
    ap.add_argument("--seed", default=datetime.date.today().strftime("%Y%m%d"))
    ap.add_argument("--format", default="kineto,nsys,xspace", help="the formats of the default traces")
    ap.add_argument("--mutations", help="only these, comma-separated (original,shuffle: the order check alone)")
    args = ap.parse_args()
    traces = args.traces or default_traces(args.format.split(","))
    started, runs, crashes, false_facts, done = time.perf_counter(), 0, 0, 0, 0
    for path in traces:
        if time.perf_counter() - started > args.seconds:
            break
        with tempfile.TemporaryDirectory() as tmp:
            variants = FORMATS[_format_of(path)][1](path, Path(tmp), args.seed)
            if variants is None:
                continue
            originals: dict[str, object] = {}
            for name, write in with_parquet(variants, Path(tmp)):
                chosen = args.mutations.split(",") if args.mutations else []
                # The Parquet copy is made from the original: checked only where the original is.
                if chosen and name not in chosen + (["parquet"] if "original" in chosen else []):
                    continue
                mutated = write()
                for analysis in ANALYSES:
                    runs += 1
                    try:
                        result = tracekit.compare([path, mutated]) if analysis == "compare" else \
                            getattr(tracekit, analysis)(mutated)
                        text = tracekit.render(result, "json")
                        problems = check_facts(text)
                        # The same events in another order, or stored as tracekit Parquet, are the
                        # same trace: every result the same.
                        if name in SAME_TRACE and analysis != "compare":
                            seen = order_free(text, (str(path), str(mutated)))
                            if name == "original":
                                originals[analysis] = seen
                            elif originals.get(analysis) not in (None, seen):
                                problems.append(SAME_TRACE[name])
                        false_facts += bool(problems)
                        for problem in problems[:3]:
                            print(f"FALSE {path.name} {name} {analysis}: {problem}", flush=True)
                    except TracekitError:
                        pass
                    except Exception as exc:  # the point: anything but tracekit's own errors is a crash
                        crashes += 1
                        where = traceback.extract_tb(exc.__traceback__)[-1]
                        print(f"CRASH {path.name} {name} {analysis}: {type(exc).__name__}: {exc} "
                              f"({Path(where.filename).name}:{where.lineno}; replay with --seed {args.seed} {path})",
                              flush=True)
            done += 1
    print(f"{done} traces, {runs:,} runs (original and mutations x {len(ANALYSES)} analyses), {crashes} crashes, "
          f"{false_facts} results with a false fact, {time.perf_counter() - started:,.0f} s, seed {args.seed}")
    return 1 if crashes or false_facts else 0


if __name__ == "__main__":
    sys.exit(main())
