"""torch.compile on the CPU: the compiled graph's own code (its generated kernels and wrapper) is
neither framework dispatch nor a known compute op, and op self times skip the range between
``CompiledFunction`` and the ops the graph calls. Real traces from torch.profiler of a compiled MLP,
with and without Inductor's kernel profiling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tracekit  # noqa: E402
from tracekit.analyze.breakdown import compiled_code_self, op_self_time  # noqa: E402
from tracekit.analyze.classify import OP_CLASSES, classify_rows  # noqa: E402
from tracekit.analyze.frame import frame_of  # noqa: E402
from tracekit.analyze.verdicts import KERNEL_PROFILE_REMEDY, Evidence, judge  # noqa: E402
from tracekit.ingest import load  # noqa: E402


def _profile_compiled_mlp(path: Path, kernel_profile: bool) -> Path:
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                                torch.nn.Linear(128, 64))
    x = torch.randn(32, 64)
    with torch._inductor.config.patch({"cpp.enable_kernel_profile": kernel_profile}):
        compiled = torch.compile(model)
        for _ in range(2):
            compiled(x)
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
            for _ in range(4):
                compiled(x)
                prof.step()
    torch._dynamo.reset()
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("compiled")
    return {"opaque": _profile_compiled_mlp(d / "opaque.json", False),
            "kernels": _profile_compiled_mlp(d / "kernels.json", True)}


SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def _tree_self_totals(frame, roots: np.ndarray) -> np.ndarray:
    """Per root op, the self times of every op in its tree (itself included), summed."""
    ops = frame.rows("cpu_op")
    root_of = ops.copy()
    up = frame.op_parent[ops]
    while (up >= 0).any():
        moving = up >= 0
        root_of[moving] = up[moving]
        up = np.where(moving, frame.op_parent[np.maximum(up, 0)], -1)
    self_ns = op_self_time(frame, ops)
    return np.array([self_ns[root_of == r].sum() for r in roots])


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is absent (real traces live there)")
def test_an_op_self_time_skips_the_events_between_it_and_the_ops_it_calls():
    """TF 2.21 with XLA: the function op -> CpuExecutable::ExecuteAsyncOnStream (not an op) -> the HLO
    ops. The HLO ops' time was also the function op's self time (95% of the step, ranked first)."""
    frame = frame_of(load(SHARED / "xprof" / "cpu_tf2.21" / "lstm_keras_xla_fn.xplane.pb"))
    ops = frame.rows("cpu_op")
    between = ops[(frame.op_parent[ops] >= 0) & (frame.parent[ops] != frame.op_parent[ops])]
    assert between.size
    roots = np.unique(frame.op_parent[between])
    roots = roots[frame.op_parent[roots] == -1]
    # Each op tree's self times add up to its root's duration: no time counted twice.
    assert (_tree_self_totals(frame, roots) <= frame.dur[roots]).all()
    top = tracekit.report(frame.table).launch.top_ops.ops
    assert not top.name.iloc[0].startswith(("__inference", "EagerLocalExecute")), top.head(3)


def test_the_compiled_function_self_time_leaves_out_the_graphs_ops(traces):
    """CompiledFunction -> ## Call CompiledFxGraph (a range in some captures, an op in others) ->
    aten::addmm: the GEMMs are not CompiledFunction's self time too."""
    frame = frame_of(load(traces["opaque"]))
    ops = frame.rows("cpu_op")
    functions = ops[np.array([frame.names[c] == "CompiledFunction" for c in frame.name_code[ops]])]
    assert functions.size
    roots = np.unique([r for r in ops[frame.op_parent[ops] == -1].tolist()
                       if frame.start[r] <= frame.start[functions[0]] < frame.end[r]])
    assert (_tree_self_totals(frame, roots) <= frame.dur[roots]).all()
    gemms = ops[np.array([frame.names[c] == "aten::addmm" for c in frame.name_code[ops]])]
    for function, self_ns in zip(functions.tolist(), op_self_time(frame, functions).tolist(), strict=True):
        inside = gemms[(frame.start[gemms] >= frame.start[function]) & (frame.end[gemms] <= frame.end[function])]
        assert inside.size and self_ns <= frame.dur[function] - frame.dur[inside].sum()


