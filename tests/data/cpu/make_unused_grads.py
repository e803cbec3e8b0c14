"""Writes tests/data/cpu/unused_grads_*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread,
shapes recorded) of fine-tuning a linear head over a 4-conv backbone (3-32-64-64-128, BatchNorm, ReLU;
batch 16 at 32x32), 3 steps marked each:

- ``unused_grads``: SGD over the head only, the backbone left requiring grad; timed here unprofiled on
  a 2-core AMD EPYC: 160 ms a step, 50 ms frozen (at 64x64: 766 against 208 ms).
- ``unused_grads_foreach``: the same with Adam(foreach=True), whose ops take lists of tensors.
- ``unused_grads_frozen`` (not one): the backbone frozen, ``requires_grad_(False)``.
- ``unused_grads_all`` (not one): SGD over every parameter.

    python tests/data/cpu/make_unused_grads.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import unprofiled_ms, write_capture


def fine_tuning(name: str, frozen: bool = False, everything: bool = False, adam: bool = False) -> None:
    torch.manual_seed(0)
    backbone = torch.nn.Sequential(*[m for c_in, c in ((3, 32), (32, 64), (64, 64), (64, 128)) for m in
                                     (torch.nn.Conv2d(c_in, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU())],
                                   torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    head = torch.nn.Linear(128, 10)
    backbone.requires_grad_(not frozen)
    params = [*backbone.parameters(), *head.parameters()] if everything else list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3, foreach=True) if adam else torch.optim.SGD(params, lr=0.01)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(head(backbone(x)), y).backward()
        opt.step()

    print(f"{name}: {unprofiled_ms(step, 20):.1f} ms a step")
    write_capture(name, step, active=3, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    fine_tuning("unused_grads")
    fine_tuning("unused_grads_foreach", adam=True)
    fine_tuning("unused_grads_frozen", frozen=True)
    fine_tuning("unused_grads_all", everything=True)
