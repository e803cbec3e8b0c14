"""Writes tests/data/cpu/environment_loop.pt.trace.json.gz: a real torch.profiler capture (CPU, no
schedule, so no ProfilerStep marks; shapes recorded) of a reinforcement-learning style loop: each
iteration updates a small policy (32-64-4, Adam) inside record_function("train_step"), then waits 3 ms
in an environment's step (time.sleep, untraced), 8 iterations. The report read the whole capture: 87%
of it "framework dispatch" with torch.compile the remedy (no-dispatch predicted 88% saved), and advised
wrapping each iteration in record_function("train_step"), which the loop does (its calls are not taken
as steps: with the waits between them they cover a third of the loop's time).

    python tests/data/cpu/make_environment_loop.py
Made with torch 2.13.0 (CPU build).
"""

import time

import torch
from profiled import store
from torch.profiler import ProfilerActivity, profile, record_function


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.Adam(policy.parameters())
    observation = torch.randn(32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(8):
            with record_function("train_step"):
                logits = policy(observation)
                action = torch.distributions.Categorical(logits=logits).sample()
                optimizer.zero_grad()
                (-logits[action]).backward()
                optimizer.step()
            time.sleep(0.003)  # the environment's step: Python or C the profiler does not see
            observation = torch.randn(32)
    store(prof, "environment_loop")


if __name__ == "__main__":
    main()
