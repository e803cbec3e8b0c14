"""Collective kernels on the GPU (tracekit/analyze/gpu_communication.py): their overlap with compute
against HTA's get_comm_comp_overlap on the real NCCL traces in ../shared/traces/hta, and what the
verdict does with them: a rank whose NCCL kernels lead the busy time is told the communication remedy,
not "optimize the top kernels"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import TRACES, needs_shared

import tracekit
from tracekit.analyze import verdicts
from tracekit.analyze.frame import frame_of
from tracekit.analyze.gpu_communication import GpuCommunication, collective_name, gpu_communication
from tracekit.ingest import load

ORACLE = json.loads((Path(__file__).parent / "oracles" / "hta_comm_overlap_0.6.1.json").read_text())["traces"]
HTA = TRACES / "hta"


def _as_hta_reads_it(table: pa.Table) -> pa.Table:
    """The trace with the GPU activities HTA drops given no time: those no host call launched, and those
    launched after the last ProfilerStep ended (its include_last_profiler_step=True filter). Their rows
    stay (row links index the table)."""
    frame = frame_of(table)
    steps = frame.rows("step")
    last_end = frame.end[steps].max() if steps.size else frame.end.max()
    gpu = frame.rows("gpu_kernel", "gpu_memcpy", "gpu_memset")
    launch = frame.launch_row[gpu]
    dropped = gpu[(launch < 0) | (frame.start[np.maximum(launch, 0)] > last_end)]
    dur = frame.dur.copy()
    dur[dropped] = 0
    i = table.schema.get_field_index("dur_ns")
    return table.set_column(i, table.schema.field(i), pa.array(dur, table.schema.field(i).type))


@needs_shared
@pytest.mark.parametrize("rel", sorted(ORACLE))
def test_overlap_matches_htas_comm_comp_overlap(rel: str) -> None:
    hta = ORACLE[rel]["comp_comm_overlap_pctg"]
    found = gpu_communication(frame_of(_as_hta_reads_it(load(HTA / rel))), None)
    assert found is not None
    assert 100 * found.overlap == pytest.approx(hta, abs=0.1), (rel, found)


@needs_shared
def test_collectives_leading_the_busy_time_get_the_communication_remedy_first() -> None:
    """trace_diff/control: NCCL kernels are 42% of the busy time (send/recv most of it), 19% of the span
    with no compute beside them. Before: "GPU-bound ... optimize the top kernels ... or fuse elementwise
    work" and nothing about the collectives."""
    launch = tracekit.report(HTA / "trace_diff" / "control" / "control.json.gz").launch
    assert launch.verdict == "GPU-bound"
    found = launch.gpu_communication
    assert found is not None and found.point_to_point
    assert 0.17 <= found.exposed_share <= 0.21 and 0.44 <= found.overlap <= 0.49, found
    said = next(e for e in launch.evidence if e.startswith("collective kernels"))
    assert "(SendRecv 80%, AllReduce 20%)" in said and "19% of the span is communication alone" in said, said
    assert launch.remedies[:2] == [verdicts.POINT_TO_POINT_REMEDY, verdicts.GPU_BOUND_REMEDY]
    doc = json.loads(tracekit.render(tracekit.report(HTA / "trace_diff" / "control" / "control.json.gz"), "json"))
    assert doc["gpu_communication"]["collectives"][0]["collective"] == "SendRecv"


@needs_shared
def test_all_reduce_alone_beside_another_verdict_is_told_ddps_remedy() -> None:
    """df_index_resolver: the all-reduces overlap no compute kernel (HTA: 0.0%) and run alone for 21% of
    the span; the GPU idles 42% with the host dispatching: the verdict stays CPU/framework-bound, the DDP
    remedy follows its own."""
    launch = tracekit.report(HTA / "df_index_resolver" / "df_index_resolver.json.gz").launch
    assert launch.verdict == "CPU/framework-bound"
    assert launch.remedies[-1] == verdicts.TORCH_GPU_COMMUNICATION_REMEDY


@needs_shared
def test_a_few_collectives_are_not_said() -> None:
    """nccl_data: the all-reduces run 7% of the span, 6% alone: stated (5% and up), no remedy (under 10%)."""
    launch = tracekit.report(HTA / "nccl_parser_config" / "nccl_data.json.gz").launch
    assert any(e.startswith("collective kernels (AllReduce 100%") for e in launch.evidence)
    assert not any("collective kernels run on the GPU" in r for r in launch.remedies)


