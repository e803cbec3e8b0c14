"""Writes tests/data/cpu/mc_dropout.pt.trace.json.gz: a real torch.profiler capture (CPU, one thread, shapes
recorded) of Monte Carlo dropout: an MLP (Linear 256-512, BatchNorm1d, ReLU, Dropout(0.2), twice, then
Linear 512-10) put in eval mode with its dropout layers switched back to train(), run 8 times a step on
the same batch of 64 under torch.inference_mode(), 3 steps marked. The report said "inference runs with
the model in training mode ... model.eval() was not called", where the recorded BatchNorm calls show
eval mode, and ranked "call model.eval()" at the masks' time. Unprofiled (20 passes, 2 threads, 2-core
Xeon): 16.0-17.4 ms a step as a loop of passes, 15.1-15.5 ms as one batch (model(x.repeat(20, 1))).

    python tests/data/cpu/make_mc_dropout.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.BatchNorm1d(512), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(512, 512), torch.nn.BatchNorm1d(512), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(512, 10)).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.train()
    x = torch.randn(64, 256)

    def step(_: int) -> torch.Tensor:
        with torch.inference_mode():
            return torch.stack([model(x).softmax(-1) for _ in range(8)]).var(0)

    step(0)
    write_capture("mc_dropout", step, active=3, record_shapes=True)


if __name__ == "__main__":
    main()
