"""Matrix products run in float64.

NumPy's default float is float64 and ``torch.from_numpy`` keeps it, so a model fed NumPy data fails
with "expected scalar type Double but found Float" until either side is converted; calling
``model.double()`` makes that error go away and halves the products' rate on a CPU (PyTorch 2.13,
2-core AMD EPYC, an MLP of 256-512-512-10 trained with Adam at batch 128: 19.7 ms a step in float64,
12.3 ms in float32). On a GPU float64 runs at 1/2 (data-centre parts) to 1/64 (consumer parts) of
float32's rate, without tensor cores below the A100.

The evidence (CPU-only PyTorch traces with types recorded, ``record_shapes=True``): the steps'
matrix products whose two factors are ``double`` take ``MIN_SHARE`` of the steps' time (their own
time). Float32 also halves the bytes every other op on those tensors moves (the optimizer's update,
the activations' elementwise ops): the steps' other ops whose first input is a float64 tensor of
``MIN_ELEMENTS`` or more (on smaller ones an op's time is mostly its fixed cost) are the remedy's
other half (same MLP, 2-core Xeon, unprofiled: 4.84 ms a step in float64, 2.11 ms in float32; its
products take half the profiled step, the other float64 ops 29%, Adam's sqrt and div most). A CPU
LSTM layer run per timestep in float64 is told by its own rule (``tracekit.analyze.recurrent``). GPU traces are left out: no stored one runs float64 products, so
how their kernels' time would be read from one is untested.

Products outside a model's layers (neither an ``aten::linear`` nor a backward node around most of
their time: a solver's, a simulation's ``A @ p``) may need float64's precision, and there is no model to convert: the remedy
then says where float32 holds and what it would save (a block conjugate gradient on an 800x800 system,
20 iterations, 2-core Xeon: 5.5 ms in float64, 3.1-3.3 ms in float32), not ``model.double()``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from tracekit.analyze.breakdown import op_self_time
from tracekit.analyze.classify import RowClasses, short_name
from tracekit.analyze.frame import (
    BACKWARD_NODE,
    GPU_BUSY_KINDS,
    Frame,
    calls_in_steps,
    ops_in_steps,
    step_rows,
    wall_time,
)
from tracekit.analyze.stalls import INPUT_TYPES, factor_types
from tracekit.analyze.top_ops import GEMM_FLOP_OPS, args_mention, args_text, compact_shapes, input_dims
from tracekit.ingest.links import member_mask, nearest_ancestor
from tracekit.schema import source_of

MIN_SHARE = 0.2
LAYER_OPS = ("aten::linear", "aten::bilinear", "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu")
MIN_ELEMENTS = 16_384


@dataclass(frozen=True)
class Float64Products:
    """The float64 products of the steps used. share: their self time's part of the steps'; calls: how
    many; largest: the name and shapes of the one taking most time; other_share: the steps' other ops
    on float64 tensors of ``MIN_ELEMENTS`` or more, their self time's part."""

    calls: int
    share: float
    largest: str
    other_share: float = 0.0
    in_layers: bool = True  # most of the products' time is inside a model's layers (aten::linear) or its backward

    @property
    def saving(self) -> float:
        """The remedy's share of the steps' time: half the products' (twice the rate) and half the other
        float64 ops' (half the bytes)."""
        return (self.share + self.other_share) / 2

    def evidence(self) -> str:
        return (f"the matrix products run in float64 ({self.calls} calls, {self.share:.0%} of the step time; the largest "
                f"{self.largest}): float64 runs at half float32's rate on a CPU and at 1/2 to 1/64 of it on a GPU")

    def remedy(self) -> str:
        if not self.in_layers:
            return ("where the computation tolerates float32 (check a solver's residuals or a simulation's error against "
                    "float64's), run it in float32: products at twice the rate, the other ops moving half the bytes (a "
                    "block conjugate gradient on an 800x800 system on a CPU: 5.5 ms in float64, 3.1-3.3 ms in float32); "
                    "keep float64 where the precision is needed")
        return ("keep the model and its inputs in float32: convert NumPy data with torch.from_numpy(x).float() (NumPy's "
                "default is float64) rather than calling model.double() (an MLP on a CPU: 19.7 ms a training step in "
                "float64, 12.3 ms in float32)")

    def as_dict(self) -> dict[str, object]:
        return {"calls": self.calls, "share": self.share, "largest": self.largest, "other_share": self.other_share,
                "in_layers": self.in_layers}


def float64_products(frame: Frame, used: list[int] | None) -> Float64Products | None:
    """The steps' float64 products where they take ``MIN_SHARE`` of the time (module doc), else None."""
    if frame.rows(*GPU_BUSY_KINDS).size or not args_mention(frame.table, b'"double"'):
        return None
    rows, steps = calls_in_steps(frame, GEMM_FLOP_OPS, used)
    if not rows.size:
        return None
    typed = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, rows), INPUT_TYPES), "types"),
                         "").dictionary_encode()
    types_code = typed.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    names, types = frame.name_code[rows], typed.dictionary.to_pylist()
    pairs = np.unique(np.stack([names.astype(np.int64), types_code], axis=1), axis=0)
    double = [(n, t) for n, t in pairs.tolist() if factor_types(frame.names[n], types[t]) == ("double", "double")]
    if not double:
        return None
    doubled = np.zeros(rows.size, bool)
    for n, t in double:
        doubled |= (names == n) & (types_code == t)
    rows = rows[doubled]
    time_ns, whole = int(op_self_time(frame, rows).sum()), int(frame.dur[steps].sum()) if steps.size else 0
    if not whole or time_ns < MIN_SHARE * whole:
        return None
    longest = int(rows[np.argmax(frame.dur[rows])])
    dims_code, dims = input_dims(frame.table, np.array([longest]))
    shapes = compact_shapes(dims[int(dims_code[0])]) if dims and dims[int(dims_code[0])] else ""
    largest = f"{short_name(frame.name(longest))}" + (f" {shapes}" if shapes else "")
    # A layer's forward call, or any backward: a solver does not train.
    layer = member_mask(frame.name_code, [c for c, n in enumerate(frame.names) if n in LAYER_OPS or BACKWARD_NODE.search(n)])
    layered = (nearest_ancestor(frame.parent, rows, layer) >= 0) | layer[rows]
    in_layers = 2 * int(op_self_time(frame, rows[layered]).sum()) >= time_ns
    return Float64Products(calls=int(rows.size), share=time_ns / whole, largest=largest,
                           other_share=_other_float64_ns(frame, steps, rows) / whole, in_layers=in_layers)


