"""The top-ops table names ops with their shapes, and the skinny-GEMM remedy fires only on its evidence
(real torch.profiler captures made here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tracekit
from tracekit.cli import main

torch = pytest.importorskip("torch")
DATA = Path(__file__).parent / "data" / "cpu"


def _capture(path, record_shapes: bool, k: int):
    """Steps of 30 GEMMs [1000, k] x [k, 512] plus some elementwise work, as a decoder loop makes them."""
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    a, b = torch.randn(1000, k), torch.randn(k, 512)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            for _ in range(30):
                out = torch.mm(a, b)
                out = torch.tanh(out)
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


def test_report_names_the_top_ops_with_shapes_and_the_skinny_gemm_remedy(tmp_path, capsys):
    trace = _capture(tmp_path / "skinny.json", record_shapes=True, k=8)
    # Every step, so the count does not hang on which steps a busy machine makes outliers.
    r = tracekit.launch(trace, keep_all_steps=True).result
    top = r.top_ops.ops
    mm = top[top.name == "aten::mm"].iloc[0]
    assert json.loads(mm.shapes) == [[1000, 8], [8, 512]] and mm.calls == 90  # 30 per step, 3 steps
    assert mm.op_class == "gemm" and 0 < mm.share < 1
    assert top.self_ns.is_monotonic_decreasing
    if mm.share >= 0.10:
        assert any(x.startswith("aten::mm [[1000,8],[8,512]] 90 calls") and "skinny GEMM (K=8" in x
                   for x in r.remedies)
    assert main(["report", str(trace), "-f", "markdown"]) == 0
    text = capsys.readouterr().out
    assert "## Top ops (self time)" in text and "[[1000,8],[8,512]]" in text


def test_a_cpu_gemm_op_gets_the_rate_its_shapes_and_self_time_give(tmp_path, capsys):
    """2 x 1000 x 256 x 512 FLOP per aten::mm call over its self time; tanh has no rate; without shapes,
    and on a GPU trace (where aten::mm's self time is its launch), no rate is said."""
    trace = _capture(tmp_path / "wide.json", record_shapes=True, k=256)
    top = tracekit.launch(trace, keep_all_steps=True).result.top_ops.ops
    mm = top[top.name == "aten::mm"].iloc[0]
    assert mm.gflops == pytest.approx(2 * 1000 * 256 * 512 * mm.calls / mm.self_ns)
    assert 0.1 < mm.gflops < 10_000  # a CPU's GEMM rate, in GFLOP/s
    assert top[top.name != "aten::mm"].gflops.isna().all()
    assert main(["report", str(trace), "-f", "markdown"]) == 0
    assert "| GFLOP/s |" in capsys.readouterr().out
    blind = tracekit.launch(_capture(tmp_path / "blind.json", record_shapes=False, k=256)).result.top_ops.ops
    assert blind.gflops.isna().all()


def test_gemm_flops_reads_each_gemm_ops_inputs():
    from tracekit.analyze.top_ops import gemm_flops

    assert gemm_flops("aten::mm", "[[64,256],[256,1024]]") == 2 * 64 * 256 * 1024
    assert gemm_flops("aten::addmm", "[[1024],[64,256],[256,1024],[],[]]") == 2 * 64 * 256 * 1024
    assert gemm_flops("aten::bmm", "[[8,64,32],[8,32,16]]") == 2 * 8 * 64 * 32 * 16
    assert gemm_flops("aten::baddbmm", "[[8,64,16],[8,64,32],[8,32,16],[],[]]") == 2 * 8 * 64 * 32 * 16
    assert gemm_flops("aten::linear", "[[64,256],[1024,256],[1024]]") is None  # a wrapper: addmm has the time
    assert gemm_flops("aten::mm", "") is None and gemm_flops("aten::mm", "[[64,256],[128,1024]]") is None


def test_each_gemm_op_variant_gets_its_rate(tmp_path):
    """The epilogue-fused, summed-batch and matrix-vector products, captured for real: their FLOPs
    (2 x M x K x N; 2 x M x N for a GEMV) over their self time; inputs that do not fit give none."""
    from torch.profiler import ProfilerActivity, profile

    from tracekit.analyze.top_ops import gemm_flops, top_ops

    torch.manual_seed(0)
    x, w, bias = torch.randn(256, 128), torch.randn(128, 512), torch.randn(512)
    b1, b2, acc = torch.randn(4, 64, 32), torch.randn(4, 32, 16), torch.randn(64, 16)
    mat, vec, out = torch.randn(300, 200), torch.randn(200), torch.randn(300)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(5):
            torch.ops.aten._addmm_activation(bias, x, w)
            torch.addbmm(acc, b1, b2)
            torch.mv(mat, vec)
            torch.addmv(out, mat, vec)
    prof.export_chrome_trace(str(tmp_path / "variants.json"))
    from tracekit.analyze.classify import classify_rows
    from tracekit.analyze.frame import frame_of
    from tracekit.ingest import load

    # Every row, not the report's top 15: aten::mv's own time is its call into aten::addmv_, and under
    # ATen's AVX2 kernels it ranked 6th of 15 in one run and past the 15th in another.
    frame = frame_of(load(tmp_path / "variants.json"))
    top = top_ops(frame, classify_rows(frame), top=100).ops.set_index("name")
    flops = {"aten::_addmm_activation": 2 * 256 * 128 * 512, "aten::addbmm": 2 * 4 * 64 * 32 * 16,
             "aten::mv": 2 * 300 * 200, "aten::addmv": 2 * 300 * 200}
    for name, per_call in flops.items():
        op = top.loc[name]
        assert op.op_class == "gemm" and op.calls == 5
        assert op.gflops == pytest.approx(per_call * 5 / op.self_ns), name
    assert gemm_flops("aten::addbmm", "[[64,16],[4,64,32],[3,32,16],[],[]]") is None  # batches differ
    assert gemm_flops("aten::mv", "[[300,200],[300]]") is None


def test_an_op_whose_calls_take_different_classes_is_one_row_per_class():
    """aten::copy_ takes the class of the op it runs in: in DDP's gloo capture some copies run inside
    addmm (GEMM work), others inside elementwise ops or DDP's bucket copy. Each row is one class, and
    the rows' calls add up to every copy_ call of the steps."""
    from tracekit.analyze.classify import OP_CLASSES, classify_rows
    from tracekit.analyze.frame import frame_of
    from tracekit.analyze.top_ops import top_ops
    from tracekit.ingest import load

    frame = frame_of(load(DATA / "ddp_gloo_rank0.pt.trace.json.gz"))
    classes = classify_rows(frame)
    rows = frame.rows("cpu_op")
    copies = rows[frame.name_code[rows] == frame.names.index("aten::copy_")]
    expected = {OP_CLASSES[c]: n for c, n in zip(*np.unique(classes.op[copies], return_counts=True), strict=True)}
    assert len(expected) >= 2
    table = top_ops(frame, classes, top=1000).ops
    got = table[table.name == "aten::copy_"].groupby("op_class").calls.sum().to_dict()
    assert got == expected


def test_no_skinny_gemm_remedy_without_its_evidence(tmp_path):
    wide = tracekit.launch(_capture(tmp_path / "wide.json", record_shapes=True, k=256)).result
    assert not any("skinny GEMM" in x for x in wide.remedies)  # K = 256: not skinny
    blind = tracekit.launch(_capture(tmp_path / "blind.json", record_shapes=False, k=8)).result
    assert not blind.top_ops.shapes_recorded
    assert not any("skinny GEMM" in x for x in blind.remedies)  # no shapes, no claim
    assert "aten::mm" in set(blind.top_ops.ops.name)


def _every_rows_dims(table, rows, code, self_ns, ranked, top):
    """The reference: Input Dims read from every op row."""
    from tracekit.analyze import top_ops as module

    shape_code, texts = module.input_dims(table, rows)
    return shape_code, texts, any(texts)




@pytest.mark.parametrize("top", [1, 3, 15])
def test_top_ops_reads_the_args_of_the_top_names_only_and_ranks_as_if_it_read_all(top, monkeypatch, tmp_path):
    """Reading Input Dims only for the names that can reach the top gives the table, the waiting list
    and ``shapes_recorded`` that reading every row gives, on real traces with and without shapes."""
    from conftest import TRACES

    from tracekit.analyze import top_ops as module
    from tracekit.analyze.classify import classify_rows
    from tracekit.analyze.frame import frame_of
    from tracekit.analyze.steps import step_stats

    if not TRACES.exists():
        pytest.skip("needs ../shared/traces (real traces with and without Input Dims)")
    paths = [p for pattern in ("trace_compare/*/*.json.gz", "trace_diff/*/*.json.gz", "trace_filter/*.json.gz",
                               "negative_queue_length_values_check/*.json.gz", "amd_trace/*.json.gz",
                               "cpu_only/*.json.gz", "ns_resolution_trace/*.json.gz")
             for p in sorted((TRACES / "hta").glob(pattern))]
    paths.append(_capture(tmp_path / "skinny.json", record_shapes=True, k=8))
    with_shapes = 0
    for path in paths:
        frame = frame_of(tracekit.load(path))
        classes = classify_rows(frame)
        steps = step_stats(frame)
        for used in (None, steps.used_step_numbers() if steps is not None and len(steps.steps) else None):
            got = module.top_ops(frame, classes, used, top)
            with monkeypatch.context() as m:
                m.setattr(module, "_top_input_dims", _every_rows_dims)
                want = module.top_ops(frame, classes, used, top)
            assert got.ops.equals(want.ops), path.name
            assert got.waiting.equals(want.waiting) and got.remedies == want.remedies, path.name
            assert got.shapes_recorded == want.shapes_recorded, path.name
            assert got.by_name.equals(want.by_name), path.name
            with_shapes += want.shapes_recorded
    assert with_shapes >= 8  # both kinds of trace were checked


def test_the_verdicts_top_ops_read_apart_when_their_short_names_collide(tmp_path):
    """One op at two shapes (tanh over two activations) is named once in the verdict's evidence, its
    time summed over both shapes, with the shape that holds most of it."""
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    small, large = torch.randn(64, 256), torch.randn(64, 1024)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            for _ in range(20):
                torch.tanh(small)
                torch.tanh(large)
            prof.step()
    prof.export_chrome_trace(str(tmp_path / "tanh.json"))
    r = tracekit.launch(tmp_path / "tanh.json", keep_all_steps=True).result
    assert r.top_ops.ops.name.head(2).tolist() == ["aten::tanh", "aten::tanh"]
    line = next(e for e in r.evidence if e.startswith("top ops by self time: "))
    names = [part.rsplit(" ", 1)[0] for part in line.removeprefix("top ops by self time: ").split(", ") if "%" in part]
    # The shape named is the one holding most of tanh's time (64x1024 on a quiet machine; a call stalled on a
    # loaded one can tip it to 64x256), as the table ranks them.
    from tracekit.analyze.top_ops import compact_shapes
    largest = compact_shapes(str(r.top_ops.ops[r.top_ops.ops.name == "aten::tanh"].shapes.iloc[0]))
    assert f"aten::tanh {r.top_ops.by_name.share.iloc[0]:.0%} (2 input shapes; {largest}:" in line, line
    assert len(set(names)) == len(names), line


def test_sentence_labels_take_the_scopes_that_tell_tf_replicas_apart():
    from tracekit.analyze.top_ops import sentence_labels

    names = ["StatefulPartitionedCall/sequential_1/dense_1/Relu:_MklNativeFusedMatMul",
             "StatefulPartitionedCall/gradient_tape/sequential_1/dense_1_2/MatMul/MatMul:_MklMatMul",
             "StatefulPartitionedCall/gradient_tape/replica_1/sequential_1/dense_1_2/MatMul/MatMul:_MklMatMul"]
    labels = sentence_labels(names, ["", "", ""])
    assert labels == ["…/sequential_1/dense_1/Relu:_MklNativeFusedMatMul",
                      "…/gradient_tape/sequential_1/dense_1_2/MatMul/MatMul:_MklMatMul",
                      "…/replica_1/sequential_1/dense_1_2/MatMul/MatMul:_MklMatMul"]
    assert sentence_labels(["aten::mm", "aten::mm"], ["[[8,16],[16,4]]", "[[2,16],[16,4]]"]) == \
        ["aten::mm (8x16, 16x4)", "aten::mm (2x16, 16x4)"]
    assert sentence_labels(["aten::mm", "aten::add"], ["", ""]) == ["aten::mm", "aten::add"]


def test_args_mention_says_no_only_when_no_row_has_the_text(tmp_path):
    """The whole-column check that spares top_ops its row-wise passes on traces without shapes: False
    only where no row's args hold the text, read from the trace and from its Parquet file."""
    from tracekit.analyze.top_ops import args_mention
    from tracekit.ingest import parquet

    for record_shapes in (True, False):
        table = tracekit.load(_capture(tmp_path / f"shapes_{record_shapes}.json", record_shapes=record_shapes, k=8))
        written = tmp_path / f"shapes_{record_shapes}.parquet"
        parquet.write(table, written)
        for t in (table, tracekit.load(written)):
            any_row = any('"Input Dims":' in (a or "") for a in t["args"].to_pylist())
            assert args_mention(t, b'"Input Dims":') == any_row == record_shapes


def test_a_skinny_gemm_in_a_recurrent_layer_or_cell_says_what_can_be_batched():
    """nn.GRU on a CPU runs an addmm per timestep inside aten::gru: "batch it across timesteps" told
    the user to batch what PyTorch's own loop runs, whose hidden-state GEMM cannot be batched; a
    GRUCell loop's GEMMs are the cell's, whose input GEMMs the layer batches. A GEMM outside any
    recurrent op keeps the general advice (tests above)."""
    layer = tracekit.report(DATA / "gru_layer.pt.trace.json.gz").launch.top_ops.remedies
    assert len(layer) == 1 and "M=16" in layer[0] and "inside aten::gru (the recurrent layer's own loop)" in layer[0]
    assert "across timesteps, or several" not in layer[0]
    cell = tracekit.report(DATA / "gru_cell_loop.pt.trace.json.gz").launch.top_ops.remedies
    assert len(cell) == 1 and "inside aten::gru_cell: the recurrent layer (nn.GRU)" in cell[0], cell


def test_an_op_whose_shapes_vary_is_ranked_by_its_total():
    """A mixture of experts routes a different number of tokens to each expert in each step, so each
    expert's linear layers run at shapes of their own: no single (op, shapes) row is large, and the
    verdict's evidence once named an indexing op first. Summed by name, the GEMM op leads, told as
    spread over many shapes; its total equals the sum of its rows over all shapes. A stored capture
    (tests/data/cpu/make_gemm_shapes.py): live ones failed now and then on a loaded machine, a stalled
    call's time outweighing the op's."""
    moe = DATA / "gemm_shapes_moe.pt.trace.json.gz"
    r = tracekit.launch(moe, keep_all_steps=True).result
    by_name = r.top_ops.by_name
    assert by_name.name.iloc[0] == "aten::addmm" and by_name.shapes.iloc[0] > 8, by_name.head(3)
    assert by_name.self_ns.iloc[0] > 2 * r.top_ops.ops.self_ns.max()  # no one shape row comes near it
    line = next(e for e in r.evidence if e.startswith("top ops by self time: "))
    assert line.startswith(f"top ops by self time: aten::addmm {by_name.share.iloc[0]:.0%} ({by_name.shapes.iloc[0]} input shapes)"), line

    from tracekit.analyze.classify import classify_rows
    from tracekit.analyze.frame import frame_of
    from tracekit.analyze.top_ops import top_ops

    frame = frame_of(tracekit.load(moe))
    every = top_ops(frame, classify_rows(frame), r.steps.used_step_numbers(), top=10_000)
    addmm = every.ops[every.ops.name == "aten::addmm"]
    assert len(addmm) == by_name.shapes.iloc[0]
    assert not any("skinny" in x for x in r.remedies)  # many shapes, none skinny (M is each expert's tokens)
    assert int(addmm.self_ns.sum()) == int(by_name.self_ns.iloc[0]) and int(addmm.calls.sum()) == by_name.calls.iloc[0]


def test_skinny_gemms_spread_over_many_shapes_get_the_remedy_together():
    """A server's dynamic batches (1 to 16 requests a call) run each Linear at another M every call:
    no one shape holds 10% of the time, so the per-shape rule is silent; summed, the skinny GEMMs hold
    most of it and get one remedy with the span of M. A stored capture (tests/data/cpu/make_gemm_shapes.py):
    live, a call stalled on a loaded machine put one shape at 10.2-11.4% now and then."""
    r = tracekit.launch(DATA / "gemm_shapes_serving.pt.trace.json.gz", keep_all_steps=True).result
    assert r.top_ops.ops[r.top_ops.ops.name == "aten::addmm"].share.max() < 0.10  # no shape alone
    spread = [x for x in r.remedies if x.startswith("aten::addmm at 16 shapes, each a skinny GEMM (M from 1 to 16)")]
    assert len(spread) == 1 and "batch them" in spread[0], r.remedies


def test_a_copy_inside_a_gemm_op_is_said_to_be_one() -> None:
    """CPU addmm writes its bias into the output before the product (aten::copy_ inside aten::addmm), and the
    op view gives that copy the GEMM's class: the verdict's top-ops sentence says so, so that it is not read
    as a dtype conversion. A real capture (a GRU layer's input products, tests/data/cpu/gru_layer)."""
    from tracekit import api

    launch = api.report(Path(__file__).parent / "data" / "cpu" / "gru_layer.pt.trace.json.gz").launch
    said = next(e for e in launch.evidence if e.startswith("top ops by self time"))
    assert "aten::copy_ (inside gemm ops) 11%" in said and "aten::addmm 30%" in said, said


def test_tensor_lists_read_as_their_count_in_sentences():
    """A fused optimizer's inputs are lists of every parameter, its grads and states: written out,
    a Hugging Face GPT-2's aten::_fused_adamw_ read "1000x128+128x128+...(40 shapes), +++++++++" (the
    step counts, scalar tensors, left as empty dims)."""
    from tracekit.analyze.top_ops import compact_shapes

    params = "[[1000,128],[128,128],[128,384],[128,128],[128,512]]"
    text = compact_shapes(f"[{params},{params},{params},{params},[],[[],[],[],[],[]],[],[]]")
    assert text == "5 tensors (1000x128+128x128+…) (x4)", text
    assert compact_shapes("[[[16,512],[8,512]],[]]") == "16x512+8x512"
    assert compact_shapes("[[8,64,128],[8,64,128]]") == "8x64x128, 8x64x128"  # tensors, not lists: not merged
    # A torch.compile'd GPT-2's CompiledFunction takes its input and every weight: 30 inputs.
    many = compact_shapes("[[8,64],[1000,128],[1024,128]," + ",".join(["[128]"] * 27) + "]")
    assert many == "8x64, 1000x128, 1024x128, 128, … (30 inputs)", many
