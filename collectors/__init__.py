"""Workloads and profiler drivers that produce the traces tracekit analyzes.

``sweep`` (presets shared by all collectors and the baseline), ``timing`` (unprofiled step
timing), ``phases`` (NVTX ranges that Nsight Systems really records), ``nsys`` (running a
command under Nsight Systems and exporting SQLite), ``runner`` (resumable sweeps writing the
manifest), and one sub-package per framework: ``pytorch``.
"""
