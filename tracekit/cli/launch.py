"""tracekit launch TRACE: launch-overhead diagnosis with a verdict, evidence and remedies."""

from __future__ import annotations

import argparse

from tracekit.cli._output import add_output_arguments, add_step_arguments, emit, load_trace


class LaunchCommand:
    name = "launch"
    help = "diagnose launch overhead: launch vs kernel time, launch delay, idle gaps, verdict and remedies"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a trace file, XSpace run directory or tracekit Parquet file")
        parser.add_argument("--short-kernel-us", type=float, default=10.0, help="kernels shorter than this are short (µs)")
        parser.add_argument("--idle-threshold", type=float, default=0.3, help="GPU idle share that counts as starved (0-1)")
        parser.add_argument("--timesteps", type=int, help="recurrent timesteps per step, to report ops per timestep")
        add_step_arguments(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        trace = load_trace(args.trace)  # imports tracekit.api while it reads
        from tracekit import api

        result = api.launch(trace, short_kernel_ns=int(args.short_kernel_us * 1000), idle_threshold=args.idle_threshold,
                            timesteps=args.timesteps, skip_steps=args.skip_steps, keep_all_steps=args.keep_all_steps)
        emit(api.document(result), args)
        return 0
