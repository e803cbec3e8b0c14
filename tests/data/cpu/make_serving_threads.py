"""Writes tests/data/cpu/serving_threads.pt.trace.json.gz: a real torch.profiler capture (CPU, shapes
recorded, _ExperimentalConfig(profile_all_threads=True), which records the ops of every thread, not
only the one that entered the profiler) of an MLP (256-1024-256, GELU) served by 3 Python threads at
once, each running 10 requests of batch 8 under inference_mode, 3 steps marked (a step starts the
threads and joins them). The ops' self times summed over the threads exceed the steps (aten::addmm
83% and aten::gelu 23% of them): the report said the Linear layers took 91% of the steps, their calls'
durations summed, where one or more ran during 71% of them.

    python tests/data/cpu/make_serving_threads.py
Made with torch 2.13.0 (CPU build).
"""

import threading

import torch
from profiled import write_capture
from torch._C._profiler import _ExperimentalConfig


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).eval()

    def serve() -> None:
        with torch.inference_mode():
            for _ in range(10):
                model(torch.randn(8, 256))

    def step() -> None:
        threads = [threading.Thread(target=serve) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    step()
    write_capture("serving_threads", lambda _: step(), active=3, record_shapes=True,
                  experimental_config=_ExperimentalConfig(profile_all_threads=True))


if __name__ == "__main__":
    main()
