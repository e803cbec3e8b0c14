"""tracekit run: the whole study in one command -- collect, baseline, ingest, analyze, report."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tracekit.cli._output import write_atomic
from tracekit.errors import UsageError


class RunCommand:
    name = "run"
    help = ("run the PyTorch and TensorFlow LSTM variants and the native baseline on this machine, profile them, "
            "and write report.html / report.md with the published findings beside the measured ones")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-o", "--output", metavar="DIR", default="tracekit-run",
                            help="study directory (default ./tracekit-run); a second run reuses finished configs")
        parser.add_argument("--preset", default="quick", help="tiny, quick (default; ~5 min on a 2-core CPU) or paper")
        parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
        parser.add_argument("--frameworks", default="torch,tf,native", help="comma-separated subset of torch,tf,native")
        parser.add_argument("--threads", type=int, default=1, help="intra-op CPU threads (default 1)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-nsys", action="store_true", help="skip the Nsight Systems runs even when nsys is present")
        parser.add_argument("--no-progress", action="store_true", help="log one line per run instead of a progress bar")

    def run(self, args: argparse.Namespace) -> int:
        from collectors import study
        from collectors.runner import output_to_log
        from collectors.sweep import LMConfig, preset

        started = time.perf_counter()
        chosen = preset(args.preset)
        frameworks = tuple(f.strip() for f in args.frameworks.split(",") if f.strip())
        unknown = set(frameworks) - {"torch", "tf", "native"}
        if unknown:
            raise UsageError(f"unknown framework(s) {', '.join(sorted(unknown))}; choose from torch, tf, native")
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise UsageError(f"{out}: exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        log_path = out / "run.log"
        # Frameworks and profilers talk on stdout/stderr (TF's C++ logging, "Starting to trace ...",
        # USDT probes); that goes to run.log so the terminal shows only tracekit's own progress.
        with output_to_log(log_path) as terminal:
            device = args.device if args.device != "auto" else _detect_device()
            plan = study.plan(chosen, device, threads=args.threads, seed=args.seed,
                              with_nsys=False if args.no_nsys else None, frameworks=frameworks)
            if not plan.specs:
                raise UsageError("nothing to run: " + " ".join(plan.notes))
            for note in plan.notes:
                print(f"note: {note}", file=terminal)
            result = study.collect(plan, out, progress=False if args.no_progress else None, terminal=terminal)
        document = analyze(out, chosen.name, device, plan.notes, time.perf_counter() - started,
                           len(result.reused), chosen.lm == LMConfig())
        from tracekit.render.html_report import HtmlRenderer
        from tracekit.render.markdown_report import MarkdownRenderer

        write_atomic(out / "report.html", HtmlRenderer().render(document))
        write_atomic(out / "report.md", MarkdownRenderer().render(document))
        _print_summary(document)
        print(f"wrote {out / 'report.html'} and {out / 'report.md'}; framework and profiler output in {log_path}")
        return 1 if result.failed else 0


def analyze(out: Path, preset_name: str, device: str, notes: list[str], wall_s: float, reused: int,
            lm_is_paper_size: bool):  # -> Document
    from tracekit import dataset
    from tracekit.analyze.breakdown import breakdown
    from tracekit.analyze.launch import launch
    from tracekit.analyze.overhead import TRACED_PROFILERS, decomposable, overhead
    from tracekit.analyze.published import findings
    from tracekit.ingest import parquet
    from tracekit.manifest import read_manifest
    from tracekit.render.study_document import StudyFacts, study_document

    m = read_manifest(out)
    latest = m.latest()
    rows = list(latest.values())
    # Every run's first trace (an nsys run's SQLite, not its .nsys-rep) into DIR/dataset/, run = framework.
    first_trace = {str(m.trace_paths(r)[0]): rid for rid, r in latest.items() if r["status"] == "ok" and r.get("traces")}
    ingested: dict[str, dataset.Entry] = {}
    errors: list[str] = []
    for framework in sorted({latest[rid]["framework"] for rid in first_trace.values()}):
        paths = [p for p, rid in first_trace.items() if latest[rid]["framework"] == framework]
        result = dataset.ingest(paths, out / "dataset", run=framework)
        ingested.update(result.by_file)
        errors += result.errors
    tables = {first_trace[path]: parquet.read(out / "dataset" / entry.partition) for path, entry in ingested.items()
              if latest[first_trace[path]]["profiler"] in TRACED_PROFILERS}
    breakdowns = {rid: breakdown(t) for rid, t in tables.items()}
    launches = {rid: launch(t, bd=breakdowns[rid]) for rid, t in tables.items() if breakdowns[rid].has_gpu}
    layer_tables = {rid: t for rid, t in tables.items() if decomposable(latest[rid])}
    names = [r.get("device_name") for r in rows if r.get("device") == device and r.get("device_name")]
    facts = StudyFacts(str(out), preset_name, device, str(names[0]) if names else device, wall_s,
                       sum(1 for r in rows if r["status"] == "ok"),
                       [{"run_id": r["run_id"], "status": r["status"], "reason": str(r.get("error") or "")}
                        for r in sorted(rows, key=lambda r: r["run_id"]) if r["status"] != "ok"], reused,
                       notes + [f"not ingested: {e}" for e in errors])
    return study_document(facts, rows, breakdowns, launches, findings(rows, breakdowns, device, lm_is_paper_size),
                          overhead(rows, layer_tables))


def _print_summary(document) -> None:
    """The facts and the published-vs-measured section on the terminal."""
    from rich.console import Console

    from tracekit.render.document import Document
    from tracekit.render.terminal_report import TerminalRenderer

    short = Document(document.title, document.kind, document.facts,
                     [s for s in document.sections if s.title in ("Summary", "Published vs measured")], {})
    renderer = TerminalRenderer()
    if sys.stdout.isatty():
        renderer.print(short, Console())
    else:
        sys.stdout.write(renderer.render(short))


def _detect_device() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    except ImportError:
        pass
    from tracekit.cli.baseline import _detect_device as smi

    return smi()
