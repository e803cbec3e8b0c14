"""Writes tests/data/cpu/parameter_loop_*.pt.trace.json.gz: real torch.profiler captures (CPU, two
threads, shapes recorded) of an MLP of twelve 128-wide Linear-LayerNorm-GELU blocks and a Linear head
(50 tensors) trained with AdamW on batches of 32, with an EMA copy of its weights, 3 steps marked each:

- ``parameter_loop_ema``: the EMA updated a tensor at a time after ``opt.step()``,
  ``e.sub_((1 - d) * (e - p))`` (diffusers' EMAModel with foreach=False, its default).
- ``parameter_loop_clip_ema``: the same, and ``clip_grad_norm_(..., foreach=False)`` before the step.
- ``parameter_loop_state_dict_ema``: BatchNorm for LayerNorm, and the EMA as YOLO's ModelEMA writes
  it, over the state dict (74 floating tensors: 50 parameters, 24 running statistics),
  ``v *= d; v += (1 - d) * msd[k].detach()``.
- ``parameter_loop_weight_clipping``: no EMA; after the step every weight clamped to [-0.01, 0.01] a
  tensor at a time, ``p.data.clamp_(-c, c)`` (WGAN's critic).
- ``parameter_loop_norm_logging``: no EMA; before the step each weight's and gradient's norm read into a
  dict a tensor at a time, ``p.grad.norm().item()``, as scripts log per-layer norms.
- ``parameter_loop_ema_foreach`` (not one): the EMA as ``torch._foreach_lerp_`` over the lists.
- ``parameter_loop_none`` (not one): no EMA.
- ``parameter_loop_eval_forward`` (not one): no EMA; after the step the model scores a batch of 128
  under ``torch.no_grad()``, activations of the weights' shape (128x128) through every layer.

Then, unless ``--no-timing``, each step and the loops alone timed unprofiled (medians of interleaved
rounds), the figures tracekit/analyze/parameter_loops.py quotes.

    python tests/data/cpu/make_parameter_loops.py [NAME...] [--no-timing]
Made with torch 2.13.0 (CPU build).
"""

import copy
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

import torch
from profiled import write_capture

DECAY = 0.999


def build(batch_norm: bool = False) -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer, torch.Tensor,
                                             torch.Tensor]:
    torch.manual_seed(0)
    norm = torch.nn.BatchNorm1d if batch_norm else torch.nn.LayerNorm
    blocks = [m for _ in range(12) for m in (torch.nn.Linear(128, 128), norm(128), torch.nn.GELU())]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(128, 10))
    ema = copy.deepcopy(model).requires_grad_(False)
    return model, ema, torch.optim.AdamW(model.parameters(), lr=1e-3), torch.randn(32, 128), torch.randint(0, 10, (32,))


def ema_per_tensor(ema: torch.nn.Module, model: torch.nn.Module) -> None:
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.sub_((1 - DECAY) * (e - p))


def ema_lerp_per_tensor(ema: torch.nn.Module, model: torch.nn.Module) -> None:
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.lerp_(p, 1 - DECAY)


def ema_foreach(ema: torch.nn.Module, model: torch.nn.Module) -> None:
    with torch.no_grad():
        torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1 - DECAY)


def state_dict_ema(ema: torch.nn.Module, model: torch.nn.Module) -> None:
    with torch.no_grad():
        msd = model.state_dict()
        for k, v in ema.state_dict().items():
            if v.dtype.is_floating_point:
                v *= DECAY
                v += (1 - DECAY) * msd[k].detach()


def clamp_weights(_: torch.nn.Module, model: torch.nn.Module) -> None:
    for p in model.parameters():
        p.data.clamp_(-0.01, 0.01)


def clip_per_tensor(model: torch.nn.Module) -> None:
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)


def log_norms(model: torch.nn.Module) -> dict[str, float]:
    """Per-layer norms of each weight and gradient, as training scripts log them every step."""
    logs = {}
    for name, p in model.named_parameters():
        logs[f"{name}/grad"] = p.grad.norm().item()
        logs[f"{name}/weight"] = p.norm().item()
    return logs


