"""Writes tests/data/cpu/variable_length.pt.trace.json.gz: a real torch.profiler capture (CPU) of an
nn.LSTM trained on batches of 16 sequences whose length varies from batch to batch (10 to 100
timesteps; 12 steps marked by a schedule): the long batches' steps take 2-4x the median, by design.

    python tests/data/cpu/make_variable_length.py
Made with torch 2.13.0 (CPU build).
"""

import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).parent
LENGTHS = [10, 40, 15, 80, 20, 12, 100, 25, 30, 18, 60, 22]

if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(64, 64)
    opt = torch.optim.SGD(lstm.parameters(), lr=0.01)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "t.json"
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=len(LENGTHS)),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
            for length in [10, *LENGTHS]:
                opt.zero_grad()
                lstm(torch.randn(length, 16, 64))[0].sum().backward()
                opt.step()
                prof.step()
        with raw.open("rb") as src, gzip.open(HERE / "variable_length.pt.trace.json.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
