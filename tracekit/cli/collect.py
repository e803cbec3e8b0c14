"""tracekit collect torch|tf: run LSTM variants over a sweep preset under a profiler, resumably."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tracekit.errors import TracekitError, UsageError


class CollectCommand:
    name = "collect"
    help = "run the LSTM variants of a framework over a sweep preset, timed and profiled, into DIR"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("framework", choices=("torch", "tf"), help="which framework's variants to run")
        parser.add_argument("-o", "--output", metavar="DIR",
                            help="collection directory: manifest.jsonl and traces/ (resumed if it exists)")
        parser.add_argument("--variants", default="all", help="comma-separated variant names, or 'all' (see --list)")
        parser.add_argument("--preset", default="quick", help="sweep preset: tiny, quick, hidden or paper (default quick)")
        parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                            help="where to run (auto: cuda when available)")
        parser.add_argument("--profiler", default=None,
                            help="comma-separated: the framework's profiler (torch|tf), nsys, none "
                                 "(default: the framework's profiler)")
        parser.add_argument("--threads", type=int, default=1,
                            help="intra-op CPU threads (default 1: stable on shared machines; 0 = framework default)")
        parser.add_argument("--seed", type=int, default=0, help="seed for weights and inputs")
        parser.add_argument("--nsys", metavar="PATH", help="the nsys executable (default: $TRACEKIT_NSYS, PATH, "
                                                           "then collectors/get_nsys.sh's cache)")
        parser.add_argument("--list", action="store_true", help="list the variants and presets, then exit")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        backend = _backend(args.framework)
        from tracekit.collectors.runner import run_sweep
        from tracekit.collectors.sweep import PRESETS, preset

        if args.list:
            for name, description in backend.VARIANTS.items():
                print(f"{name:28} {description}")
            print()
            for p in PRESETS.values():
                print(f"preset {p.name:7} {p.description}")
            return 0
        if not args.output:
            raise UsageError("collect needs -o DIR (the collection directory)")
        device = args.device if args.device != "auto" else backend.detect_device()
        variants = backend.default_variants(device) if args.variants == "all" else \
            [v.strip() for v in args.variants.split(",") if v.strip()]
        profilers = [p.strip() for p in (args.profiler or args.framework).split(",") if p.strip()]
        if args.nsys:
            os.environ["TRACEKIT_NSYS"] = args.nsys
        if "nsys" in profilers:
            from tracekit.collectors.nsys import find_nsys

            find_nsys()  # fail before the sweep, with how to get it, rather than once per run
        specs = backend.specs(variants, preset(args.preset), device, profilers, seed=args.seed, threads=args.threads)
        out = Path(args.output)
        if out.exists() and not out.is_dir():
            raise UsageError(f"{out}: exists and is not a directory")
        result = run_sweep(specs, out, backend.execute, progress=False if args.no_progress else None,
                           log=lambda line: print(line, file=sys.stderr))
        print(f"{len(result.ran)} run(s), {len(result.reused)} already done, {len(result.failed)} failed; "
              f"manifest: {out / 'manifest.jsonl'}")
        return 1 if result.failed else 0


def _backend(framework: str) -> Any:  # a module: VARIANTS, default_variants, specs, execute, detect_device
    try:
        if framework == "torch":
            from tracekit.collectors.pytorch import cli_backend
        else:
            from tracekit.collectors.tflow import cli_backend  # type: ignore[no-redef]
    except ImportError as e:
        missing = e.name or framework
        raise TracekitError(f"collect {framework}: cannot import {missing} ({e}); install the framework first "
                            f"(pip install torch==2.13.0 on CPU machines, or pip install 'tracekit[tf]')") from None
    return cli_backend
