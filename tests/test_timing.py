"""Unprofiled step timing: a preset's few repeats are a floor; short steps are timed until
``min_time_s`` of calls is sampled, so their median is not one noisy call."""

from __future__ import annotations

import time

from tracekit.collectors.timing import MAX_SAMPLES, time_steps


def _sleeper(seconds: float, calls: list[float]):
    def step() -> None:
        t0 = time.perf_counter()
        time.sleep(seconds)
        calls.append(time.perf_counter() - t0)
    return step


def test_repeats_alone_when_no_minimum_time():
    calls: list[float] = []
    timing = time_steps(_sleeper(0.001, calls), repeats=3)
    assert len(calls) == timing["wall_ns"]["n"] == 3 and timing["min_time_s"] == 0.0


def test_short_steps_are_timed_until_the_minimum_time_is_sampled():
    calls: list[float] = []
    timing = time_steps(_sleeper(0.001, calls), repeats=3, min_time_s=0.05)
    assert timing["wall_ns"]["n"] == len(calls) > 3
    assert sum(calls) < 0.05 + max(calls)  # it stopped at the first call past the minimum
    assert timing["wall_ns"]["median"] >= 1e6  # each sample is a whole sleeping step


def test_long_steps_keep_the_preset_repeats():
    calls: list[float] = []
    timing = time_steps(_sleeper(0.03, calls), repeats=3, min_time_s=0.05)
    assert timing["wall_ns"]["n"] == 3  # three 30 ms calls already pass 50 ms


def test_samples_are_capped():
    timing = time_steps(lambda: None, repeats=1, min_time_s=3600)
    assert timing["wall_ns"]["n"] == MAX_SAMPLES
