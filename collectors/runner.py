"""Resumable sweeps: run each spec once, write its manifest row, skip what a directory already has.

Framework collectors (and the native baseline) supply ``execute(spec, out_dir) -> row``; this
module does the bookkeeping they share: identity, skipping, failure capture, progress, manifest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import platform
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tracekit import manifest
from tracekit.errors import UsageError


@dataclass(frozen=True)
class RunSpec:
    """One run: a variant at a config on a device under one profiler ("none", "torch", "tf", "nsys")."""

    framework: str
    variant: str
    group: str  # layer | lm | baseline
    device: str
    dtype: str
    config: dict[str, int] = field(hash=False)
    profiler: str
    preset: str
    warmup: int
    repeats: int
    profiled_steps: int
    seed: int = 0
    threads: int = 1
    skip_reason: str | None = None

    @property
    def run_id(self) -> str:
        return manifest.run_id(self.framework, self.variant, self.device, self.dtype, self.config, self.profiler)

    @property
    def file_stem(self) -> str:
        """Trace file name stem, unique within framework/variant: device-dtype-sizes-profiler."""
        sizes = "-".join(f"{k[0]}{self.config[k]}" for k in sorted(self.config))
        return f"{self.device}-{self.dtype}-{sizes}-{self.profiler}"

    def base_row(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "framework": self.framework, "variant": self.variant,
                "variant_group": self.group, "device": self.device, "dtype": self.dtype,
                "config": dict(self.config), "profiler": self.profiler, "preset": self.preset,
                "seed": self.seed, "threads": self.threads, "host": platform.node()}


    def to_json(self) -> str:
        """The spec for a child process (the nsys worker); ``spec_from_json`` reads it back."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def spec_from_json(text: str) -> RunSpec:
    return RunSpec(**json.loads(text))


Execute = Callable[[RunSpec, Path], dict[str, Any]]


@dataclass
class SweepResult:
    ran: list[dict[str, Any]]
    reused: list[str]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [row for row in self.ran if row["status"] == "failed"]


def check_choices(framework: str, variants: Sequence[str], known_variants: Iterable[str], profilers: Sequence[str],
                  known_profilers: Sequence[str]) -> None:
    """Usage errors for variant or profiler names a collector does not know."""
    known = list(known_variants)
    for what, given, allowed in (("variant", variants, known), ("profiler", profilers, list(known_profilers))):
        unknown = [g for g in given if g not in allowed]
        if unknown:
            raise UsageError(f"unknown {framework} {what}(s) {', '.join(unknown)}; choose from {', '.join(allowed)}")


def cpu_model_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), for the manifest's device_name on CPU runs."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def run_sweep(specs: Sequence[RunSpec], out_dir: Path, execute: Execute, progress: bool | None = None,
              log: Callable[[str], None] | None = None, terminal: TextIO | None = None) -> SweepResult:
    """Run every spec not already finished in ``out_dir``; a failure is recorded and the sweep goes on.

    ``progress``: a transient bar on ``terminal`` (default stderr; shown only when it is a terminal).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    finished = manifest.read_manifest(out_dir).finished()
    todo = [s for s in specs if s.run_id not in finished]
    reused = [s.run_id for s in specs if s.run_id in finished]
    ran: list[dict[str, Any]] = []
    stream = terminal or sys.stderr
    show = stream.isatty() if progress is None else progress
    bar = _Progress(len(todo), show, stream)
    with bar:
        for spec in todo:
            bar.describe(spec.run_id)
            row = _execute_one(spec, out_dir, execute)
            manifest.append_rows(out_dir, [row])
            ran.append(row)
            if log is not None:
                log(_one_line(row))
            bar.advance()
    return SweepResult(ran, reused)


@contextlib.contextmanager
def output_to_log(log_path: Path) -> Iterator[TextIO]:
    """Send everything written to file descriptors 1 and 2 (profiler and framework chatter from C++,
    Python and child processes alike) to ``log_path``; yields a text stream on the real stderr for
    the caller's own progress and messages."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(saved_err), "w", buffering=1, encoding="utf-8", errors="replace")
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield terminal
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved_out, 1)
                os.dup2(saved_err, 2)
    finally:
        terminal.close()
        os.close(saved_out)
        os.close(saved_err)


def _execute_one(spec: RunSpec, out_dir: Path, execute: Execute) -> dict[str, Any]:
    row = spec.base_row()
    if spec.skip_reason:
        row.update(status="skipped", error=spec.skip_reason, traces=[])
    else:
        try:
            row.update(execute(spec, out_dir))
            row.setdefault("status", "ok")
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one variant's failure must not stop the sweep; the row says why
            last = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
            where = f" ({Path(last.filename).name}:{last.lineno})" if last else ""
            row.update(status="failed", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}{where}",
                       traces=[])
    row["finished_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return row


def _one_line(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status']:7} {row['run_id']}: {row.get('error')}"
    wall = (row.get("timing") or row.get("profiled_timing") or {}).get("wall_ns", {}).get("median")
    return f"ok      {row['run_id']}" + (f": {wall / 1e6:,.3f} ms/step" if wall else "")


class _Progress:
    """rich progress bar, transient and on stderr; a no-op when not shown."""

    def __init__(self, total: int, show: bool, stream: TextIO) -> None:
        self.show = show and total > 0
        self.stream = stream
        self._bar: Any = None
        self._task: Any = None
        self.total = total

    def __enter__(self) -> _Progress:
        if self.show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(file=self.stream), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("collect", total=self.total)
        return self

    def describe(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text[-60:])

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
