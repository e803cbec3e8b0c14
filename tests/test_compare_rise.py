"""compare names the op whose own time rose, and the one whose own time fell, out of proportion to the
step (real CPU captures: one transformer encoder layer trained in float32 and under bf16 autocast,
and in float32 twice; products on subnormal numbers and with them flushed)."""

from __future__ import annotations

import re
from pathlib import Path

from tracekit import api

DATA = Path(__file__).parent / "data" / "cpu"
FP32, BF16, FP32_AGAIN = (DATA / f"autocast_attention_{n}.pt.trace.json.gz" for n in ("fp32", "bf16", "fp32_again"))
SDPA_BACKWARD = "aten::_scaled_dot_product_flash_attention_for_cpu_backward"


def test_a_regression_behind_a_faster_step_is_named_by_the_op_that_does_the_work():
    """Under autocast the step is 1.07x faster, the GEMMs and elementwise ops cheaper, but the fused
    attention's backward takes 3.4x its float32 own time: named, not its autograd wrappers."""
    cmp = api.compare([str(FP32), str(BF16)]).result
    said = [f for f in cmp.findings if "rose most by name" in f]
    assert len(said) == 1, cmp.findings
    assert said[0].startswith(f"Against B's faster step, the op {SDPA_BACKWARD} rose most by name")
    assert said[0].endswith("(3.4x: its one call per step 3.4x as long).")  # slower calls, not more of them
    assert any("B is 1.07x faster than A" in f for f in cmp.findings)
    # Own time per step: the wrappers rise as much inclusively but hold almost none of it themselves.
    names = cmp.names.set_index("name")
    op = names.loc[SDPA_BACKWARD]
    wrapper = names.loc["autograd::engine::evaluate_function: ScaledDotProductFlashAttentionForCpuBackward0"]
    assert op.self_ns_B > 3 * op.self_ns_A > 0
    assert wrapper.total_ns_B >= op.total_ns_B and wrapper.self_ns_B < 0.05 * wrapper.total_ns_B


def test_a_loop_captured_twice_names_no_op_though_the_machine_ran_it_slower():
    """The same float32 loop captured twice: the second capture's steps took 1.19x as long (a busy
    machine), every op alike (aten::mm 1.2x): no op rose out of proportion, none is named."""
    cmp = api.compare([str(FP32), str(FP32_AGAIN)]).result
    assert any("B takes 1.19x as long as A" in f for f in cmp.findings), cmp.findings
    assert not any("most by name" in f for f in cmp.findings)


def test_what_made_a_step_faster_is_named_by_the_op_whose_own_time_fell():
    """Matrix products on subnormal numbers against the same with them flushed to zero: the step 2.35x
    faster, aten::mm's 13 calls a step each 7.8x faster (the op, not a class or a wrapper)."""
    cmp = api.compare([str(DATA / "subnormal_products.pt.trace.json.gz"),
                       str(DATA / "subnormal_products_flushed.pt.trace.json.gz")]).result
    said = [f for f in cmp.findings if "most by name" in f]
    assert said == ["The op aten::mm fell most by name: 2.365 ms of its own time per step in B against 18.468 ms "
                    "in A (7.8x less: its 13 calls per step each 7.8x faster)."], cmp.findings


def test_the_rise_says_whether_the_calls_got_slower_or_more_numerous():
    """A GRU cell loop against the GRU layer (real captures): aten::copy_ (addmm copying its bias into
    the output) runs fewer calls per step in the layer, each far longer (the layer's input product
    covers the whole sequence at once): both counts are said."""
    cmp = api.compare([str(DATA / "gru_cell_loop.pt.trace.json.gz"), str(DATA / "gru_layer.pt.trace.json.gz")]).result
    said = [f for f in cmp.findings if "rose most by name" in f]
    assert len(said) == 1 and "aten::copy_" in said[0] and "11 calls per step against 20, each 6.9x as long" in said[0]


def test_calls_on_other_shapes_are_other_work_not_faster_calls() -> None:
    """A GCN's per-edge messages against its sparse-adjacency twin (real captures): aten::mul runs 8 calls
    a step in both, on 219,988-row messages in A and on 219,936-long edge weights in B. Before: "its 8 calls
    per step each 101.1x faster", as though the same multiplications had sped up."""
    cmp = api.compare([str(DATA / "message_passing_gcn.pt.trace.json.gz"),
                       str(DATA / "message_passing_gcn_sparse.pt.trace.json.gz")]).result
    said = next(f for f in cmp.findings if "fell most by name" in f)
    assert "aten::mul" in said and "on other input shapes (most of its time on 219936, 219936 in B, on 219988x1, " \
           "219988x64 in A): other work per call, not the same calls faster" in said, said


