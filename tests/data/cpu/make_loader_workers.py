"""Made loader_workers_{fetch,dispatch}_largest.pt.trace.json.gz: a CPU training loop fed by
DataLoader(num_workers=2).

    python tests/data/cpu/make_loader_workers.py OUT_DIR

Each sample costs its worker ~0.2 ms (a sleep standing in for decoding), so the loop often waits in
``_MultiProcessingDataLoaderIter.__next__`` with no op running. Timing decides the shares, which
moved from run to run on a 2-core Xeon (torch 2.13.0): of twelve runs, fetching took 22-66% of the
steps. Two are kept, where no part reaches half the step: fetch_largest (fetching 45%, framework
dispatch 43%, compute ops 12%) and dispatch_largest (dispatch 43%, fetching 37%, compute 19%).
"""

import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule


class SlowSamples(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.x, self.y = torch.randn(512, 32), torch.randn(512, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        time.sleep(0.0002)
        return self.x[i], self.y[i]


def main(out: str) -> None:
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(SlowSamples(), batch_size=16, num_workers=2)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    batches = iter(loader)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3)) as prof:
        for _ in range(5):
            x, y = next(batches)
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(f"{out}/loader_workers.pt.trace.json")


if __name__ == "__main__":
    main(sys.argv[1])
