"""Autoregressive decoding (tracekit/analyze/decoding.py): a skinny GEMM run once per generated token is
not told to batch across timesteps, and generation with no key/value cache is named. Real captures of
transformers' generate() on a small GPT-2 (tests/data/cpu/make_decoding.py), beside attention captures
that are not decoding; and recurrent cells that generate, beside one trained with teacher forcing
(tests/data/cpu/make_cell_decoder.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.decoding import Decoding, decoding, fed_back_cells, uncached_generation
from tracekit.analyze.frame import frame_of
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def _frame(name: str):
    return frame_of(load(DATA / f"{name}.pt.trace.json.gz"))


@pytest.mark.parametrize("name", ["decode_sdpa", "decode_eager"])
def test_a_decode_loop_is_found_by_its_attention_dims(name: str) -> None:
    """12 new tokens: the prompt's pass, then 11 of one query position over 9 to 19 cached positions
    (scaled_dot_product_attention, or eager attention's q @ k^T beside its weights @ v)."""
    frame = _frame(name)
    assert decoding(frame, None) == Decoding(positions=11, first=9, last=19, cached=True)
    assert uncached_generation(frame, None) is None
    launch = tracekit.report(frame.table).launch
    head = next(x for x in launch.remedies if x.startswith("aten::mm [[4,256],[256,8000]]"))
    # Before: "batch it (across timesteps, or several small GEMMs into one)": a token needs the last one.
    assert "once per generated token (11 a step" in head and "across timesteps" not in head, head
    assert "decode more sequences at once" in head
    assert launch.uncached_generation is None
    # The projections' addmm calls, M=4 at 4 shapes, none 10% alone: before, "batch them (more rows a call ...)".
    spread = next(x for x in launch.remedies if x.startswith("aten::addmm at 4 shapes, each a skinny GEMM (M=4)"))
    assert "once per generated token (11 a step" in spread and "batch them" not in spread, spread


def test_a_dispatch_bound_decode_loop_is_told_how_to_batch_once() -> None:
    """One prompt decoded token by token: CPU/framework-bound, whose remedies included "use larger batches so
    each launch and op does more work" beside the decode loop's own (decode more sequences at once, M = 1
    here): told once, the decode loop's way."""
    r = tracekit.report(DATA / "decode_one_prompt.pt.trace.json.gz").launch
    assert r.verdict == "CPU/framework-bound", r.verdict
    assert any("decode more sequences at once" in x and "M=1" in x for x in r.remedies), r.remedies
    assert not any(x.startswith("use larger batches") for x in r.remedies), r.remedies


def test_the_decode_remedy_reads_the_weights_type() -> None:
    """A bf16 model's decode loop was told "weights in fewer bytes ... bf16 where the CPU has native bf16
    math": its weights are bf16 already. The remedy names their recorded type and what is left (int8,
    int4); a float32 model's keeps bf16 among the options."""
    def decode_remedies(name: str) -> list[str]:
        remedies = tracekit.report(DATA / f"{name}.pt.trace.json.gz").launch.remedies
        return [x for x in remedies if "decode more sequences at once" in x]

    bf16 = decode_remedies("decode_bf16")
    assert bf16 and all("16-bit already (c10::BFloat16)" in x and "bf16 where" not in x for x in bf16), bf16
    fp32 = decode_remedies("decode_sdpa")
    assert fp32 and all("bf16 where the CPU has native bf16 math" in x and "already" not in x for x in fp32), fp32


def test_generation_without_a_cache_is_named_and_its_remedy_comes_first() -> None:
    frame = _frame("decode_no_cache")
    found = uncached_generation(frame, None)
    assert found == Decoding(positions=12, first=8, last=19, cached=False)
    launch = tracekit.report(frame.table).launch
    assert launch.remedies[0] == found.remedy()
    said = next(e for e in launch.evidence if e.startswith("each generated token runs the model over the whole"))
    assert "162 positions run where a cache runs 19" in said, said
    assert not any("once per generated token" in x for x in launch.remedies)


@pytest.mark.parametrize("name", ["attention_mha_weights", "attention_unfused", "attention_mha_short",
                                  "keras_torch_lstm", "python_in_step"])
def test_attention_that_is_not_decoding_is_not_called_so(name: str) -> None:
    """Self-attention over one sequence length a step (and no attention at all)."""
    assert decoding(_frame(name), None) is None


def test_a_training_loop_over_samples_of_growing_length_is_not_generation(tmp_path: Path) -> None:
    """Self-attention over 10, 11, ... 15 positions, one sample after another, each once per layer: the
    dims alone read like generation without a cache; the backward pass says it is training."""
    torch = pytest.importorskip("torch")
    from conftest import capture_steps

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    samples = [torch.randn(1, n, 32) for n in range(10, 16)]

    def step() -> None:
        loss = sum(layer(x).sum() for x in samples)
        loss.backward()

    frame = frame_of(load(capture_steps(tmp_path / "sorted.json", step)))
    found = decoding(frame, None)
    assert found is not None and not found.cached and found.positions == 6  # what the dims alone say
    assert uncached_generation(frame, None) is None


@pytest.mark.parametrize(("name", "cell", "chooser", "reader"), [
    ("cell_decoder_beam", "aten::gru_cell", "aten::topk", "aten::index"),
    ("cell_decoder_greedy", "aten::lstm_cell", "aten::max", "aten::embedding"),
])
def test_a_cell_loop_fed_its_chosen_output_is_a_decoder(name: str, cell: str, chooser: str, reader: str) -> None:
    """A GRU cell beam-searching 16 tokens was told "replace the per-timestep cell loop with the recurrent
    layer (nn.GRU ...) ... makes the input GEMMs of all timesteps one", whatif ranked fused-rnn (22% on a
    30-token run), and its skinny GEMMs were told to batch across timesteps: each token's input is chosen
    from the last one's output, so no layer can take them all at once. Found by the ops between the cells
    (greedy decoding's max is its dim overload, read from the recorded inputs)."""
    frame = _frame(name)
    found = decoding(frame, None)
    assert found is not None and found.positions == 16 and found.cached
    assert found.via.startswith(f"{cell} once a token") and f"({chooser}, then {reader} " in found.via, found.via
    launch = tracekit.report(frame.table).launch
    assert not any("replace the per-timestep cell loop" in x for x in launch.remedies), launch.remedies
    assert any(x.startswith("the cell loop generates") for x in launch.remedies), launch.remedies
    skinny = [x for x in launch.remedies if "a skinny GEMM" in x]
    assert skinny and all("once per generated token (16 a step" in x and "across timesteps" not in x
                          and "makes the input GEMMs of all timesteps one" not in x for x in skinny), skinny
    scenarios = {s.name for s in tracekit.whatif(frame.table).result.scenarios}
    assert "fused-rnn" not in scenarios and "no-dispatch" in scenarios, scenarios


def test_a_teacher_forced_cell_loop_is_not_a_decoder() -> None:
    """The LSTM cell trained with teacher forcing counts its accuracy with argmax and embeds the next
    target token each timestep (a chooser, then a reader, between the cells), but the step runs a
    backward pass and its inputs are known up front: the recurrent layer can replace the loop."""
    frame = _frame("cell_teacher_forced")
    cells = frame.rows("cpu_op")[[frame.name(int(r)) == "aten::lstm_cell" for r in frame.rows("cpu_op")]]
    assert cells.size == 48
    assert decoding(frame, None) is None and fed_back_cells(frame, cells) is None
    launch = tracekit.report(frame.table).launch
    assert any(x.startswith("replace the per-timestep cell loop with the fused recurrent layer") for x in launch.remedies)
    assert "fused-rnn" in {s.name for s in tracekit.whatif(frame.table).result.scenarios}


@pytest.mark.parametrize("name", ["gru_cell_loop", "sample_loop_decode", "sample_loop_char_rnn"])
def test_other_loops_are_not_cell_decoders(name: str) -> None:
    """A GRU cell loop over a known sequence, an MLP decoding greedily (no cell: its remedy was never the
    layer's), and the char-RNN walking its line: no recurrent decoder."""
    found = decoding(_frame(name), None)
    assert found is None or not found.via


def test_a_tf_while_loop_decoder_is_not_told_to_use_the_keras_layer() -> None:
    """A GRU cell decoding greedily in a tf.function (tests/data/tf/make_tf_decoder.py): tf.argmax, then the
    embedding's GatherV2, inside the while loop, and no gradient. The TF cell-loop remedy ("use
    keras.layers.LSTM / GRU" with a GPU, BlockLSTMV2 on a CPU) cannot apply to it."""
    from tracekit.analyze import verdicts
    from tracekit.analyze.launch import _recurrent_style

    path = Path(__file__).parent / "data" / "tf" / "tf_decoder.xplane.pb"
    assert _recurrent_style(frame_of(load(path)), None) == verdicts.TF_CELL_DECODER
    remedies = tracekit.report(path).launch.remedies
    assert remedies[0] == verdicts.TF_CELL_DECODER_REMEDY, remedies
    assert not any("BlockLSTMV2" in x or x.startswith("use keras.layers.LSTM") for x in remedies), remedies


def test_a_teacher_forced_loop_evaluated_without_backward_is_not_a_decoder() -> None:
    """The teacher-forced LSTM cell evaluated under no_grad: an argmax and the next input's embedding
    between the cells, no backward pass, read as a decoder until the reads of the target by position
    (target[:, t], aten::select of the [4, 17] targets) between the argmax and the embedding were looked
    at; the recurrent layer can replace this loop."""
    frame = _frame("cell_teacher_forced_eval")
    assert decoding(frame, None) is None
    launch = tracekit.report(frame.table).launch
    assert any(x.startswith("replace the per-timestep cell loop with the fused recurrent layer") for x in launch.remedies)


def test_a_tf_teacher_forced_evaluation_is_not_a_decoder() -> None:
    """The same TF cell evaluated with teacher forcing: tf.argmax for the accuracy and the embedding's
    GatherV2 in the loop, no gradient, but the next input read from the target by position in the loop's
    own scope (while/strided_slice): a cell loop, not a decoder."""
    from tracekit.analyze import verdicts
    from tracekit.analyze.launch import _recurrent_style

    path = Path(__file__).parent / "data" / "tf" / "tf_teacher_forced_eval.xplane.pb"
    assert _recurrent_style(frame_of(load(path)), None) == verdicts.TF_CELL_LOOP
