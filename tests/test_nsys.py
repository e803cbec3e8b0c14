"""nsys: per-kernel and per-API sums from the event table equal nsys's own `nsys stats` CSVs exactly."""

from __future__ import annotations

import csv
import gzip
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import TRACES, ids, needs_shared, shared_files

import tracekit
from tracekit.ingest import nsys

SAMPLES = shared_files("nsys/*.sqlite")


def expected(stem: str, report: str) -> list[dict[str, str]]:
    base = TRACES / "nsys" / "expected_nsys2023.4" / stem / report
    opener = gzip.open if not base.exists() else open
    path = base if base.exists() else base.with_name(base.name + ".gz")
    with opener(path, "rt") as f:
        return list(csv.DictReader(f))


def sums(table: pa.Table, kinds: list[str]) -> dict[str, tuple[int, int]]:
    rows = table.filter(pc.is_in(pc.cast(table["kind"], pa.string()), pa.array(kinds)))
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, dur in zip(rows["name"].to_pylist(), rows["dur_ns"].to_pylist(), strict=True):
        out[name][0] += 1
        out[name][1] += dur
    return {k: (v[0], v[1]) for k, v in out.items()}


def expected_sums(rows: list[dict[str, str]], count_col: str) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:  # nsys groups by string id; two ids can print the same name
        out[r["Name"]][0] += int(r[count_col])
        out[r["Name"]][1] += int(r["Total Time (ns)"])
    return {k: (v[0], v[1]) for k, v in out.items()}


@needs_shared
@pytest.mark.parametrize("path", SAMPLES, ids=ids(SAMPLES))
def test_kernel_and_api_sums_equal_nsys_stats(path):
    table = tracekit.load(path)
    stem = path.name[: -len(".sqlite")]
    assert sums(table, ["gpu_kernel"]) == expected_sums(expected(stem, "stats_cuda_gpu_kern_sum.csv"), "Instances")
    assert sums(table, ["runtime_api", "driver_api"]) == expected_sums(expected(stem, "stats_cuda_api_sum.csv"), "Num Calls")


@needs_shared
@pytest.mark.parametrize("path", SAMPLES, ids=ids(SAMPLES))
def test_every_kernel_is_linked_to_its_launch_call(path):
    table = tracekit.load(path)
    kernels = table.filter(pc.equal(pc.cast(table["kind"], pa.string()), "gpu_kernel"))
    launch = kernels["launch_row"].to_pylist()
    assert None not in launch  # in all 7 samples every kernel has exactly one runtime row
    names = table["name"].to_pylist()
    corr = table["correlation_id"].to_pylist()
    for k_corr, row in zip(kernels["correlation_id"].to_pylist(), launch, strict=True):
        assert corr[row] == k_corr
        assert "Launch" in names[row] or "launch" in names[row] or names[row].startswith("cu")


@needs_shared
def test_nvtx_domains_and_registered_strings_are_resolved():
    keras = tracekit.load(TRACES / "nsys" / "keras_tf_darknet53_nsys2023.4.sqlite")
    # Its two Forward:Model calls are the loop's iterations: step rows (tracekit.ingest.step_inference).
    ranges = keras.filter(pc.is_in(pc.cast(keras["kind"], pa.string()), pa.array(["user_range", "step"])))
    assert set(ranges["name"].to_pylist()) == {"Forward:Model"}
    trt = tracekit.load(TRACES / "nsys" / "memfusion_dl_nsys2023.1.sqlite")
    names = set(trt.filter(pc.equal(pc.cast(trt["kind"], pa.string()), "user_range"))["name"].to_pylist())
    assert "TensorRT:ExecutionContext::execute" in names


@needs_shared
def test_nvtx_range_totals_equal_nsys_nvtx_sum():
    for path in SAMPLES:
        rows = expected(path.name[: -len(".sqlite")], "stats_nvtx_sum.csv")
        if not rows:
            continue
        table = tracekit.load(path)
        # NVTX ranges: user_range rows, and step rows where one range's calls are the loop's iterations.
        ranges = table.filter(pc.and_(pc.is_in(pc.cast(table["kind"], pa.string()), pa.array(["user_range", "step"])),
                                      pc.is_valid(table["dur_ns"])))
        got = sums(ranges, ["user_range", "step"])
        for r in rows:
            count, total = got.get(r["Range"].lstrip(":"), got.get(r["Range"], (0, 0)))
            assert (count, total) == (int(r["Instances"]), int(r["Total Time (ns)"])), (path.name, r["Range"])


def test_api_display_name_follows_nsys():
    assert nsys.api_display_name("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert nsys.api_display_name("cudaGetDeviceProperties_v2_v12000") == "cudaGetDeviceProperties_v2_v12000"
    assert nsys.api_display_name("cuLaunchKernel") == "cuLaunchKernel"
