"""XLA's HLO modules in an XSpace (``/host:metadata`` plane): what each instruction computes.

XLA names the instructions it runs after how it built them, not after what they compute: on the CPU,
JAX and TF's XLA run matrix products and reductions as ``ynn_fusion.1`` or ``xnn_fusion`` (a YNNPACK /
XNNPACK fusion holds a ``dot``, a ``reduce`` or pointwise work), on a GPU as ``fusion.12`` or
``custom-call.3``. The profiler stores each compiled module's ``HloProto`` beside the events (one
``XEventMetadata`` per module, named ``jit_step(12)``, with stats ``Hlo Proto`` and ``program_id``), and
every XLA op event carries ``hlo_module``, ``program_id`` and ``hlo_op``. The class of an instruction
comes from its opcode (``dot`` a GEMM, ``reduce`` a reduction, ``convert`` a cast, ``transpose`` or
``copy`` data movement, other arithmetic elementwise), and a fusion's from the instructions it fuses
(a convolution, else a ``dot``, else a ``reduce``, else arithmetic; only converts: a cast; only data
movement: a copy), which is what xprof reads too. Control flow (``while``: its body's instructions
are events of their own), values and library calls of unknown targets are left to the name rules.

Only the fields read here are declared (protobuf skips the others)::

    HloProto            { HloModuleProto hlo_module = 1; }
    HloModuleProto      { string name = 1; repeated HloComputationProto computations = 3; }
    HloComputationProto { string name = 1; repeated HloInstructionProto instructions = 2; int64 id = 5; }
    HloInstructionProto { string name = 1; string opcode = 2; ShapeProto shape = 3;
                          string custom_call_target = 28; int64 id = 35; repeated int64 called_computation_ids = 38; }
    ShapeProto          { PrimitiveType element_type = 2; }   (F64 = 12, C128 = 18)

Besides the classes: the instructions that run a matrix product or convolution (themselves, or a
fusion of one) whose result is float64 or complex128 (``instruction_facts``).
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

_F = descriptor_pb2.FieldDescriptorProto

# HLO opcodes that say what an instruction computes (tracekit's op classes).
OPCODE_CLASSES = {
    "dot": "gemm", "convolution": "convolution", "fft": "fft",
    "reduce": "reduction", "reduce-window": "reduction", "select-and-scatter": "reduction", "sort": "reduction",
    "cholesky": "linalg", "triangular-solve": "linalg",
    "convert": "cast",
    **{op: "communication" for op in (
        "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done",
        "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start",
        "collective-permute-done", "collective-broadcast", "send", "send-done", "recv", "recv-done")},
    # Data movement: memory-bound work with no arithmetic (xprof's "data formatting"), tracekit's copy.
    **{op: "copy" for op in (
        "copy", "copy-start", "copy-done", "transpose", "concatenate", "slice", "dynamic-slice", "dynamic-update-slice",
        "pad", "gather", "broadcast", "reshape", "reverse")},
}
# Instructions that are no arithmetic of their own: values, views and tuples; control flow, whose
# time is its body's instructions (events of their own); host transfers; and library calls of a
# target not known above.
NOT_ARITHMETIC = frozenset({"parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
                            "partition-id", "replica-id", "iota", "opt-barrier", "domain", "add-dependency",
                            "while", "conditional", "call", "async-start", "async-update", "async-done",
                            "infeed", "outfeed", "custom-call"})
# A fusion is what its most expensive fused work is: a convolution, else a matrix product, else a
# reduction, else pointwise arithmetic; one that only converts is a cast, one that only moves data a copy.
FUSED_ORDER = ("convolution", "gemm", "reduction", "fft", "linalg", "elementwise", "cast", "copy")
# Library calls by target: cuBLAS/cuBLASLt and oneDNN matmuls, cuDNN convolutions and fused attention,
# LAPACK / cuSOLVER factorizations, FFTs.
CUSTOM_CALL_CLASSES = (
    ("attention", re.compile(r"fmha|flash|attention", re.I)),
    ("convolution", re.compile(r"conv", re.I)),
    ("gemm", re.compile(r"gemm|matmul|cublas|\$dot", re.I)),
    ("linalg", re.compile(r"lapack|cusolver|potrf|getrf|geqrf|syevd|gesvd|trsm|eigh|\bqr\b", re.I)),
    ("fft", re.compile(r"fft", re.I)),
)


def _messages() -> type[message.Message]:
    fd = descriptor_pb2.FileDescriptorProto(name="tracekit_hlo.proto", package="tracekit.hlo", syntax="proto3")
    specs = {
        "ShapeProto": [("element_type", 2, _F.TYPE_INT32, "")],
        "HloInstructionProto": [("name", 1, _F.TYPE_STRING, ""), ("opcode", 2, _F.TYPE_STRING, ""),
                                ("shape", 3, _F.TYPE_MESSAGE, "ShapeProto"),
                                ("custom_call_target", 28, _F.TYPE_STRING, ""), ("id", 35, _F.TYPE_INT64, ""),
                                ("called_computation_ids", 38, _F.TYPE_INT64, "*")],
        "HloComputationProto": [("name", 1, _F.TYPE_STRING, ""), ("id", 5, _F.TYPE_INT64, ""),
                                ("instructions", 2, _F.TYPE_MESSAGE, "*HloInstructionProto")],
        "HloModuleProto": [("name", 1, _F.TYPE_STRING, ""),
                           ("computations", 3, _F.TYPE_MESSAGE, "*HloComputationProto")],
        "HloProto": [("hlo_module", 1, _F.TYPE_MESSAGE, "HloModuleProto")],
    }
    for name, fields in specs.items():
        m = fd.message_type.add(name=name)
        for fname, number, ftype, ref in fields:
            f = m.field.add(name=fname, number=number, type=ftype)
            f.label = _F.LABEL_REPEATED if ref.startswith("*") else _F.LABEL_OPTIONAL
            if ftype == _F.TYPE_MESSAGE:
                f.type_name = ".tracekit.hlo." + ref.lstrip("*")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tracekit.hlo.HloProto"))


HloProto = _messages()


# PrimitiveType values of double-precision results (xla_data.proto): F64, C128.
DOUBLE_TYPES = frozenset({12, 18})
PRODUCT_OPCODES = frozenset({"dot", "convolution"})


def instruction_classes(proto: bytes) -> tuple[str, dict[str, str]]:
    """(module name, {instruction name: class}) of one serialized ``HloProto``, for the instructions
    whose HLO says what they compute. Raises ``ValueError`` when the bytes are not an HloProto."""
    module, classes, _ = instruction_facts(proto)
    return module, classes


def instruction_facts(proto: bytes) -> tuple[str, dict[str, str], set[str]]:
    """``instruction_classes`` and the names of the instructions that run a float64 (or complex128)
    matrix product or convolution: a ``dot``/``convolution`` of such a result, or a fusion holding one."""
    hp = HloProto()
    try:
        hp.ParseFromString(proto)
    except message.DecodeError as e:
        raise ValueError(f"not an HloProto ({e})") from None
    module = hp.hlo_module
    computations = {c.id: c for c in module.computations}
    fused: dict[int, str | None] = {}  # computation id -> class of what it computes (memo)

    def computation_class(cid: int, seen: frozenset[int]) -> str | None:
        """What a fused computation computes: the first of FUSED_ORDER among its instructions."""
        if cid in fused:
            return fused[cid]
        comp = computations.get(cid)
        if comp is None or cid in seen:
            return None
        found = {work_class(inst, seen | {cid}) for inst in comp.instructions}
        fused[cid] = next((c for c in FUSED_ORDER if c in found), None)
        return fused[cid]

    def work_class(inst: Any, seen: frozenset[int]) -> str | None:
        """An instruction's class inside a fusion: arithmetic of no named class is elementwise."""
        cls = own_class(inst, seen)
        if cls is None and inst.opcode not in NOT_ARITHMETIC:
            return "elementwise"
        return cls

    def own_class(inst: Any, seen: frozenset[int]) -> str | None:
        if inst.opcode in OPCODE_CLASSES:
            return OPCODE_CLASSES[inst.opcode]
        if inst.opcode == "custom-call":
            return next((cls for cls, rx in CUSTOM_CALL_CLASSES if rx.search(inst.custom_call_target)), None)
        if inst.opcode == "fusion":
            inner = {computation_class(c, seen) for c in inst.called_computation_ids}
            # Only values and views fused (no work): a copy of them, what a fusion is made to produce.
            return next((c for c in FUSED_ORDER if c in inner), "copy")
        return None

    def event_class(inst: Any) -> str | None:
        """The class of an instruction that runs as its own event: arithmetic outside any fusion
        (``add.3``, ``tanh``) is elementwise; control flow and values are left to the name rules."""
        return work_class(inst, frozenset())

    double: dict[int, bool] = {}  # computation id -> holds a double-precision product (memo)

    def double_product(inst: Any, seen: frozenset[int]) -> bool:
        if inst.opcode in PRODUCT_OPCODES:
            return inst.shape.element_type in DOUBLE_TYPES
        if inst.opcode != "fusion":
            return False
        for cid in inst.called_computation_ids:
            if cid not in double:
                comp = computations.get(cid)
                double[cid] = comp is not None and cid not in seen and any(
                    double_product(i, seen | {cid}) for i in comp.instructions)
            if double[cid]:
                return True
        return False

    classes: dict[str, str] = {}
    float64: set[str] = set()
    for comp in module.computations:
        for inst in comp.instructions:
            cls = event_class(inst)
            if cls is not None:
                classes[inst.name] = cls
                if cls in ("gemm", "convolution") and double_product(inst, frozenset()):
                    float64.add(inst.name)
    return module.name, classes, float64