def test_the_graph_calls_own_time_is_compiled_code_not_dispatch(traces):
    table = load(traces["opaque"])
    frame = frame_of(table)
    bodies, body_self = compiled_code_self(frame)
    assert bodies.size and all(frame.name(int(b)).startswith("## Call CompiledFxGraph") for b in bodies)
    assert (body_self > 0).all() and (body_self < frame.dur[bodies]).all()
    r = tracekit.report(table)
    whole = r.breakdown.cpu_ops[r.breakdown.cpu_ops.step == -1].iloc[0]
    assert 0 < whole.compiled_code_ns <= whole.dispatch_ns
    # The verdict reads dispatch without it, and is undetermined exactly when its split decides.
    steps = r.launch.steps
    used = steps.used_step_numbers() if steps is not None and not steps.left_out.empty else None
    rows = r.breakdown.cpu_ops[r.breakdown.cpu_ops.step.isin(used)] if used else r.breakdown.cpu_ops.iloc[:1]
    span, dispatch, compiled = rows.span_ns.sum(), rows.dispatch_ns.sum(), rows.compiled_code_ns.sum()
    d, c = (dispatch - compiled) / span, compiled / span
    expected = "CPU/framework-bound" if d >= 0.5 else "undetermined" if d + c >= 0.5 else "CPU compute-bound"
    assert r.launch.verdict == expected, (d, c, r.launch.evidence)
    assert any("compiled graphs' own code" in e for e in r.launch.evidence), r.launch.evidence
    page = tracekit.render(r, "markdown")
    assert "| compiled code |" in page and "counted in that dispatch, runs in compiled graphs' own code" in page
    if expected == "undetermined":
        assert r.launch.remedies[0] == KERNEL_PROFILE_REMEDY


def test_recorded_inductor_kernels_are_compute_and_leave_no_opaque_code(traces):
    table = load(traces["kernels"])
    frame = frame_of(table)
    classes = classify_rows(frame)
    kernels = [r for r in frame.rows("cpu_op").tolist() if "cpp_fused_" in frame.name(r)]
    assert kernels, "Inductor's kernel profiling recorded no graph_N_cpp_fused_* op"
    assert {OP_CLASSES[classes.op[r]] for r in kernels} <= {"elementwise", "reduction", "gemm"}
    assert "gelu_native_layer_norm" in frame.name(kernels[0]) and OP_CLASSES[classes.op[kernels[0]]] == "reduction"
    assert compiled_code_self(frame)[0].size == 0  # the graph call's own time is its wrapper: dispatch
    r = tracekit.report(table)
    assert r.breakdown.cpu_ops.compiled_code_ns.sum() == 0
    assert r.launch.verdict != "undetermined"
    assert not any("compiled graphs' own code" in e for e in r.launch.evidence)


@pytest.mark.parametrize("dispatch, compiled, verdict", [
    (0.55, 0.30, "CPU/framework-bound"),  # framework-bound whatever the compiled code is
    (0.40, 0.20, "undetermined"),          # all wrapper: 60% overhead; all kernels: 60% compute
    (0.20, 0.25, "CPU compute-bound"),     # compute-bound whatever the compiled code is
])
def test_compiled_code_decides_the_verdict_only_when_its_split_would(dispatch, compiled, verdict):
    e = Evidence(source="torch", has_ops=True, ops_per_step=10, dispatch_share=dispatch, compiled_code_share=compiled)
    got, says, remedies = judge(e)
    assert got == verdict
    assert (KERNEL_PROFILE_REMEDY in remedies) == (verdict == "undetermined")
    if verdict == "undetermined":
        assert "compiled graphs' own code" in says[0]


def test_no_dispatch_keeps_the_compiled_graphs_own_code(traces):
    """Removing dispatch cannot remove the generated kernels that run inside the graph call."""
    table = load(traces["opaque"])
    w = tracekit.whatif(table).result
    no_dispatch = next(s for s in w.scenarios if s.name == "no-dispatch")
    assert "compiled graphs' own code stays" in no_dispatch.assumptions
    frame = frame_of(table)
    bodies, body_self = compiled_code_self(frame)
    start, end = int(w.window["start_ns"]), int(w.window["end_ns"])
    window = (frame.start[bodies] >= start) & (frame.end[bodies] <= end)
    assert window.any()
    assert no_dispatch.predicted_step_ns >= body_self[window].sum()


def test_a_step_with_one_part_compiled_is_told_to_compile_the_rest_with_the_cpus_caveat():
    """tests/data/cpu/compiled_optimizer: only the optimizer step is compiled; the model's forward and
    backward, 68% of the step, are dispatched op by op. A CPU step holding a compiled call got no
    dispatch remedy at all ("use larger batches" alone). Compiling the rest is the remedy, with the
    CPU's fixed cost per compiled call said: on this very loop, compiling the model too made the step
    1.24x slower (0.71 -> 0.88 ms, unprofiled, interleaved), which no-dispatch's ideal cannot show."""
    from pathlib import Path

    import tracekit

    r = tracekit.launch(Path(__file__).parent / "data" / "cpu" / "compiled_optimizer.pt.trace.json.gz").result
    (said,) = [x for x in r.remedies if x.startswith("the step runs a torch.compile graph, but")]
    assert "compile the rest of the step too" in said and "time it" in said