def _other_float64_ns(frame: Frame, steps: np.ndarray, products: np.ndarray) -> int:
    """Self time of the steps' other ops whose first input is a float64 tensor of ``MIN_ELEMENTS`` or more."""
    ops = frame.rows("cpu_op")
    ops = ops[np.isin(frame.step[ops], frame.step[steps]) & ~np.isin(ops, products)]
    if not ops.size:
        return 0
    typed = pc.fill_null(pc.struct_field(pc.extract_regex(args_text(frame.table, ops), INPUT_TYPES), "types"),
                         "").dictionary_encode()
    types_code, types = typed.indices.to_numpy(zero_copy_only=False), typed.dictionary.to_pylist()
    dims_code, dims = input_dims(frame.table, ops)
    first_double = np.array([t.startswith('["double"') for t in types], bool)[types_code] if types else \
        np.zeros(ops.size, bool)
    large = np.array([_first_elements(d) >= MIN_ELEMENTS for d in dims], bool)[dims_code] if dims else \
        np.zeros(ops.size, bool)
    chosen = ops[first_double & large]
    return int(op_self_time(frame, chosen).sum()) if chosen.size else 0


def _first_elements(dims_text: str) -> int:
    """The element count of an op's first input when it is one tensor (0 otherwise)."""
    try:
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return 0
    first = dims[0] if isinstance(dims, list) and dims else None
    if not isinstance(first, list) or not first or not all(isinstance(d, int) for d in first):
        return 0
    return int(np.prod(first))


@dataclass(frozen=True)
class XlaFloat64Products:
    """An XLA program's float64 products (``xla_float64_products``): ``instructions`` distinct ones, the
    one taking most time ``largest``; share: their time over the steps'; source: jax or tf."""

    instructions: int
    share: float
    largest: str
    source: str
    program_share: float = 0.0  # every op the HLO classed (the compiled programs' ops), of the steps' time

    @property
    def saving(self) -> float:
        """Half the programs' op time: under x64 their other ops run on float64 tensors too (twice the bytes)."""
        return max(self.program_share, self.share) / 2

    def evidence(self) -> str:
        return (f"the XLA program's matrix products run in float64 ({self.instructions} instruction(s) whose HLO result "
                f"is f64, {self.share:.0%} of the step time; the largest {self.largest}): float64 runs at half "
                "float32's rate on a CPU and at 1/2 to 1/64 of it on a GPU")

    def remedy(self) -> str:
        if self.source == "jax":
            return ("compute in float32 where its precision holds: with jax_enable_x64 on, NumPy inputs (float64 by "
                    "default) and float64 parameters make every product float64; cast them with .astype(jnp.float32) "
                    "or leave x64 off (an MLP's training step on a 2-core CPU: 2.30 ms in float64, 1.06 ms in float32)")
        return ("compute in float32 where its precision holds: tensors made from NumPy arrays (float64 by default) "
                "stay float64 through the compiled program; cast them with tf.cast(x, tf.float32)")

    def as_dict(self) -> dict[str, object]:
        return {"instructions": self.instructions, "share": self.share, "largest": self.largest, "source": self.source,
                "program_share": self.program_share}


def xla_float64_products(frame: Frame, classes: RowClasses, used: list[int] | None) -> XlaFloat64Products | None:
    """The XLA ops of the steps used whose HLO instruction runs a float64 product or convolution
    (``RowClasses.hlo_float64``, from the HLO modules the trace holds), where they take ``MIN_SHARE``
    of the steps' time; None on GPU traces (untested there, as for PyTorch's) and without HLO modules."""
    if classes.hlo_float64 is None or not classes.hlo_float64.any() or frame.rows(*GPU_BUSY_KINDS).size:
        return None
    ops, steps = ops_in_steps(frame, used), step_rows(frame, used)
    rows = ops[classes.hlo_float64[ops]]
    step_ns = int(frame.dur[steps].sum()) if steps.size else 0
    if not rows.size or not step_ns:
        return None
    share = wall_time(frame, rows) / step_ns
    if share < MIN_SHARE:
        return None
    codes, index = np.unique(frame.name_code[rows], return_inverse=True)
    per_name = np.bincount(index.ravel(), weights=frame.dur[rows])
    program = ops[classes.by_hlo[ops]] if classes.by_hlo is not None else rows
    return XlaFloat64Products(instructions=int(codes.size), share=share,
                              largest=frame.names[int(codes[int(np.argmax(per_name))])],
                              source=source_of(frame.table), program_share=wall_time(frame, program) / step_ns)
