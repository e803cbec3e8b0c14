"""TorchScript calls whose own time is ops the interpreter runs unrecorded (tracekit/analyze/breakdown.py,
unrecorded_script_calls; the verdict in tracekit/analyze/launch.py).

Real captures from tests/data/cpu/make_frozen_script.py: a small CNN traced as TorchScript, and the same
frozen with torch.jit.optimize_for_inference, whose convolutions run as prim::mkldnn_convolution, which
the profiler does not record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import tracekit
from tracekit.analyze.breakdown import breakdown, op_self_time, unrecorded_script_calls
from tracekit.analyze.compare import compare
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def test_a_frozen_models_unrecorded_convolutions_are_compute_not_dispatch():
    r = tracekit.launch(DATA / "script_cnn_frozen.pt.trace.json.gz").result
    assert r.verdict == "CPU compute-bound"  # was undetermined: "ops tracekit has no class for (forward 90%)"
    said = next(e for e in r.evidence if e.startswith("the TorchScript calls (forward) take "))
    assert "prim::mkldnn_convolution" in said and "torch.jit.optimize_for_inference" in said
    assert any("TorchScript calls' own time (counted as compute" in e for e in r.evidence)
    assert r.remedies[0].startswith("to see the ops TorchScript runs unrecorded")
    assert not any("cut per-op dispatch" in x for x in r.remedies)


def test_every_view_counts_the_unrecorded_ops_as_compute_alike():
    """The breakdown, its exclusive split and compare read the same calls the verdict does: before,
    the op-time table said 91% dispatch beside a compute-bound verdict, and compare's dispatch_time
    rose 37x from the scripted model to the frozen one."""
    table = load(DATA / "script_cnn_frozen.pt.trace.json.gz")
    frame = frame_of(table)
    calls = unrecorded_script_calls(frame)
    assert calls.size == 3 and {frame.name(int(r)) for r in calls} == {"forward"}
    bd = breakdown(table)
    steps = bd.cpu_ops[bd.cpu_ops.step >= 0]
    own = int(op_self_time(frame, calls).sum())
    # The calls' own time, less the sliver before a step's window opens, is compute in every step.
    assert 0.97 * own <= int(steps.unrecorded_ops_ns.sum()) <= own
    assert (steps.unrecorded_ops_ns > 0.8 * steps.span_ns).all()
    assert (steps.dispatch_ns < 0.05 * steps.span_ns).all()
    assert (steps.compute_ns + steps.dispatch_ns == steps.span_ns).all()  # nothing waits or fetches here
    part = bd.cpu_partition[bd.cpu_partition.step >= 0]
    assert np.allclose(part.unrecorded_ops_ns, steps.unrecorded_ops_ns.to_numpy(), rtol=0.02)
    assert (part.framework_ns < 0.05 * part.span_ns).all()
    metrics = compare([load(DATA / "script_cnn.pt.trace.json.gz"), table]).metrics.set_index("metric")
    assert metrics.B["dispatch_time"] < 1.5 * metrics.A["dispatch_time"]
    assert metrics.A["unrecorded_ops_time"] == 0 and metrics.B["unrecorded_ops_time"] > 15e6


def test_a_scripted_model_whose_ops_are_recorded_is_judged_by_its_ops():
    r = tracekit.launch(DATA / "script_cnn.pt.trace.json.gz").result
    assert r.verdict == "CPU compute-bound"
    assert not any("TorchScript calls" in e for e in r.evidence)
    assert any(e.startswith("top ops by self time: aten::mkldnn_convolution") for e in r.evidence)


def test_a_script_of_many_small_ops_keeps_its_interpreter_time_as_dispatch(tmp_path):
    """A scripted loop of small ops: the call's own time is the interpreter's, well under the 50 µs per
    recorded op, so it stays dispatch."""
    from torch.profiler import ProfilerActivity, profile, schedule

    @torch.jit.script
    def loop(x: torch.Tensor) -> torch.Tensor:
        for _ in range(200):
            x = x * 0.5 + 1.0
        return x

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return loop(x)

    model, x = torch.jit.script(Model()), torch.randn(8, 8)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            model(x)
            prof.step()
    prof.export_chrome_trace(str(tmp_path / "loop.json"))
    r = tracekit.launch(tmp_path / "loop.json").result
    assert r.verdict == "CPU/framework-bound", r.evidence
    assert not any("TorchScript calls" in e for e in r.evidence)
    assert r.breakdown is not None and int(r.breakdown.cpu_ops.unrecorded_ops_ns.sum()) == 0
