"""tracekit run: the whole study in one command -- collect, baseline, ingest, analyze, report."""

from __future__ import annotations

import argparse
import sys
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
        parser.add_argument("--preset", default="quick", help="tiny, quick (default; ~5 min on a 2-core CPU), hidden or paper")
        parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
        parser.add_argument("--frameworks", default="torch,tf,native", help="comma-separated subset of torch,tf,native")
        parser.add_argument("--threads", type=int, default=1, help="intra-op CPU threads (default 1)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-nsys", action="store_true", help="skip the Nsight Systems runs even when nsys is present")
        parser.add_argument("--no-progress", action="store_true", help="log one line per run instead of a progress bar")

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.collectors.runner import output_to_log
        from tracekit.render.html_report import HtmlRenderer
        from tracekit.render.markdown_report import MarkdownRenderer
        from tracekit.render.study_document import study_document
        from tracekit.study import run_study

        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise UsageError(f"{out}: exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        log_path = out / "run.log"
        # Frameworks and profilers talk on stdout/stderr (TF's C++ logging, "Starting to trace ...",
        # USDT probes); that goes to run.log so the terminal shows only tracekit's own progress.
        with output_to_log(log_path) as terminal:
            study = run_study(out, args.preset, args.device,
                              tuple(f.strip() for f in args.frameworks.split(",") if f.strip()), args.threads, args.seed,
                              False if args.no_nsys else None, False if args.no_progress else None, terminal)
        document = study_document(study)
        write_atomic(out / "report.html", HtmlRenderer().render(document))
        write_atomic(out / "report.md", MarkdownRenderer().render(document))
        _print_summary(document)
        print(f"wrote {out / 'report.html'} and {out / 'report.md'}; framework and profiler output in {log_path}")
        return 1 if study.failed else 0


def _print_summary(document) -> None:
    """The facts and the published-vs-measured section on the terminal."""
    from tracekit.render.document import Document
    from tracekit.render.terminal_report import TerminalRenderer, data_console

    short = Document(document.title, document.kind, document.facts,
                     [s for s in document.sections if s.title in ("Summary", "Published vs measured")], {})
    renderer = TerminalRenderer()
    if sys.stdout.isatty():
        renderer.print(short, data_console())
    else:
        sys.stdout.write(renderer.render(short))
