"""A tensor indexed one piece at a time in a loop, each index's backward a whole-size zero gradient
(tracekit/analyze/indexed_gradients.py).

Real captures: Keras 3 on the torch backend training an LSTM on a CPU (tests/data/cpu/make_keras_torch.py),
PyTorch's own multi-head attention (tests/data/cpu/make_attention.py), a TF tf.function step slicing its
sequence per timestep under tf.GradientTape (tests/data/tf/make_sliced_sequence.py), and loops made here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import capture_steps

import tracekit
import tracekit.analyze.indexed_gradients as indexed
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"
TF_DATA = Path(__file__).parent / "data" / "tf"


def test_keras_on_torch_lstm_indexes_its_inputs_a_timestep_at_a_time():
    r = tracekit.launch(DATA / "keras_torch_lstm.pt.trace.json.gz").result
    found = r.indexed_gradients
    assert found is not None and found.op == "aten::select_backward"
    assert (found.whole, found.dim, found.pieces, found.calls_per_step) == ("20x64x256", 0, 20.0, 20.0)
    assert 0.3 < found.share < 0.6  # 46% in this capture: the zero fills are the top op (aten::fill_ 39%)
    assert found.saving == pytest.approx(found.share * 19 / 20)
    assert any(e.startswith("the backward of indexing one tensor a piece at a time (aten::select_backward, 20 calls")
               for e in r.evidence)
    # Ranked by the saving the trace shows: first, before the pointer to the op tables.
    assert r.remedies[0].startswith("index the tensor once, pieces = x.unbind(dim)")


def test_without_shapes_the_pieces_are_estimated_from_the_fill_and_the_copy():
    frame = frame_of(load(DATA / "keras_torch_lstm_no_shapes.pt.trace.json.gz"))
    calls, _ = indexed.calls_in_steps(frame, indexed.BACKWARD_OPS, None)
    gpu = frame.rows(*indexed.GPU_BUSY_KINDS)
    # 20 pieces: the zero fill takes 9x the piece's copy here (103x where the fills page-faulted).
    assert indexed._pieces_by_time(frame, calls, gpu) >= indexed.MIN_CALLS


def test_attention_taking_q_k_v_from_one_projection_is_not_such_a_loop(monkeypatch):
    """nn.MultiheadAttention's proj[0], proj[1], proj[2]: three pieces, 9% of this small training step."""
    monkeypatch.setattr(indexed, "MIN_SHARE", 0.0)
    frame = frame_of(load(DATA / "attention_mha_short.pt.trace.json.gz"))
    assert indexed.indexed_gradients(frame, None) is None
    monkeypatch.setattr(indexed, "MIN_CALLS", 3)
    found = indexed.indexed_gradients(frame, None)
    assert found is not None and found.pieces == 3 and found.whole.startswith("3x")


def _loop_capture(path: Path, index: str, record_shapes: bool) -> Path:
    torch.manual_seed(0)
    timesteps, batch, hidden = 40, 32, 128
    cell, proj = torch.nn.LSTMCell(hidden, hidden), torch.nn.Linear(hidden, hidden)
    x = torch.randn(timesteps, batch, hidden)

    def step() -> None:
        seq = proj(x)  # needs a gradient: its pieces' backward runs
        pieces = seq.unbind(0) if index == "unbind" else None
        h = c = torch.zeros(batch, hidden)
        outs = []
        for t in range(timesteps):
            inp = pieces[t] if pieces is not None else (seq[t] if index == "select" else seq[t:t + 1].squeeze(0))
            h, c = cell(inp, (h, c))
            outs.append(h)
        torch.stack(outs).sum().backward()

    return capture_steps(path, step, record_shapes=record_shapes)


@pytest.mark.parametrize("index,op", [("select", "aten::select_backward"), ("slice", "aten::slice_backward")])
def test_a_loop_indexing_a_sequence_that_needs_a_gradient(tmp_path, monkeypatch, index, op):
    """The loop's indexing backward is found at its 40 pieces, whatever its share (which depends on the
    allocator: fresh pages make the fills slow); indexed once with unbind, there is nothing to find."""
    monkeypatch.setattr(indexed, "MIN_SHARE", 0.0)
    found = indexed.indexed_gradients(frame_of(load(_loop_capture(tmp_path / "loop.json", index, True))), None)
    assert found is not None and found.op == op
    assert (found.whole, found.dim, found.pieces, found.calls_per_step) == ("40x32x128", 0, 40.0, 40.0)
    # Without shapes: the pieces estimated from the calls' own fills and copies.
    found = indexed.indexed_gradients(frame_of(load(_loop_capture(tmp_path / "bare.json", index, False))), None)
    assert found is not None and found.op == op and found.whole == "" and found.pieces >= indexed.MIN_CALLS
    unbound = frame_of(load(_loop_capture(tmp_path / "unbind.json", "unbind", True)))
    assert indexed.indexed_gradients(unbound, None) is None