def training_step(before: Callable[[torch.nn.Module], object] | None,
                  average: Callable[[torch.nn.Module, torch.nn.Module], None] | None,
                  evaluate: bool = False, batch_norm: bool = False) -> Callable[[int], None]:
    model, ema, opt, x, y = build(batch_norm)
    scored = torch.randn(128, 128)

    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if before is not None:
            before(model)
        opt.step()
        if average is not None:
            average(ema, model)
        if evaluate:
            with torch.no_grad():
                model(scored)

    return step


VARIANTS: dict[str, tuple] = {
    "parameter_loop_ema": (None, ema_per_tensor), "parameter_loop_clip_ema": (clip_per_tensor, ema_per_tensor),
    "parameter_loop_state_dict_ema": (None, state_dict_ema, False, True),
    "parameter_loop_weight_clipping": (None, clamp_weights), "parameter_loop_norm_logging": (log_norms, None),
    "parameter_loop_ema_foreach": (None, ema_foreach), "parameter_loop_none": (None, None),
    "parameter_loop_eval_forward": (None, None, True)}


def interleaved_us(calls: dict[str, Callable[[], object]], rounds: int = 15, block: int = 20) -> dict[str, float]:
    """Each call's median time in µs over ``rounds`` rounds of ``block`` calls of each, interleaved."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        for _ in range(5):
            call()
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(block):
                call()
            times[name].append((time.perf_counter() - start) / block * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def timing() -> None:
    steps = {name: training_step(*variant) for name, variant in VARIANTS.items()}
    for name, us in interleaved_us({name: partial(step, 0) for name, step in steps.items()}).items():
        print(f"{name}: {us / 1e3:.2f} ms a step")
    model, ema, _, _, _ = build()
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    params = list(model.parameters())
    loops = {"EMA e.sub_((1 - d) * (e - p)) a tensor at a time": lambda: ema_per_tensor(ema, model),
             "EMA e.lerp_(p, 1 - d) a tensor at a time": lambda: ema_lerp_per_tensor(ema, model),
             "EMA torch._foreach_lerp_": lambda: ema_foreach(ema, model),
             "clip_grad_norm_ foreach=False": lambda: torch.nn.utils.clip_grad_norm_(params, 1e9, foreach=False),
             "clip_grad_norm_ foreach=True": lambda: torch.nn.utils.clip_grad_norm_(params, 1e9, foreach=True)}
    def norms_foreach() -> list[float]:
        return torch.stack(torch._foreach_norm([p.grad for p in params] + params)).tolist()

    loops["norms read a tensor at a time (gradients and weights)"] = lambda: log_norms(model)
    loops["norms as torch._foreach_norm, read once"] = norms_foreach
    bn_model, bn_ema, _, _, _ = build(batch_norm=True)
    averaged = [v for v in bn_ema.state_dict().values() if v.dtype.is_floating_point]
    sources = [v for v in bn_model.state_dict().values() if v.dtype.is_floating_point]

    def state_dict_foreach() -> None:
        with torch.no_grad():
            torch._foreach_lerp_(averaged, sources, 1 - DECAY)

    loops["EMA over the state dict (YOLO's), 74 tensors"] = lambda: state_dict_ema(bn_ema, bn_model)
    loops["EMA over the state dict as torch._foreach_lerp_, 74 tensors"] = state_dict_foreach
    for name, us in interleaved_us(loops).items():
        print(f"{name}: {us:.0f} µs" + ("" if "74" in name else f" ({len(params)} tensors)"))


if __name__ == "__main__":
    torch.set_num_threads(2)
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    for name, variant in VARIANTS.items():
        if only and name not in only:
            continue
        step = training_step(*variant)
        for i in range(3):
            step(i)
        write_capture(name, step, active=3, record_shapes=True)
    if "--no-timing" not in sys.argv:
        timing()
