"""Which host memory a GPU copy used (tracekit.analyze.copies), read from each format's own record of
it on real traces: Kineto's copy names, nsys's srcKind/dstKind columns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit.analyze.copies import NOT_PAGEABLE, PAGEABLE, UNKNOWN, host_memory, pageable_share
from tracekit.analyze.frame import frame_of
from tracekit.analyze.verdicts import GPU_COPY_REMEDY, GPU_COPY_REMEDY_PAGEABLE, Evidence, judge

H200 = Path(__file__).parent / "data" / "h200"
NSYS = TRACES / "nsys"


def _kinds(path: Path) -> np.ndarray:
    frame = frame_of(tracekit.load(path))
    return np.bincount(host_memory(frame, frame.rows("gpu_memcpy")), minlength=3)


@needs_shared
@pytest.mark.parametrize(("name", "pageable", "not_pageable"), [
    ("keras_tf_darknet53_nsys2023.4.sqlite", 1369, 0),  # 739 HtoD and 630 DtoH, all pageable
    ("abacus_pytorch_cnn_titanrtx_nsys2023.4.sqlite", 1258, 60),  # pageable HtoD; device-to-device
    ("dlprof_pytorch_cnn_rtx2070s_nsys2022.1.sqlite", 12, 0),  # 2022.1: no ENUM table, nsys's numbering
    ("memfusion_dl_nsys2023.1.sqlite", 0, 4),
])
def test_nsys_copies_take_their_memory_kinds_from_their_columns(name: str, pageable: int, not_pageable: int) -> None:
    assert _kinds(NSYS / name).tolist() == [0, pageable, not_pageable]


@needs_shared
def test_nsys_args_hold_the_memory_kinds_labels() -> None:
    table = tracekit.load(NSYS / "keras_tf_darknet53_nsys2023.4.sqlite")
    args = table.filter(pc.equal(table["kind"], "gpu_memcpy"))["args"].to_pylist()
    kinds = {(a["srcKind"], a["dstKind"], a["copyKind"]) for a in map(json.loads, args)}
    assert kinds == {("Pageable", "Device", 1), ("Device", "Pageable", 2)}


def test_kineto_copies_name_their_memory() -> None:
    # A 64 MB batch from pageable memory each step; .item()'s copies land in pinned memory.
    assert _kinds(H200 / "pageable_copy.pt.trace.json.gz")[[UNKNOWN, PAGEABLE]].tolist() == [0, 4]
    frame = frame_of(tracekit.load(H200 / "item_sync.pt.trace.json.gz"))
    assert (host_memory(frame, frame.rows("gpu_memcpy")) == NOT_PAGEABLE).all()
    assert pageable_share(frame) == 0.0


@needs_shared
def test_one_stray_pageable_copy_does_not_make_the_copies_pageable() -> None:
    # HTA's rank0 trace: 75 small pageable copies beside 1,315 pinned or device ones (0.3% of the time).
    frame = frame_of(tracekit.load(TRACES / "hta" / "negative_queue_length_values_check" / "rank0.json.gz"))
    share = pageable_share(frame)
    assert 0 < share < 0.01
    for pageable, remedy in ((share, GPU_COPY_REMEDY), (0.9, GPU_COPY_REMEDY_PAGEABLE)):
        verdict, _, remedies = judge(Evidence(has_gpu=True, idle_share=0.05, top_gpu_class="memcpy",
                                              pageable_copy_share=pageable))
        assert (verdict, remedies) == ("GPU-bound", [remedy])
