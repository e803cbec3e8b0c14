"""Writes tests/data/cpu/{adamw,adamw_foreach,adamw_fused,sgd,sgd_fused}_large_tensors.pt.trace.json.gz:
real torch.profiler captures (CPU, shapes recorded, 6 marked steps) of one MLP's training loop
(1024-1024-1024-10, batch 16: 2.1M parameters, two 1M-element weights) whose optimizer update is most
of the step: AdamW one parameter at a time (the CPU default), with foreach=True and with fused=True;
SGD with momentum one parameter at a time and fused. The fused captures are what the fused-optimizer
replay of the others is checked against (tests/test_optimizer.py): the same loop, profiled alike.

    python tests/data/cpu/make_optimizer_large_tensors.py
Made with torch 2.13.0 (CPU build), two threads, on a 2-core Xeon (AVX-512, AMX). Timed unprofiled
there (medians of 30 steps): AdamW's update 4.72 ms one parameter at a time, 0.83 ms fused; the
forward and backward 1.5-2.0 ms.
"""

import torch
from profiled import write_training_capture

LOOPS = {"adamw_large_tensors": (torch.optim.AdamW, {"foreach": False}),
         "adamw_foreach_large_tensors": (torch.optim.AdamW, {"foreach": True}),
         "adamw_fused_large_tensors": (torch.optim.AdamW, {"fused": True}),
         "sgd_large_tensors": (torch.optim.SGD, {"foreach": False, "momentum": 0.9}),
         "sgd_fused_large_tensors": (torch.optim.SGD, {"fused": True, "momentum": 0.9})}


if __name__ == "__main__":
    for name, (optimizer, update) in LOOPS.items():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                    torch.nn.ReLU(), torch.nn.Linear(1024, 10))
        opt = optimizer(model.parameters(), lr=1e-3, **update)
        write_training_capture(name, model, opt, torch.randn(16, 1024), torch.randint(0, 10, (16,)), active=6)
