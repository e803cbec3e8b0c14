"""Inference run with the model in training mode (``model.eval()`` not called).

A model left in training mode after training, or never switched, keeps drawing dropout masks at
inference: each ``nn.Dropout`` draws a random mask and scales its input (and the outputs vary from
call to call), ``BatchNorm`` normalizes by the batch and updates its running statistics, and
``nn.TransformerEncoder`` / ``nn.MultiheadAttention`` skip their fused inference path. PyTorch 2.13,
2-core AMD EPYC, one thread, under ``torch.inference_mode()``: a 4-layer ``nn.TransformerEncoder``
(d_model 256, 4 heads, dropout 0.1) on 8 sequences of 128 took 157-191 ms a batch in training mode and
74-87 ms in eval mode (three runs); a 6-layer MLP of 512 with dropout 0.2 at batch 64, 3.85-5.02 against
2.33-2.73 ms. The report
read "CPU compute-bound" with ``aten::bernoulli_`` its top op and said nothing of why.

The evidence: nothing in the trace runs backward (no autograd engine range, no ``*Backward`` node,
no gradient accumulation: as ``grad_mode``), and dropout calls draw masks (an ``aten::bernoulli_``
inside an ``aten::dropout``, or ``aten::native_dropout``), whose time is ``MIN_SHARE`` or more of the
steps' (of the ops' busy time where no step is marked). In eval mode ``aten::dropout`` is still
called and returns its input: no mask, no time. CPU traces only: on a GPU the masks' cost is their
kernels' time, and no stored GPU trace runs inference in training mode.

A training trace that marks its evaluation batches as steps too (``steps`` sets them apart: steps
without backward among steps with it) is judged on those steps alone: masks drawn there mean the
loop evaluates without ``model.eval()`` (a 6-layer MLP with dropout 0.2 at batch 256: 15.4-16.7 ms an
evaluation step against 9.1-9.4 in eval mode), and the outputs it scores vary from run to run.

BatchNorm left in training mode normalizes by each batch and updates its running statistics: the
outputs depend on the batch. ``aten::batch_norm`` calls whose recorded arguments say training, on a
layer that keeps running statistics, one or more a step, are told too (a small CNN on 8 images of
32x32: 3.02 ms a call in training mode, 2.11 ms in eval mode); their cost is not measured apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from tracekit.analyze import intervals
from tracekit.analyze.frame import GPU_BUSY_KINDS, Frame, wall_time
from tracekit.analyze.grad_mode import BACKWARD
from tracekit.analyze.top_ops import args_text
from tracekit.ingest.links import member_mask, nearest_ancestor

DROPOUT_OPS = ("aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_",
               "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout",
               "aten::feature_alpha_dropout_", "aten::native_dropout")
MASK_OPS = ("aten::bernoulli_", "aten::bernoulli", "aten::native_dropout")  # drawn only in training mode
MIN_SHARE = 0.05
BATCH_NORM = "aten::batch_norm"


@dataclass(frozen=True)
class TrainModeInference:
    """Inference (or a training trace's evaluation steps) in training mode. calls: dropout calls drawing a
    mask, per step (or in the whole trace where no step is marked); share: their time of the steps' time;
    batch_norms: BatchNorm calls normalizing by the batch (with running statistics kept), counted alike."""

    calls: int
    per_step: bool
    share: float
    evaluation_steps: int = 0  # judged on a training trace's evaluation steps, this many
    batch_norms: int = 0
    eval_batch_norms: int = 0  # BatchNorm calls a step in eval mode beside the masks: model.eval() was called

    @property
    def dropout_alone(self) -> bool:
        """Masks drawn beside BatchNorm in eval mode: model.eval() was called, dropout switched back on."""
        return bool(self.eval_batch_norms and not self.batch_norms and self.calls)

    def evidence(self) -> str:
        where = "a step" if self.per_step else "in the trace"
        found = []
        if self.calls:
            found.append(f"dropout draws a random mask {self.calls} times {where} (aten::bernoulli_ inside aten::dropout), "
                         f"{self.share:.0%} of the time")
        if self.batch_norms:
            found.append(f"BatchNorm normalizes by each batch's statistics and updates its running ones "
                         f"({self.batch_norms} calls {where}: the outputs depend on the batch)")
        if self.evaluation_steps:
            return (f"the evaluation steps ({self.evaluation_steps}, no backward in them) run with the model in training "
                    f"mode: {'; '.join(found)}: model.eval() was not called before evaluating")
        if self.dropout_alone:
            # eval() switches BatchNorm and dropout alike: dropout on beside it was switched on by itself.
            return (f"inference draws dropout masks with the rest of the model in eval mode: {'; '.join(found)}, while "
                    f"BatchNorm runs in eval mode ({self.eval_batch_norms} calls {where}, their recorded training "
                    "argument False), so model.eval() was called and the dropout layers switched back on: Monte Carlo "
                    "dropout, or a dropout layer left in train()")
        return (f"inference runs with the model in training mode: {'; '.join(found)}; and nothing in the trace runs "
                "backward: model.eval() was not called")

    def remedy(self) -> str:
        if self.evaluation_steps:
            return ("call model.eval() before the evaluation batches and model.train() after: in training mode dropout "
                    "draws masks, BatchNorm uses and updates batch statistics, and the scores vary from run to run (an MLP "
                    "with dropout: 15.4-16.7 ms an evaluation step in training mode, 9.1-9.4 ms in eval mode)")
        if self.dropout_alone:
            return (f"the dropout masks cost {self.share:.0%} of the step: Monte Carlo dropout pays that for its spread of "
                    "outputs (running its passes as one batch, model(x.repeat(T, 1)), saves their dispatch, not the masks: "
                    "20 passes of an MLP with dropout on a CPU, 16.0-17.4 ms in a loop, 15.1-15.5 ms batched); a dropout "
                    "layer not meant to be on goes back to eval mode with the rest (module.eval())")
        return ("call model.eval() before inference (unless the dropout is deliberate: Monte Carlo dropout): dropout "
                "then passes its input through, BatchNorm uses its running statistics, the outputs stop varying from "
                "call to call, and nn.TransformerEncoder / nn.MultiheadAttention take their fused inference path (a "
                "4-layer encoder on a CPU: 157-191 ms a batch in training mode, 74-87 ms in eval mode)")

    def as_dict(self) -> dict[str, object]:
        return {"mask_calls": self.calls, "per_step": self.per_step, "share": self.share,
                "evaluation_steps": self.evaluation_steps, "batch_norm_calls": self.batch_norms,
                "eval_batch_norm_calls": self.eval_batch_norms}


def train_mode_inference(frame: Frame, used: list[int] | None,
                         evaluation: list[int] | None = None) -> TrainModeInference | None:
    """Inference in training mode (module doc), else None. ``evaluation``: a training trace's evaluation
    steps, judged alone where the trace runs backward."""
    dropout_codes = [c for c, n in enumerate(frame.names) if n in DROPOUT_OPS]
    mask_codes = [c for c, n in enumerate(frame.names) if n in MASK_OPS]
    if not (dropout_codes and mask_codes or BATCH_NORM in frame.names) or frame.rows(*GPU_BUSY_KINDS).size:
        return None
    if any(BACKWARD.search(n) for n in frame.names):
        if not evaluation:
            return None
        found = _training_mode_calls(frame, evaluation, dropout_codes, mask_codes)
        return replace(found, evaluation_steps=len(evaluation)) if found is not None else None
    return _training_mode_calls(frame, used, dropout_codes, mask_codes)


def _training_mode_calls(frame: Frame, used: list[int] | None, dropout_codes: list[int],
                 mask_codes: list[int]) -> TrainModeInference | None:
    """The dropout calls drawing masks in the steps ``used`` (every step, or the whole trace where none is
    marked), where they take ``MIN_SHARE`` of the time, and the BatchNorm calls normalizing by the batch
    there, where there is one a step or more."""
    ops = frame.rows("cpu_op")
    steps = frame.rows("step")
    if steps.size and used is not None:
        steps = steps[member_mask(frame.step[steps], used)]
        ops = ops[member_mask(frame.step[ops], used)]
    drawing = dropouts_drawing(frame, ops, dropout_codes, mask_codes)
    if steps.size:
        whole, per = int(frame.dur[steps].sum()), max(int(np.unique(frame.step[steps]).size), 1)
    else:  # no step marked: the ops' busy time
        top = ops[frame.op_parent[ops] < 0]
        whole, per = intervals.total(frame.start[top], frame.end[top]), 1
    share = wall_time(frame, drawing) / whole if whole else 0.0
    normalizing = _batch_norms(frame, ops, training=True)
    if share < MIN_SHARE and normalizing.size < per:  # not even one BatchNorm a step
        return None
    in_eval = _batch_norms(frame, ops, training=False)
    return TrainModeInference(calls=int(round(drawing.size / per)) if share >= MIN_SHARE else 0, per_step=bool(steps.size),
                              share=share if share >= MIN_SHARE else 0.0, batch_norms=int(round(normalizing.size / per)),
                              eval_batch_norms=int(round(in_eval.size / per)))


def dropouts_drawing(frame: Frame, ops: np.ndarray, dropout_codes: list[int], mask_codes: list[int]) -> np.ndarray:
    """The outermost dropout call (``DROPOUT_OPS``) around each mask drawn (``MASK_OPS``) among ``ops``;
    ``aten::native_dropout`` is one itself. Sorted rows."""
    dropout = member_mask(frame.name_code, dropout_codes)
    masks = ops[member_mask(frame.name_code[ops], mask_codes)]
    around = nearest_ancestor(frame.parent, masks, dropout)
    drawing = np.where(around >= 0, around, np.where(dropout[masks], masks, -1))
    drawing = np.unique(drawing[drawing >= 0])
    while drawing.size:  # climb to the outermost dropout (aten::dropout around aten::native_dropout)
        up = nearest_ancestor(frame.parent, drawing, dropout)
        if not (up >= 0).any():
            break
        drawing = np.unique(np.where(up >= 0, up, drawing))
    return drawing


def _batch_norms(frame: Frame, ops: np.ndarray, training: bool) -> np.ndarray:
    """The ``aten::batch_norm`` calls among ``ops`` run in training mode (its 6th argument), or in eval
    mode where ``training`` is False, on a layer that keeps running statistics (a 4th argument with
    dims: ``track_running_stats=False`` normalizes by the batch in eval mode too). Needs the recorded
    arguments (``record_shapes=True``)."""
    if BATCH_NORM not in frame.names or "args" not in frame.table.column_names:
        return ops[:0]
    calls = ops[frame.name_code[ops] == frame.names.index(BATCH_NORM)]
    mode, found = str(training), []
    for row, text in zip(calls.tolist(), args_text(frame.table, calls).to_pylist(), strict=True):
        try:
            args = json.loads(text) if isinstance(text, str) else {}
            concrete, dims = args.get("Concrete Inputs") or [], args.get("Input Dims") or []
            if len(concrete) > 5 and concrete[5] == mode and len(dims) > 3 and dims[3]:
                found.append(row)
        except (ValueError, AttributeError):
            continue
    return np.array(found, np.int64)
