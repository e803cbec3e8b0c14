"""Writes tests/data/cpu/fetch_loop*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread) of
inference loops over a DataLoader (batch 32 of 128 features, a 128-256-10 MLP under no_grad), profiled
without a schedule: no ProfilerStep, no range of the user's, no optimizer step, so only the loader's
``__next__`` marks where an iteration begins.

- ``fetch_loop``: 12 batches, then the loader's exhaustion (a 13th ``__next__``).
- ``fetch_loop_prefetched`` (not iterations): the 12 batches fetched first into a list, then run.

    python tests/data/cpu/make_fetch_loop.py
Made with torch 2.13.0 (CPU build).
"""

from collections.abc import Callable

import torch
from profiled import store
from torch.profiler import ProfilerActivity, profile


def write(name: str, run: Callable[[], object]) -> None:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    store(prof, name)


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
    data = torch.utils.data.TensorDataset(torch.randn(32 * 12, 128))
    loader = torch.utils.data.DataLoader(data, batch_size=32)

    def loop() -> None:
        with torch.no_grad():
            for (x,) in loader:
                model(x).argmax(1)

    def prefetched() -> None:
        with torch.no_grad():
            for (x,) in list(loader):
                model(x).argmax(1)

    loop()  # warm-up, unprofiled
    write("fetch_loop", loop)
    write("fetch_loop_prefetched", prefetched)
