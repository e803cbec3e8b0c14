"""Why a PyTorch LSTM layer ran per timestep on a CPU rather than as oneDNN's one fused op.

On a CPU, ``nn.LSTM`` runs ``aten::lstm``, which hands a whole layer to oneDNN
(``aten::mkldnn_rnn_layer``, one op for all timesteps) only for a padded float32 or bfloat16 batch
and a layer without ``proj_size``; otherwise it runs its own C++ loop of an ``addmm`` and the gates'
ops per timestep, ~30x the ops. Measured with torch 2.13 on a 2-core Xeon (h256 b16 t20, one
training step, unprofiled): padded 5.1 ms, the same batch packed 7.4 ms (though packing drops the
padding's work), float64 14-16 ms, ``proj_size=64`` 6.0 ms. On a GPU cuDNN takes all of these, so
this is a CPU rule. Each call's reason is read from its recorded inputs (``record_shapes=True``):
``aten::lstm``'s ``data`` overload (a PackedSequence) takes a 1-D ``batch_sizes`` second, the
input's type is ``double``, or the hidden state's last dim (``proj_size``) differs from the cell
state's.
"""

from __future__ import annotations

import json

import numpy as np

from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame
from tracekit.analyze.top_ops import args_text
from tracekit.ingest.links import nearest_ancestor

LSTM_LAYER = "aten::lstm"
FUSED_CPU_LSTM = "aten::mkldnn_rnn_layer"
MIN_SHARE = 0.5  # of the aten::lstm calls' time, in calls that ran per timestep
CALLS_READ = 50  # calls whose inputs are read for a reason (all calls of one layer give the same)

PACKED = "its input is a PackedSequence"
FLOAT64 = "its input is float64"
PROJECTION = "the layer has a projection (proj_size)"


def lstm_per_timestep_reasons(frame: Frame) -> list[str] | None:
    """On a CPU trace whose ``aten::lstm`` calls mostly ran per timestep (no ``mkldnn_rnn_layer``
    inside), the reasons their inputs show (``PACKED``, ``FLOAT64``, ``PROJECTION``; [] when none is
    recorded); None where the calls ran fused, or the trace has no such call or has GPU activity."""
    if frame.rows(*GPU_BUSY_KINDS).size:
        return None
    ops = frame.rows("cpu_op")
    names = frame.names
    lstm_code = names.index(LSTM_LAYER) if LSTM_LAYER in names else -2
    calls = ops[frame.name_code[ops] == lstm_code]
    if not calls.size:
        return None
    wanted = np.zeros(len(frame), bool)
    wanted[calls] = True
    fused_code = names.index(FUSED_CPU_LSTM) if FUSED_CPU_LSTM in names else -2
    fused_ops = ops[frame.name_code[ops] == fused_code]
    fused_calls = nearest_ancestor(frame.parent, fused_ops, wanted)
    per_timestep = calls[~np.isin(calls, fused_calls)]
    dur = frame.dur
    if int(dur[per_timestep].sum()) < MIN_SHARE * int(dur[calls].sum()) or not per_timestep.size:
        return None
    reasons: list[str] = []
    for args in _args(frame, per_timestep[:CALLS_READ]):
        for reason in _reasons(args):
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def _args(frame: Frame, rows: np.ndarray) -> list[dict]:
    if "args" not in frame.table.column_names:
        return []
    out = []
    for text in args_text(frame.table, rows).to_pylist():
        try:
            args = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            args = None
        if isinstance(args, dict):
            out.append(args)
    return out


def _reasons(args: dict) -> list[str]:
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) < 3:
        return []
    out = []
    packed = isinstance(dims[1], list) and len(dims[1]) == 1 and all(isinstance(d, int) for d in dims[1])
    if packed:
        out.append(PACKED)
    if types and types[0] == "double":
        out.append(FLOAT64)
    hx = dims[2] if packed else dims[1]  # (h0, c0)
    if (isinstance(hx, list) and len(hx) == 2 and all(isinstance(h, list) and h for h in hx)
            and hx[0][-1] != hx[1][-1]):
        out.append(PROJECTION)
    return out
