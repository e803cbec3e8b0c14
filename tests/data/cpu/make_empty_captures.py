"""Writes tests/data/cpu/empty_*.pt.trace.json.gz: real torch.profiler captures (CPU) that hold no op, as
users make them by mistake.

- ``empty_cycle_ended``: a schedule (wait 1, warm-up 1, active 2, repeating) over 21 iterations of an
  MLP, exported with ``export_chrome_trace`` after the loop. Each finished cycle's events went to
  ``on_trace_ready`` (none given) and were cleared; the loop ended in the next cycle's wait, so the
  file holds the profiler's last 0.1-0.3 ms and no op.
- ``empty_other_thread``: no schedule; the work (the same MLP, 20 calls) runs on a Python thread the
  program starts. torch.profiler records the thread that entered it: the capture runs for
  milliseconds and holds no op.

    python tests/data/cpu/make_empty_captures.py
Made with torch 2.13.0 (CPU build).
"""

import threading

import torch
from profiled import store
from torch.profiler import ProfilerActivity, profile, schedule

if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    x = torch.randn(32, 128)

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2)) as prof:
        for _ in range(21):
            model(x).sum().backward()
            prof.step()
    store(prof, "empty_cycle_ended")

    def work() -> None:
        for _ in range(20):
            model(x).sum().backward()

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    store(prof, "empty_other_thread")