def test_a_backward_nodes_own_time_is_said_to_be_hooks_and_waits() -> None:
    """FSDP (7 units) against DDP, one MLP on 2 ranks (real captures): FSDP's pre-backward gathers run inside
    autograd's range around ReluBackward0, whose own time falls 648x under DDP. Before: "its 6 calls per step
    each 648.5x faster", as though the ReLU's backward had sped up."""
    cmp = api.compare([str(DATA / "fsdp_units_rank0.pt.trace.json.gz"), str(DATA / "fsdp_ddp_rank0.pt.trace.json.gz")]).result
    said = next(f for f in cmp.findings if "fell most by name" in f)
    assert "evaluate_function: ReluBackward0" in said and "each with 648.5x less own time" in said, said
    assert "not its arithmetic (that is in the ops it runs) but the hooks and waits at it" in said


def test_verdicts_either_side_of_the_rules_line_say_the_figure_that_split_them():
    """One MLP loop captured until two captures fell either side of the CPU line between framework-bound
    and compute-bound (tests/data/cpu/make_verdict_line.py): compare says both traces' share outside
    compute ops and that they lie near the 50% line, in either order; two GPU captures whose idle
    shares lie far apart (an H200 MLP in bf16 and fp8) get their idle shares and the 30% line, not
    "near"."""
    a, b = (str(DATA / f"verdict_line_{s}.pt.trace.json.gz") for s in "ab")
    for first, second, verdicts in ((a, b, ("CPU/framework-bound", "CPU compute-bound")),
                                    (b, a, ("CPU compute-bound", "CPU/framework-bound"))):
        said = [f for f in api.compare([first, second]).result.findings if f.startswith(f"A is {verdicts[0]}")]
        assert len(said) == 1, said
        assert f"B {verdicts[1]} (outside compute ops: " in said[0]
        assert "the rules' line between the two verdicts is 50%, and both lie near it" in said[0]
        shares = re.findall(r"(\d+(?:\.\d)?)% of [AB]'s", said[0])
        framework, compute = (float(x) for x in (shares if first == a else shares[::-1]))
        assert 50 <= framework < 60 and 40 <= compute < 50
    gpu = DATA.parent / "h200"
    said = [f for f in api.compare([str(gpu / "fp8_mlp_bf16.pt.trace.json.gz"), str(gpu / "fp8_mlp.pt.trace.json.gz")])
            .result.findings if f.startswith("A is GPU-bound")]
    assert len(said) == 1 and "B CPU/framework-bound (the GPU idle: " in said[0], said
    assert "line between the two verdicts is 30%)" in said[0] and "near it" not in said[0]


def test_a_tf_function_calls_wait_is_its_own_metric_not_other_op_time():
    """Keras's fit: the step function's call on the Python thread holds the step while the executor's
    threads run its ops. Its self time was op_other_time (0.94 of a 1.59 ms step, as if framework work
    rose with the step); it is waiting_calls_time now, and the report's op table gives it a column."""
    tf = DATA.parent / "tf"
    cmp = api.compare([str(tf / "keras_fit.xplane.pb"), str(tf / "fit_jit.xplane.pb")]).result
    metrics = cmp.metrics.set_index("metric")
    step = float(metrics.loc["step_time", "A"])
    assert float(metrics.loc["waiting_calls_time", "A"]) > 0.4 * step
    assert float(metrics.loc["op_other_time", "A"]) < 0.05 * step
    bd = api.report(str(tf / "keras_fit.xplane.pb")).breakdown
    steady = bd.cpu_ops[bd.cpu_ops.step >= 1]  # step 0 traces and builds the function: its call works then
    assert steady.waiting_calls_ns.sum() > 10 * steady.other_ns.sum()
    # A PyTorch CPU loop on one thread waits on no other thread: nothing moves out of its classes.
    torch_bd = api.report(str(DATA / "verdict_line_a.pt.trace.json.gz")).breakdown
    assert (torch_bd.cpu_ops.waiting_calls_ns == 0).all()
