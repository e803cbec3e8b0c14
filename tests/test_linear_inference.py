"""CPU inference spent in float32 Linear layers (tracekit/analyze/linear_inference.py): told int8, on real
captures of one MLP run under inference_mode (tests/data/cpu/make_linear_inference.py): in float32 (52-53 ms
a step), after dynamic quantization (22-27 ms), and with products too small for int8 to pay."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracekit
from tracekit.analyze.frame import frame_of
from tracekit.analyze.linear_inference import Float32Linears, float32_linears
from tracekit.ingest import load

DATA = Path(__file__).parent / "data" / "cpu"


def _found(name: str) -> Float32Linears | None:
    return float32_linears(frame_of(load(DATA / f"{name}.pt.trace.json.gz")), None)


def test_float32_linear_inference_is_told_int8() -> None:
    found = _found("linear_inference_float32")
    assert found is not None and found.calls == 24 and found.share > 0.8, found  # 3 Linear layers x 8 batches
    launch = tracekit.report(DATA / "linear_inference_float32.pt.trace.json.gz").launch
    # Before: only "the time is in compute ops: look at the op breakdown (GEMM share, casts) and the thread count".
    assert launch.remedies[0] == found.remedy() and "quantize_dynamic" in found.remedy()
    assert "bf16" in found.remedy() and "native bf16 math" in found.remedy()  # emulated (slower) elsewhere
    # Measured on a Xeon with AMX: bf16 beat int8 (28 against 52 ms); the remedy does not say "as much only".
    assert "more with AMX" in found.remedy() and "emulated" in found.remedy()
    assert found.evidence() in launch.evidence
    assert tracekit.render(tracekit.report(DATA / "linear_inference_float32.pt.trace.json.gz"), "json").count(
        '"float32_linears"') == 1


@pytest.mark.parametrize("name", [
    "linear_inference_int8",   # quantized::linear_dynamic: already int8
    "linear_inference_small",  # batches of 1 through 64-wide layers: int8 runs such products slower
    "decode_sdpa",             # a decode loop of 4 rows a call (small products; its own remedy names weight bytes)
    "unused_grads",            # training: a backward pass
])
def test_not_for_int8_small_products_decoding_or_training(name: str) -> None:
    assert _found(name) is None


def test_linear_layers_on_two_threads_at_once_are_a_share_of_the_steps_wall_time() -> None:
    """tests/data/cpu/fork_branches: a TorchScript fork runs half the Linear layers on a second thread
    beside the first half. Their calls' durations summed came to 129-176% of the steps, told as
    'spends 129% of the step time in float32 Linear layers'; the time any of them runs is what a
    share of the steps can be, and the top ops' shares are said to be summed over the threads."""
    r = tracekit.report(DATA / "fork_branches.pt.trace.json.gz").launch
    assert r.float32_linears is not None and 0.4 < r.float32_linears.share <= 1.0
    top = next(e for e in r.evidence if e.startswith("top ops by self time"))
    assert top.startswith("top ops by self time (summed over the 3 threads that ran ops"), top


def test_serving_threads_shares_are_wall_time_or_said_to_be_summed() -> None:
    """tests/data/cpu/serving_threads: 3 Python threads serving an MLP at once, every thread's ops
    recorded (profile_all_threads). The Linear layers' calls summed to 91% of the steps, where one or
    more ran during 71%; the skinny products' shares are of the threads' summed time and say so."""
    r = tracekit.report(DATA / "serving_threads.pt.trace.json.gz").launch
    assert r.float32_linears is not None and 0.5 < r.float32_linears.share < 0.8
    skinny = [x for x in r.remedies if "a skinny GEMM" in x]
    assert skinny and all(", summed over 9 threads: a skinny GEMM" in x for x in skinny), skinny
