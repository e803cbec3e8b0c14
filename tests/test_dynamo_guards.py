"""torch.compile's guard checks (TorchDynamo Cache Lookup) said apart from framework dispatch
(tracekit/analyze/launch.py, _guard_checks; the remedy in tracekit/analyze/verdicts.py).

Real capture: Keras 3 on the torch backend training an MLP with jit_compile=True
(tests/data/cpu/make_keras_torch.py): its train step runs 18 compiled calls a step, each after a
guard check of 60-80 µs, a quarter of the step."""

from __future__ import annotations

import re
from pathlib import Path

import tracekit
from tracekit.analyze import verdicts

DATA = Path(__file__).parent / "data" / "cpu"


def test_guard_checks_are_said_apart_from_dispatch_with_their_remedy():
    r = tracekit.launch(DATA / "keras_torch_jit.pt.trace.json.gz").result
    said = next(e for e in r.evidence if "of step time is outside any compute op" in e)
    match = re.search(r"(\d+)% framework dispatch, (\d+)% Dynamo's guard checks before each compiled call "
                      r"\(TorchDynamo Cache Lookup, 18 a step, (\d+) µs each\)", said)
    assert match is not None, said
    dispatch, guards, each = (int(g) for g in match.groups())
    assert 15 <= guards <= 35 and 40 <= each <= 120 and dispatch < 40  # 34% / 24% / 62 µs in this capture
    remedy = next(x for x in r.remedies if x.startswith("Dynamo's guard checks before each compiled call take"))
    assert "skip_guard_eval_unsafe=True" in remedy
    # Before, the guard checks were "framework dispatch outside" the compiled graph (58%), and the
    # remedy was to compile more of the step (more compiled calls: more guards).
    assert not any(x.startswith("the step runs a torch.compile graph, but") for x in r.remedies)


def test_a_step_without_compiled_calls_has_no_guard_share():
    r = tracekit.launch(DATA / "keras_torch_lstm.pt.trace.json.gz").result
    assert not any("guard checks" in e for e in r.evidence)
    assert not any("guard checks" in x for x in r.remedies)
    assert verdicts.GUARD_SHARE > 0
