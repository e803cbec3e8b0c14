"""The same events in another order are the same trace: every analysis gives the same result.

Profilers write their events in orders of their own (Kineto: per thread, CPU ops before GPU
activities; a merged or re-exported file: another), so an analysis that takes "the first" row in the
file's order answers differently for the same run. benchmarks/fuzz_analysis.py checks every stored
trace this way; these are the traces where it found an answer that moved: the eager ops between
compiled graphs tied on count (listed in the file's order), the first gather/scatter pair of a
message-passing step, and a range list in the file's order.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

import tracekit

DATA = Path(__file__).parent / "data"
TRACES = ["cpu/keras_torch_jit.pt.trace.json.gz", "cpu/message_passing_bags.pt.trace.json.gz",
          "h200/tiny_ops.pt.trace.json.gz"]
FILE_SPECIFIC = ("title", "row", "parent")  # the file's name; row numbers of the file's order


def _order_free(result: object, names: tuple[str, ...]) -> object:
    if isinstance(result, dict):
        return {k: _order_free(v, names) for k, v in result.items() if k not in FILE_SPECIFIC}
    if isinstance(result, list):
        return [_order_free(v, names) for v in result]
    if isinstance(result, str):
        for name in names:
            result = result.replace(name, "TRACE")
    return result


@pytest.mark.parametrize("rel", TRACES)
@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_a_trace_with_its_events_reordered_gives_the_same_results(rel: str, order: str, tmp_path: Path) -> None:
    original = DATA / rel
    doc = json.loads(gzip.decompress(original.read_bytes()))
    if order == "reversed":  # every tie the file's order breaks, broken the other way
        doc["traceEvents"].reverse()
    else:
        random.Random(f"20261130/{original.name}/shuffle").shuffle(doc["traceEvents"])  # the fuzz's seed
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(doc))
    names = (str(original), str(shuffled))
    for analysis in ("report", "whatif", "critical_path", "ranges"):
        a, b = (json.loads(tracekit.render(getattr(tracekit, analysis)(path), "json")) for path in (original, shuffled))
        assert _order_free(a, names) == _order_free(b, names), analysis
