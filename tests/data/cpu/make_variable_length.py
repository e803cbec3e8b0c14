"""Writes tests/data/cpu/variable_length.pt.trace.json.gz: a real torch.profiler capture (CPU) of an
nn.LSTM trained on batches of 16 sequences whose length varies from batch to batch (10 to 100
timesteps; 12 steps marked by a schedule): the long batches' steps take 2-4x the median, by design.

    python tests/data/cpu/make_variable_length.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture

LENGTHS = [10, 40, 15, 80, 20, 12, 100, 25, 30, 18, 60, 22]

if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(64, 64)
    opt = torch.optim.SGD(lstm.parameters(), lr=0.01)
    lengths = [10, *LENGTHS]  # the warm-up step's, then the marked steps'

    def step(i: int) -> None:
        opt.zero_grad()
        lstm(torch.randn(lengths[i], 16, 64))[0].sum().backward()
        opt.step()

    write_capture("variable_length", step, active=len(LENGTHS))
