"""What-if predictions against the optimization really applied, on the collectors' variant pairs.

    python benchmarks/whatif_validation.py [--dir DIR] [--gpu-dir DIR ...] [--workloads DIR]

Each pair is the same LSTM (weights, shapes) written two ways; the scenario applied to the first
variant's trace predicts the second's step time:

    CPU: lstmcell_loop -> nn_lstm (fused-rnn), custom_eager -> custom_compile (fuse-elementwise, and
         compile-loop-body: the cell's step compiled alone, as custom_compile does), keras_eager ->
         keras_lstm (no-dispatch)
    GPU: custom_eager -> custom_compile_cudagraphs (cuda-graphs), nn_lstm -> nn_lstm_amp (amp),
         lstmcell_loop -> nn_lstm (fused-rnn), custom_eager -> custom_compile (fuse-elementwise)

and, on the CPU, an MLP's training loop (widths 512 and 1024, batch 16, shapes recorded) whose
optimizer updates one parameter at a time or with foreach, against the same loop with fused=True
(fused-optimizer): AdamW, AdamW foreach, SGD with momentum; and an MLP of 12 Linear-LayerNorm-GELU
blocks (128 and 256 wide) keeping an EMA of its weights a tensor at a time, against the EMA as one
torch._foreach_lerp_ (foreach-loops) (--no-optimizers: skip both).

Prediction for B = A's unprofiled step time x (scenario's replayed step / unchanged replay of A's
trace); measured = B's unprofiled step time; error = predicted / measured - 1 (goal: within +-25%).
Without --dir the CPU pairs are collected first (quick preset, real torch.profiler and TF profiler
runs, about a minute on 2 cores); --gpu-dir reads GPU collections (collectors/gpu_session.sh output).

--workloads reads tests/data/h200 (make_workloads.py): workloads other than LSTMs, each stored
beside a remedy applied to it (WORKLOAD_PAIRS), with both unprofiled times in times.jsonl. Their
rows add "prof.": the scenario's own step on the profiled trace against B's unprofiled time, the
figure to read where what the change leaves is GPU time (the profiler inflates the host only).

The unprofiled times of A and B are measured again, interleaved (a few A steps, a few B steps, ...
in one process, --rounds blocks of each, medians), for the CPU pairs: the collector times each variant on its
own, minutes apart, and on a shared 2-core machine the same variant's median moved by up to 1.7x
between two collections, which is noise in the error, not in the prediction. Both errors are
printed: "error" from the interleaved times, "sep." from the collector's separate ones.
GPU pairs are timed the same way where a GPU is present (each timed step ends in a synchronize; an
H100's LSTM steps are host-bound, and two collections minutes apart differed by up to 2.8x), and the
times are written to interleaved.jsonl in the collection directory; without a GPU, that file's times
are used when present, else the collector's (docs/results/h100/pairs holds an H100 collection).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BLOCK_STEPS = 3  # timed steps of one variant in a row, in interleaved timing
TIMES_FILE = "interleaved.jsonl"  # a GPU collection's interleaved times, written where a GPU timed them

# custom_compile compiles the cell's step and calls it once a timestep: compile-loop-body is the scenario
# of that practice (fuse-elementwise's, plus each compiled call's fixed cost); fuse-elementwise, the
# issue's pair, assumes the step compiled whole. Both rows are printed, timed once.
CPU_PAIRS = [("torch", "lstmcell_loop", "nn_lstm", "fused-rnn"), ("torch", "custom_eager", "custom_compile", "fuse-elementwise"),
             ("torch", "custom_eager", "custom_compile", "compile-loop-body"), ("tf", "keras_eager", "keras_lstm", "no-dispatch")]
GPU_PAIRS = [("torch", "custom_eager", "custom_compile_cudagraphs", "cuda-graphs"), ("torch", "nn_lstm", "nn_lstm_amp", "amp"),
             ("torch", "lstmcell_loop", "nn_lstm", "fused-rnn"), ("torch", "custom_eager", "custom_compile", "fuse-elementwise")]

# (label, torch.optim class, A's arguments, B's): the fused-optimizer scenario on A predicts B.
OPTIMIZER_PAIRS = [("adamw", "AdamW", {"foreach": False}, {"fused": True}),
                   ("adamw_foreach", "AdamW", {"foreach": True}, {"fused": True}),
                   ("sgd", "SGD", {"foreach": False, "momentum": 0.9}, {"fused": True, "momentum": 0.9})]
OPTIMIZER_WIDTHS = (512, 1024)
# (label, torch.optim class, A's arguments, B's): the foreach-loops scenario on A predicts B, an MLP of
# LOOP_BLOCKS Linear-LayerNorm-GELU blocks (128 and 256 wide, batch 32) whose loop keeps an EMA of its
# weights a tensor at a time (e.sub_((1 - d) * (e - p))) in A, as one torch._foreach_lerp_ in B.
LOOP_PAIRS = [("ema", "AdamW", {"ema": "per_tensor"}, {"ema": "foreach"})]
LOOP_BLOCKS, LOOP_WIDTHS = 12, (128, 256)

# (workload, the workload with a remedy applied, the scenario that predicts it); tests/data/h200.
WORKLOAD_PAIRS = [("tiny_ops", "tiny_ops_graphed", "cuda-graph-step"), ("tiny_ops", "tiny_ops_compiled", "fuse-elementwise"),
                  ("item_sync", "item_sync_nosync", "no-sync"), ("inductor_mlp", "inductor_mlp_graphed", "cuda-graph-step"),
                  ("transformer_train", "transformer_train_whole_graph", "cuda-graph-step"),
                  ("transformer_train", "transformer_train_graphed", "cuda-graph-step"),
                  ("jax_train", "jax_train_nonblocking", "no-sync"),
                  ("prefetch_serial", "prefetch_overlap", "overlap-copies"),
                  ("resnet50_b128_nchw", "resnet50_b128", "channels-last")]


def validate_workloads(directory: Path) -> list[dict]:
    from tracekit.analyze.whatif import whatif
    from tracekit.ingest import load

    times = {r["name"]: r for r in map(json.loads, (directory / "times.jsonl").read_text().splitlines())}
    results = []
    for a, b, scenario in WORKLOAD_PAIRS:
        w = whatif(load(next(directory.glob(f"{a}.*"))))
        found = {s.name: s for s in w.scenarios}.get(scenario)
        if found is None or a not in times or b not in times:
            continue
        ratio = found.predicted_step_ns / w.replayed_step_ns
        a_ns, b_ns = times[a]["step_ms_median"] * 1e6, times[b]["step_ms_median"] * 1e6
        # Also the scenario's step itself, on the profiled step: where what is left is GPU time, which
        # the profiler does not inflate, that is the figure to hold against the unprofiled B.
        results.append({"device": times[a]["device"], "pair": f"{a} -> {b}", "scenario": scenario, "shape": "-",
                        "a_ms": a_ns / 1e6, "predicted_ms": a_ns * ratio / 1e6, "measured_ms": b_ns / 1e6,
                        "error": a_ns * ratio / b_ns - 1, "separate_error": a_ns * ratio / b_ns - 1,
                        "replay_error": w.replayed_step_ns / w.measured_step_ns - 1,
                        "profiled_error": found.predicted_step_ns / b_ns - 1})
    return results


def optimizer_child(optimizer: str, a_kw: dict, b_kw: dict, width: int, trace: str, rounds: int,
                    blocks: int = 0) -> dict:
    """In this process: the MLP loop with A's and B's optimizer (same seed, two threads, as a user's
    loop runs), A captured under torch.profiler (shapes recorded, 6 marked steps), then both timed
    unprofiled, interleaved in blocks; medians. ``blocks``: the MLP is that many Linear-LayerNorm-GELU
    blocks and a head (batch 32), else three Linear layers (batch 16); an ``ema`` argument keeps an EMA
    of its weights after each step, "per_tensor" or "foreach"."""

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    def loop(kw: dict):
        torch.manual_seed(0)
        kw = dict(kw)
        ema = kw.pop("ema", None)
        if blocks:
            layers = [m for _ in range(blocks) for m in (torch.nn.Linear(width, width), torch.nn.LayerNorm(width),
                                                           torch.nn.GELU())]
            model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
        else:
            model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                                        torch.nn.ReLU(), torch.nn.Linear(width, 10))
        average = [p.detach().clone() for p in model.parameters()]
        opt = getattr(torch.optim, optimizer)(model.parameters(), lr=1e-3, **kw)
        x, y = torch.randn(32 if blocks else 16, width), torch.randint(0, 10, (32 if blocks else 16,))

        def step() -> None:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            with torch.no_grad():
                if ema == "per_tensor":
                    for e, p in zip(average, model.parameters(), strict=True):
                        e.sub_(0.001 * (e - p))
                elif ema == "foreach":
                    torch._foreach_lerp_(average, list(model.parameters()), 0.001)
        return step

    steps = [loop(a_kw), loop(b_kw)]
    for s in steps:
        for _ in range(3):
            s()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=6),
                 on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for _ in range(7):
            steps[0]()
            prof.step()
    samples: list[list[int]] = [[], []]
    for _ in range(rounds):
        for i, s in enumerate(steps):
            s()  # untimed, as in interleaved_child
            for _ in range(BLOCK_STEPS):
                t0 = time.perf_counter_ns()
                s()
                samples[i].append(time.perf_counter_ns() - t0)
    return {"a_ns": statistics.median(samples[0]), "b_ns": statistics.median(samples[1])}


def validate_optimizers(rounds: int, directory: Path) -> list[dict]:
    from tracekit.analyze.whatif import whatif
    from tracekit.ingest import load

    results = []
    # (label, optimizer, A's and B's arguments, width, blocks (0: the three-layer MLP), scenario, pair, shape)
    cases = [(label, optimizer, a_kw, b_kw, width, 0, "fused-optimizer", f"{label} -> fused", f"mlp w{width} b16")
             for label, optimizer, a_kw, b_kw in OPTIMIZER_PAIRS for width in OPTIMIZER_WIDTHS]
    cases += [(label, optimizer, a_kw, b_kw, width, LOOP_BLOCKS, "foreach-loops", f"{label} -> foreach",
               f"{LOOP_BLOCKS}x w{width} b32") for label, optimizer, a_kw, b_kw in LOOP_PAIRS for width in LOOP_WIDTHS]
    for label, optimizer, a_kw, b_kw, width, blocks, scenario, pair, shape in cases:
        trace = directory / f"{label}_{width}_{blocks}.pt.trace.json"
        out = subprocess.run([sys.executable, __file__, "--optimizer-child",
                              json.dumps([optimizer, a_kw, b_kw, width, str(trace), max(rounds, 3), blocks])],
                             check=True, capture_output=True, text=True)
        timed = json.loads(out.stdout.strip().splitlines()[-1])
        w = whatif(load(trace))
        found = {s.name: s for s in w.scenarios}.get(scenario)
        if found is None or not w.replayed_step_ns:
            continue
        predicted = timed["a_ns"] * found.predicted_step_ns / w.replayed_step_ns
        error = predicted / timed["b_ns"] - 1
        results.append({"device": "cpu", "pair": pair, "scenario": scenario, "shape": shape,
                        "a_ms": timed["a_ns"] / 1e6, "predicted_ms": predicted / 1e6,
                        "measured_ms": timed["b_ns"] / 1e6, "error": error, "separate_error": error,
                        "replay_error": w.replayed_step_ns / w.measured_step_ns - 1,
                        "uncertain": found.uncertain or found.upper_bound})
    return results


def collect(out: Path) -> None:
    for framework, variants in (("torch", "lstmcell_loop,nn_lstm,custom_eager,custom_compile"), ("tf", "keras_eager,keras_lstm")):
        subprocess.run([sys.executable, "-m", "tracekit", "collect", framework, "--variants", variants, "--preset", "quick",
                        "--device", "cpu", "-o", str(out / framework), "--no-progress"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def interleaved_child(framework: str, a: str, b: str, config: dict, rounds: int, device_name: str = "cpu") -> dict:
    """In this process: build A and B as the collector does (one thread, same seed), warm both up,
    then time them alternately in blocks (a step of one variant evicts the other's weights from
    the cache, which the collector's back-to-back steps never do: the first step of each block is
    not timed); medians of each variant's step times. On a GPU each timed step ends in a
    synchronize, so that its device work is counted."""
    sync = None
    if framework == "torch":
        import torch
        from tracekit.collectors.pytorch.workloads import build
        torch.set_num_threads(1)
        device = torch.device(device_name)
        workloads = [build(v, config, device) for v in (a, b)]
        if device.type == "cuda":
            sync = torch.cuda.synchronize
    else:
        import tensorflow as tf
        from tracekit.collectors.tflow.workloads import build as build_tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        workloads = [build_tf(v, config, False) for v in (a, b)]
    for w in workloads:
        for _ in range(3):
            w.step()
    samples: list[list[int]] = [[], []]
    for _ in range(rounds):
        for i, w in enumerate(workloads):
            w.step()  # untimed: the other variant's step just evicted this one's weights from cache
            for _ in range(BLOCK_STEPS):
                t0 = time.perf_counter_ns()
                w.step()
                if sync is not None:
                    sync()
                samples[i].append(time.perf_counter_ns() - t0)
    return {"a_ns": statistics.median(samples[0]), "b_ns": statistics.median(samples[1])}


def interleaved(framework: str, a: str, b: str, config: dict, rounds: int, device: str = "cpu") -> dict:
    """``interleaved_child`` in a fresh process (as each collector run is)."""
    out = subprocess.run([sys.executable, __file__, "--interleaved-child",
                          json.dumps([framework, a, b, config, rounds, device])], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gpu_here() -> bool:
    """Whether GPU collections can be timed again here (interleaved), not only read."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def validate(directory: Path, pairs: list[tuple[str, str, str, str]], rounds: int = 0) -> list[dict]:
    from tracekit.analyze.overhead import run_time_ns
    from tracekit.analyze.whatif import whatif
    from tracekit.ingest import load
    from tracekit.manifest import read_manifest

    results = []
    timed_once: dict[tuple[str, str, str, str], dict] = {}  # a pair listed with two scenarios is timed once
    stored_path = directory / TIMES_FILE
    stored = {(t["pair"], t["shape"]): t for t in map(json.loads, stored_path.read_text().splitlines())} \
        if stored_path.exists() else {}
    for manifest_dir in sorted({p.parent for p in directory.rglob("manifest.jsonl")}):
        m = read_manifest(manifest_dir)
        rows = [r for r in m.latest().values() if r["status"] == "ok" and r.get("profiler") in ("torch", "tf")]
        by = {(r["framework"], r["variant"], r["dtype"] if r["variant"] != "nn_lstm_amp" else "any",
               json.dumps(r["config"], sort_keys=True)): r for r in rows}
        for framework, a, b, scenario in pairs:
            for (fw, variant, _dtype, config), row in sorted(by.items()):
                if fw != framework or variant != a:
                    continue
                other = next((r for (f2, v2, _, c2), r in by.items() if f2 == fw and v2 == b and c2 == config), None)
                if other is None or not row.get("traces"):
                    continue
                w = whatif(load(m.trace_paths(row)[0]))
                found = {s.name: s for s in w.scenarios}.get(scenario)
                a_ns, b_ns = run_time_ns(row), run_time_ns(other)
                if found is None or not a_ns or not b_ns or not w.replayed_step_ns:
                    continue
                ratio = found.predicted_step_ns / w.replayed_step_ns
                separate_error = a_ns * ratio / b_ns - 1
                c = json.loads(config)
                pair, shape = f"{a} -> {b}", f"h{c['hidden']} b{c['batch']} t{c['timesteps']}"
                if rounds and (row["device"] == "cpu" or _gpu_here()):
                    key = (framework, a, b, config)
                    timed = timed_once[key] = timed_once.get(key) or interleaved(framework, a, b, c, rounds, row["device"])
                    a_ns, b_ns = timed["a_ns"], timed["b_ns"]
                    if row["device"] != "cpu":  # kept beside the collection: re-run the rows without a GPU
                        stored[(pair, shape)] = {"pair": pair, "shape": shape, "device": row["device"],
                                                 "rounds": rounds, **timed}
                        stored_path.write_text("".join(json.dumps(t) + "\n" for t in stored.values()))
                elif row["device"] != "cpu" and (pair, shape) in stored:
                    a_ns, b_ns = stored[(pair, shape)]["a_ns"], stored[(pair, shape)]["b_ns"]
                predicted = a_ns * ratio
                results.append({"device": row["device"], "pair": pair, "scenario": scenario,
                                "shape": shape, "a_ms": a_ns / 1e6,
                                "predicted_ms": predicted / 1e6, "measured_ms": b_ns / 1e6,
                                "error": predicted / b_ns - 1, "separate_error": separate_error,
                                "replay_error": w.replayed_step_ns / w.measured_step_ns - 1,
                                "uncertain": found.uncertain or found.upper_bound})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="CPU collections to reuse (torch/ and tf/ under it)")
    parser.add_argument("--gpu-dir", type=Path, action="append", default=[], help="GPU collection directory")
    parser.add_argument("--workloads", type=Path, help="workloads with remedies applied (tests/data/h200)")
    parser.add_argument("--rounds", type=int, default=7,
                        help="interleaved A/B blocks each for the CPU pairs' times (0: the collector's own times)")
    parser.add_argument("--no-optimizers", action="store_true", help="skip the optimizer and EMA pairs")
    parser.add_argument("--interleaved-child", help=argparse.SUPPRESS)
    parser.add_argument("--optimizer-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.interleaved_child:
        print(json.dumps(interleaved_child(*json.loads(args.interleaved_child))))
        return 0
    if args.optimizer_child:
        print(json.dumps(optimizer_child(*json.loads(args.optimizer_child))))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        cpu_dir = args.dir or Path(tmp)
        if args.dir is None:
            collect(cpu_dir)
        results = validate(cpu_dir, CPU_PAIRS, args.rounds)
        for gpu_dir in args.gpu_dir:
            results += validate(gpu_dir, GPU_PAIRS, args.rounds)
        if args.workloads:
            results += validate_workloads(args.workloads)
        if not args.no_optimizers:
            results += validate_optimizers(args.rounds, Path(tmp))
    print(f"{'device':<6} {'pair':<40} {'scenario':<17} {'shape':<14} {'A ms':>8} {'pred ms':>8} {'meas ms':>8} "
          f"{'error':>7} {'sep.':>7} {'replay':>7} {'prof.':>7}")
    for r in results:
        print(f"{r['device']:<6} {r['pair']:<40} {r['scenario']:<17} {r['shape']:<14} {r['a_ms']:>8.3f} "
              f"{r['predicted_ms']:>8.3f} {r['measured_ms']:>8.3f} {r['error']:>+7.0%} {r['separate_error']:>+7.0%} "
              f"{r['replay_error']:>+7.1%}" + (f" {r['profiled_error']:>+7.0%}" if "profiled_error" in r else "")
              + ("  (flagged uncertain)" if r.get("uncertain") else ""))
    within = sum(abs(r["error"]) <= 0.25 for r in results)
    print(f"\n{within} of {len(results)} predictions within +-25% of the measured step time")
    stated = [r for r in results if not r.get("uncertain")]
    if len(stated) < len(results):
        print(f"{sum(abs(r['error']) <= 0.25 for r in stated)} of the {len(stated)} not flagged uncertain or an upper bound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