def test_tensorflow_slicing_a_sequence_per_timestep_under_a_gradient_tape():
    """50 slice ops of one scope (strided_slice, strided_slice_1, ... strided_slice_49), one group; each
    StridedSliceGrad a whole-size zero gradient. Sliced once with tf.unstack (3.7-4.2 ms a step against
    9.2-10.0 unprofiled), nothing is found."""
    r = tracekit.launch(TF_DATA / "sliced_sequence.xplane.pb").result
    found = r.indexed_gradients
    assert found is not None and found.tensorflow
    assert (found.op, found.calls_per_step, found.pieces) == ("gradient_tape/strided_slice/StridedSliceGrad", 50, 50)
    assert 0.15 < found.share < 0.5  # 28% in this capture
    assert r.remedies[0].startswith("slice the tensor once, pieces = tf.unstack(x, axis=...)")
    assert tracekit.launch(TF_DATA / "sliced_sequence_unstacked.xplane.pb").result.indexed_gradients is None


def test_tensorflow_slicing_in_a_while_loop_is_one_op_run_each_timestep():
    """AutoGraph's tf.while_loop (for t in tf.range(50)): one StridedSliceGrad op run 50 times a step,
    named in the evidence by its last three scopes as the top ops are."""
    r = tracekit.launch(TF_DATA / "sliced_sequence_while.xplane.pb").result
    found = r.indexed_gradients
    assert found is not None and found.tensorflow and found.calls_per_step == 50
    assert found.op.endswith("/while/gradients/while/strided_slice_grad/StridedSliceGrad")
    assert found.share >= indexed.MIN_SHARE
    assert any(e.startswith("the gradient of slicing one tensor a piece at a time (…/while/strided_slice_grad/"
                            "StridedSliceGrad, 50 calls a step") for e in r.evidence)


def test_slices_in_scopes_of_their_own_are_not_one_tensor(monkeypatch):
    """A slice a layer (model/layer_3/strided_slice) is a group of its own: one call a step, no loop."""
    monkeypatch.setattr(indexed, "MIN_SHARE", 0.0)
    names = [f"gradient_tape/model/layer_{k}/strided_slice/StridedSliceGrad" for k in range(12)]
    assert len({indexed._NUMBERED_SLICE.sub(r"\1", n) for n in names}) == 12
    numbered = [f"gradient_tape/strided_slice_{k}/StridedSliceGrad" if k else "gradient_tape/strided_slice/StridedSliceGrad"
                for k in range(50)]
    assert {indexed._NUMBERED_SLICE.sub(r"\1", n) for n in numbered} == {"gradient_tape/strided_slice/StridedSliceGrad"}


def test_one_place_of_many_tensors_and_halves_are_not_a_loop(tmp_path, monkeypatch):
    """Tensors of one shape each indexed at the same place (a CLS token taken in every layer), and each
    cut in two halves (rotary embeddings' rotate_half in every layer): many calls a step on one whole
    shape, but no tensor holds more than two of the pieces taken, which unbind would not make cheaper."""
    monkeypatch.setattr(indexed, "MIN_SHARE", 0.0)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 64) for _ in range(8)]
    x = torch.randn(16, 32, 64)

    def step() -> None:
        h, total = x, 0
        for layer in layers:
            h = torch.tanh(layer(h))
            half = h.size(-1) // 2
            rotated = torch.cat([-h[..., half:], h[..., :half]], dim=-1)
            total = total + h[:, 0].sum() + rotated.sum()
        total.backward()

    frame = frame_of(load(capture_steps(tmp_path / "layers.json", step)))
    calls, _ = indexed.calls_in_steps(frame, indexed.BACKWARD_OPS, None)
    names = {frame.name(int(r)) for r in calls}
    assert names == set(indexed.BACKWARD_OPS) and calls.size >= 3 * 8 * 3  # 8 selects and 16 slices a step
    assert indexed.indexed_gradients(frame, None) is None
