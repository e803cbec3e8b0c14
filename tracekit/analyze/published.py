"""The published LSTM findings set beside what this machine measured.

Each finding says what a study measured, the figure it reported, what tracekit measured here for
the same comparison, and whether the two agree in direction, with the ratio. Where the finding
needs hardware this machine lacks (the GPU findings on a CPU-only machine), the row says so and
gives the closest CPU measurement as an analogue, marked as not comparable, rather than a gap.

Inputs: manifest rows (for unprofiled times) and breakdowns of traced runs keyed by run_id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracekit.analyze.breakdown import Breakdown
from tracekit.analyze.overhead import run_time_ns


@dataclass
class Finding:
    """One published figure and its measurement here.

    comparable: the measurement is the same comparison on the same kind of hardware.
    agrees: for comparable rows, whether the measured direction matches the published one
        (None when there is nothing to compare).
    """

    key: str
    study: str
    claim: str
    published: str
    measured: str
    comparable: bool
    agrees: bool | None
    note: str = ""


Rows = Sequence[Mapping[str, Any]]


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _times(rows: Rows, name: str, device: str) -> dict[tuple, float]:
    """(dtype, shape) -> unprofiled time of framework/variant ``name`` on ``device``: a comparison
    pairs runs of the same dtype (native fp16 is not nn.LSTM fp32's baseline)."""
    framework, variant = name.split("/")
    out: dict[tuple, float] = {}
    for row in rows:
        if (row.get("status") == "ok" and row["framework"] == framework and row["variant"] == variant
                and row["device"] == device):
            t = run_time_ns(row)
            if t:
                out.setdefault((row.get("dtype"), *sorted(row["config"].items())), t)
    return out


def _ratio(rows: Rows, slow: str, fast: str, device: str) -> tuple[float, int] | None:
    """Geometric-mean time ratio slow/fast over the shapes both ran."""
    a, b = _times(rows, slow, device), _times(rows, fast, device)
    common = sorted(set(a) & set(b))
    if not common:
        return None
    return _geomean([a[c] / b[c] for c in common]), len(common)


def findings(rows: Rows, breakdowns: Mapping[str, Breakdown], device: str, lm_is_paper_size: bool) -> list[Finding]:
    """Every published finding against this machine's runs on ``device`` (module doc)."""
    gpu = device == "cuda"
    return [_pytorch_vs_native(rows, gpu), _tf_launch_share(rows, breakdowns, gpu), *_lm_forward(rows, lm_is_paper_size),
            _cudnn_vs_cell(rows, gpu), _gemm_share(rows, breakdowns, gpu), *_jit_speedup(rows, gpu)]


def _pytorch_vs_native(rows: Rows, gpu: bool) -> Finding:
    claim = "PyTorch nn.LSTM is slower than the native cuDNN LSTM"
    published = "1.53x (PyTorch ~53% slower)"
    native = "native/cudnn_lstm" if gpu else "native/cpu_blas"
    r = _ratio(rows, "torch/nn_lstm", native, "cuda" if gpu else "cpu")
    measured = f"{r[0]:.2f}x nn.LSTM / {native} over {r[1]} config(s)" if r else "not measured (no matching runs)"
    if gpu:
        return Finding("pytorch_vs_native", "UCLA LSTM study", claim, published, measured, r is not None,
                       (r[0] > 1) if r else None)
    return Finding("pytorch_vs_native", "UCLA LSTM study", claim, published, f"CPU analogue: {measured}", False, None,
                   "needs a GPU (cuDNN); on CPU nn.LSTM runs oneDNN's fused kernel against a BLAS loop")


def _share(bd: Breakdown, gpu: bool) -> tuple[float, str]:
    if gpu and len(bd.host):
        host = bd.host[bd.host.step == -1].iloc[0]
        span = float(bd.gpu[bd.gpu.step == -1].span_ns.max()) if len(bd.gpu) else 0.0
        return (float(host["launch_ns"]) / span if span else 0.0), "host time in kernel launch calls"
    ops = bd.cpu_ops[bd.cpu_ops.step == -1].iloc[0]
    return (float(ops["dispatch_ns"]) / float(ops["span_ns"]) if ops["span_ns"] else 0.0), \
        "step time outside compute ops (dispatch)"


def _traced(rows: Rows, breakdowns: Mapping[str, Breakdown], framework: str, variant: str) -> list[Breakdown]:
    return [breakdowns[r["run_id"]] for r in rows if r["framework"] == framework and r["variant"] == variant
            and r["run_id"] in breakdowns]


def _tf_launch_share(rows: Rows, breakdowns: Mapping[str, Breakdown], gpu: bool) -> Finding:
    claim = "TensorFlow's non-cuDNN LSTM modes spend most sampled time launching kernels"
    shares, what = [], ""
    for variant in ("keras_impl1", "keras_impl2"):
        for bd in _traced(rows, breakdowns, "tf", variant):
            share, what = _share(bd, gpu)
            shares.append(share)
    measured = f"{100 * sum(shares) / len(shares):.0f}% {what} (mean of {len(shares)} traces)" if shares else "not measured"
    if gpu:
        return Finding("tf_launch_share", "TF LSTM modes study", claim, "~72% in kernel launch", measured, bool(shares),
                       (sum(shares) / len(shares) > 0.5) if shares else None)
    return Finding("tf_launch_share", "TF LSTM modes study", claim, "~72% in kernel launch", f"CPU analogue: {measured}",
                   False, None, "kernel launches need a GPU; on CPU the analogue is framework dispatch between ops")


LM_PUBLISHED = {"tf/lm_forward_eager": ("TF eager", 0.596), "tf/lm_forward": ("TF graph", 0.218),
                "torch/lm_forward": ("PyTorch", 0.348), "torch/lm_forward_script": ("PyTorch JIT", 0.260)}


def _lm_forward(rows: Rows, paper_size: bool) -> list[Finding]:
    """The study timed the language model on CPU: only CPU runs count (a GPU study leaves these unmeasured)."""
    out = []
    measured: dict[str, float] = {}
    for name in LM_PUBLISHED:
        times = _times(rows, name, "cpu")
        if times:
            measured[name] = next(iter(times.values())) / 1e9
    published_order = sorted(LM_PUBLISHED, key=lambda n: LM_PUBLISHED[n][1])
    measured_order = sorted(measured, key=lambda n: measured[n])
    for name, (label, seconds) in LM_PUBLISHED.items():
        if name not in measured:
            out.append(Finding(f"lm_forward:{name}", "TF/PyTorch/Julia comparison", f"LM forward per batch, {label} (CPU)",
                               f"{seconds:.3f} s", "not measured", False, None))
            continue
        rank_p, rank_m = published_order.index(name) + 1, measured_order.index(name) + 1
        text = f"{measured[name]:.3f} s ({measured[name] / seconds:.2f}x the published time; rank {rank_m} of {len(measured)})"
        comparable = paper_size
        out.append(Finding(f"lm_forward:{name}", "TF/PyTorch/Julia comparison", f"LM forward per batch, {label} (CPU)",
                           f"{seconds:.3f} s (rank {rank_p} of 4)", text, comparable,
                           (rank_m == rank_p) if comparable and len(measured) == 4 else None,
                           "" if paper_size else "this preset's language model is smaller than the study's"))
    return out


def _cudnn_vs_cell(rows: Rows, gpu: bool) -> Finding:
    claim = "the fused cuDNN LSTM is faster than an LSTMCell loop"
    r = _ratio(rows, "torch/lstmcell_loop", "torch/nn_lstm", "cuda" if gpu else "cpu")
    measured = f"{r[0]:.2f}x LSTMCell loop / nn.LSTM over {r[1]} config(s)" if r else "not measured"
    if gpu:
        return Finding("cudnn_vs_cell", "Dai et al.", claim, "2.7-4.1x", measured, r is not None, (r[0] > 1) if r else None)
    return Finding("cudnn_vs_cell", "Dai et al.", claim, "2.7-4.1x", f"CPU analogue: {measured}", False, None,
                   "cuDNN needs a GPU; on CPU nn.LSTM is oneDNN's fused kernel")


def _gemm_share(rows: Rows, breakdowns: Mapping[str, Breakdown], gpu: bool) -> Finding:
    claim = "GEMM dominates cuDNN LSTM kernel time"
    if gpu:
        # The claim is about cuDNN's standard algorithm (a GEMM and a cell kernel per timestep); its
        # persistent kernel (PyTorch picks it up to hidden 192) does the GEMMs inside one RNN kernel,
        # so those traces would only dilute the share. Told apart by RNN kernels per step.
        shares, persistent = [], 0
        for bd in _traced(rows, breakdowns, "torch", "nn_lstm"):
            whole = bd.gpu[bd.gpu.step == -1].sum(numeric_only=True)
            if not whole.get("busy_ns"):
                continue
            rnn = bd.gpu_classes[(bd.gpu_classes.view == "kernel") & (bd.gpu_classes["class"] == "rnn")]["count"].sum()
            if rnn / max(len(bd.steps), 1) <= 1:
                persistent += 1
                continue
            shares.append(float(whole["gemm_ns"]) / float(whole["busy_ns"]))
        measured = (f"{100 * sum(shares) / len(shares):.0f}% of nn.LSTM kernel time in GEMM kernels "
                    f"({len(shares)} trace(s) with per-timestep kernels)" if shares else "not measured")
        note = (f"{persistent} trace(s) ran cuDNN's persistent kernel, which does its GEMMs inside one RNN kernel: "
                "left out" if persistent else "")
        return Finding("gemm_share", "EcoRNN", claim, "> 85%", measured, bool(shares),
                       (sum(shares) / len(shares) > 0.5) if shares else None, note)
    shares = []
    for bd in _traced(rows, breakdowns, "torch", "custom_eager"):
        ops = bd.cpu_ops[bd.cpu_ops.step == -1].iloc[0]
        if ops["compute_ns"]:
            shares.append(float(ops["gemm_ns"]) / float(ops["compute_ns"]))
    measured = (f"CPU analogue: {100 * sum(shares) / len(shares):.0f}% of the fine-grained LSTM's compute-op time "
                f"in GEMM ops" if shares else "not measured")
    return Finding("gemm_share", "EcoRNN", claim, "> 85%", measured, False, None,
                   "needs a GPU trace of cuDNN; oneDNN's CPU LSTM is one opaque op")


def _jit_speedup(rows: Rows, gpu: bool) -> list[Finding]:
    out = []
    device = "cuda" if gpu else "cpu"
    for fused, label in (("torch/custom_script", "TorchScript"), ("torch/custom_compile", "torch.compile")):
        r = _ratio(rows, "torch/custom_eager", fused, device)
        measured = f"{r[0]:.2f}x eager / {label} over {r[1]} config(s)" if r else "not measured"
        note = "" if gpu else ("TorchScript fuses nothing in CPU builds (no NNC/LLVM)" if label == "TorchScript" else
                               "on CPU Inductor fuses the pointwise ops but the GEMMs dominate")
        out.append(Finding(f"jit_speedup:{label}", "LSTM framework studies", f"a fused JIT LSTM ({label}) beats op-by-op eager",
                           "2-5x", measured if gpu else f"CPU: {measured}", gpu and r is not None,
                           (r[0] > 1) if gpu and r else None, note))
    return out
