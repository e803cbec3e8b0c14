"""tracekit baseline: build the native LSTM baselines once and run them over a sweep preset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracekit.errors import UsageError


class BaselineCommand:
    name = "baseline"
    help = "build (once) and run the native LSTM baselines (C++ BLAS; cuDNN and cuBLAS on GPU) over a preset"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-o", "--output", metavar="DIR", help="collection directory (manifest.jsonl), resumed if it exists")
        parser.add_argument("--variants", default="all", help="comma-separated: cpu_blas, cudnn_lstm, cublas_lstm, or 'all'")
        parser.add_argument("--preset", default="quick", help="sweep preset: tiny, quick, hidden or paper (default quick)")
        parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                            help="auto: cuda when nvidia-smi sees a GPU")
        parser.add_argument("--dtype", default="fp32", help="comma-separated dtypes for the CUDA baselines: fp32, fp16")
        parser.add_argument("--profiler", default="none", help="none or nsys")
        parser.add_argument("--threads", type=int, default=1, help="BLAS threads of the CPU baseline (default 1)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--build-only", action="store_true", help="build and print where, then exit")
        parser.add_argument("--no-progress", action="store_true")

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.collectors import native
        from tracekit.collectors.runner import run_sweep
        from tracekit.collectors.sweep import preset

        device = args.device if args.device != "auto" else _detect_device()
        variants = native.default_variants(device) if args.variants == "all" else \
            [v.strip() for v in args.variants.split(",") if v.strip()]
        specs = native.specs(variants, preset(args.preset), device, [p.strip() for p in args.profiler.split(",")],
                             seed=args.seed, threads=args.threads, dtypes=[d.strip() for d in args.dtype.split(",")])
        if not args.build_only and not args.output:
            raise UsageError("baseline needs -o DIR (or --build-only)")
        built = native.build(cuda=any(v != "cpu_blas" for v in variants) and device == "cuda")
        if args.build_only:
            print(built.directory)
            return 0
        result = run_sweep(specs, Path(args.output), native.executor(built), progress=False if args.no_progress else None,
                           log=lambda line: print(line, file=sys.stderr))
        print(f"{len(result.ran)} run(s), {len(result.reused)} already done, {len(result.failed)} failed; "
              f"manifest: {Path(args.output) / 'manifest.jsonl'}")
        return 1 if result.failed else 0


def _detect_device() -> str:
    from tracekit.study import gpu_listed_by_nvidia_smi

    return "cuda" if gpu_listed_by_nvidia_smi() else "cpu"