def test_a_trace_without_collective_kernels_has_no_finding() -> None:
    path = Path(__file__).parent / "data" / "h100" / "custom_eager-cuda-fp32-b16-h256-i256-l1-t10.pt.trace.json.gz"
    assert gpu_communication(frame_of(load(path)), None) is None
    assert "gpu_communication" not in tracekit.report(path).launch.findings()


def test_collective_names() -> None:
    assert collective_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == "AllReduce"
    assert collective_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "AllGather"
    assert collective_name("ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)") == "AllReduce"  # NCCL <= 2.7
    assert collective_name("ncclBroadcastTreeLLKernel_copy_i8(CollectiveArgs)") == "Broadcast"
    assert collective_name("cross_device_reduce_1stage<float, 8>(RankData*, RankSignals, Signal*)") == \
        "cross_device_reduce_1stage"


def _evidence(exposed: float, compute_only: float, idle: float, p2p: bool = False, **more: object) -> verdicts.Evidence:
    """A GPU rank's evidence with its collectives measured as given (shares of a 100 ms span)."""
    span = 100_000_000
    comm = int((exposed + 0.1) * span)
    found = GpuCommunication(comm_ns=comm, overlap_ns=int(0.1 * span), compute_ns=int((compute_only + 0.1) * span),
                             span_ns=span, collectives=(("SendRecv" if p2p else "AllReduce", comm),))
    fields: dict[str, object] = {"source": "torch", **more}
    return verdicts.Evidence(has_ops=True, has_gpu=True, idle_share=idle, kernels=100, top_gpu_class="communication",
                             gpu_communication=found, **fields)  # type: ignore[arg-type]


def test_collectives_alone_most_of_the_span_are_communication_bound() -> None:
    verdict, says, remedies = verdicts.judge(_evidence(exposed=0.45, compute_only=0.3, idle=0.15))
    assert verdict == "communication-bound"
    assert "during 45% of the GPU span, more than compute alone (30%) or idle time (15%)" in says[0], says
    assert remedies == [verdicts.TORCH_GPU_COMMUNICATION_REMEDY]
    assert verdicts.judge(_evidence(exposed=0.45, compute_only=0.3, idle=0.15, p2p=True))[2] == \
        [verdicts.POINT_TO_POINT_REMEDY]
    assert "gradients reduced in bf16" in verdicts.judge(_evidence(exposed=0.45, compute_only=0.3, idle=0.15,
                                                                   source="tf"))[2][0]
    # Compute alone or idle time larger: not communication-bound.
    assert verdicts.judge(_evidence(exposed=0.3, compute_only=0.5, idle=0.1))[0] == "GPU-bound"
    assert verdicts.judge(_evidence(exposed=0.3, compute_only=0.1, idle=0.5))[0] != "communication-bound"
    assert verdicts.judge(_evidence(exposed=0.2, compute_only=0.1, idle=0.1))[0] == "GPU-bound"



@needs_shared
def test_compare_states_the_collective_time_each_step_runs_alone() -> None:
    """control and test (two ranks' traces of one job, a change between them): the collectives a step,
    and the part with no compute beside them, which overlapping would save."""
    from tracekit.analyze.rank_balance import collective_times_per_step

    control, test = (HTA / "trace_diff" / d / f"{d}.json.gz" for d in ("control", "test"))
    talk, alone = collective_times_per_step(frame_of(load(control)), None)
    assert 0 < alone < talk and 14e6 < alone < 15.5e6, (talk, alone)
    doc = json.loads(tracekit.render(tracekit.compare([control, test]), "json"))
    rows = {m["metric"]: m for m in doc["metrics"]}
    assert rows["collective_alone_time"]["A"] == pytest.approx(alone)
    assert rows["collective_alone_time"]["A"] > rows["collective_alone_time"]["B"] > 0
    assert rows["collective_time"]["A"] == pytest.approx(talk)


def test_communication_remedies_are_not_costed_as_dispatch() -> None:
    """The remedies name XLA's collective combiner and torch.compile for other reasons than dispatch:
    whatif's no-dispatch saving must not rank them."""
    from tracekit.analyze.launch import _REMEDY_SCENARIOS

    def scenario(remedy: str) -> str | None:
        return next((sc for key, sc in _REMEDY_SCENARIOS if key in remedy), None)

    for remedy in (verdicts.GPU_COMMUNICATION_REMEDY, verdicts.TORCH_GPU_COMMUNICATION_REMEDY,
                   verdicts.POINT_TO_POINT_REMEDY):
        assert scenario(remedy) is None, remedy
