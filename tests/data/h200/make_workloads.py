"""Writes tests/data/h200: real GPU workloads beside LSTMs, each captured with its framework's own
profiler, and each optimization's variant beside the workload it changes (the measured effect of a
remedy, for checking `tracekit whatif`'s predictions; docs/results/h200/README.md).

    python tests/data/h200/make_workloads.py OUTDIR [--device cuda|cpu] [--only NAME,...]

Each workload writes OUTDIR/NAME.pt.trace.json.gz (torch.profiler: one step to warm up, four active
with prof.step()) or OUTDIR/NAME.xplane.pb (jax.profiler, steps marked with StepTraceAnnotation), and
one JSON line to OUTDIR/times.jsonl: the median of 10 unprofiled steps after 3 warm-up steps. A
failing workload prints one line and the others go on. tests/data/h200/make_on_gpu.sh runs it in one
call of a lent GPU machine (device tool); the stored files came from an H200 on 2026-11-27 (PyTorch
2.11.0+cu130, JAX 0.11.2, transformers 5.17, torchvision 0.26). With --device cpu it runs here, for checking
the script (gpt2_* need transformers, resnet50_train torchvision, jax_* jax: none is a tracekit dependency).
"""

import argparse
import glob
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path


def torch_capture(name, out, device, step, steps=4, options=None):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):  # warm up (compiles, cuDNN/cuBLAS heuristics, allocator)
        step()
    sync()
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with tempfile.TemporaryDirectory() as tmp:
        with profile(activities=acts, schedule=schedule(wait=0, warmup=1, active=steps), **(options or {}),
                     on_trace_ready=torch.profiler.tensorboard_trace_handler(tmp, use_gzip=True)) as prof:
            for _ in range(1 + steps):
                step()
                prof.step()
        sync()
        src = glob.glob(f"{tmp}/*.pt.trace.json.gz")[0]
        shutil.copy(src, out / f"{name}.pt.trace.json.gz")
    times.sort()
    return {"name": name, "step_ms_median": 1e3 * times[len(times) // 2]}


def transformer_train(device, compile_mode=None):
    """A 4-layer encoder trained with bf16 autocast, SDPA attention and fused AdamW (the model under
    torch.compile with ``compile_mode``: "default" or "reduce-overhead"; the optimizer stays eager)."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), nn.Linear(512, 512)).to(device)
    if compile_mode:  # (nn.Module.compile() left the model eager in torch 2.11 and 2.13: no Dynamo frame ran)
        model = torch.compile(model, mode=compile_mode)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    x = torch.randn(16, 256, 512, device=device)
    dtype = torch.bfloat16

    def step():
        with torch.autocast(device, dtype=dtype):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def inductor_mlp(device, compile_mode=None):
    """A training step of an MLP under torch.compile (Inductor: Triton kernels on the GPU)."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.LayerNorm(4096), nn.Linear(4096, 1024)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=device)

    @torch.compile(mode=compile_mode)
    def fwd_bwd():
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    def step():
        fwd_bwd()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def _micro_batches(device):
    """A small classifier, its optimizer and 8 micro-batches (item_sync and item_sync_nosync)."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xs = [torch.randn(64, 256, device=device) for _ in range(8)]
    ys = [torch.randint(0, 10, (64,), device=device) for _ in range(8)]
    return model, opt, xs, ys


def item_sync(device):
    """A small training step that reads its loss with .item() after every micro-batch."""
    from torch import nn
    model, opt, xs, ys = _micro_batches(device)

    def step():
        total = 0.0
        for x, y in zip(xs, ys, strict=True):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            total += loss.item()  # a device-to-host copy and a wait per micro-batch
        return total
    return step


def slow_loader(device):
    """A GPU model fed by a DataLoader whose samples take 1 ms each to make (batch 16, 2 workers)."""
    import torch
    from torch import nn
    torch.manual_seed(0)

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 10_000

        def __getitem__(self, i):
            time.sleep(0.001)
            return torch.randn(512), i % 10

    loader = iter(torch.utils.data.DataLoader(Slow(), batch_size=16, num_workers=2))
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        x, y = next(loader)
        loss = nn.functional.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def tiny_ops(device):
    """Eager elementwise work on small tensors: hundreds of microsecond-scale kernels per step."""
    import torch
    torch.manual_seed(0)
    params = [torch.randn(128, 128, device=device) for _ in range(50)]

    def step():
        for p in params:
            p.mul_(0.999).add_(0.001).clamp_(-3, 3)
            torch.tanh(p, out=p)
    return step


def sync_each_op(device):
    """20 matrix products of 2048x2048 a step, each followed by torch.cuda.synchronize()."""
    import torch
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device=device)
    b = torch.randn(2048, 2048, device=device)

    def step():
        for _ in range(20):
            torch.mm(a, b)
            if device == "cuda":
                torch.cuda.synchronize()
    return step


def pageable_copy(device):
    """A 64 MB batch copied each step from pageable host memory, then one small matrix product."""
    import torch
    torch.manual_seed(0)
    batch = torch.randn(4096, 4096)  # not pinned: the copy is staged and blocks the host
    w = torch.randn(4096, 64, device=device)

    def step():
        x = batch.to(device)
        return x[:256] @ w
    return step


def gpt2_train(device):
    """A 4-layer GPT-2 (Hugging Face transformers, built from its config: no download) trained with
    bf16 autocast and fused AdamW, batch 8 of 256 tokens."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=256, bos_token_id=1, eos_token_id=1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    ids = torch.randint(0, 8192, (8, 256), device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def gpt2_generate(device):
    """Greedy decoding of 16 tokens with a 2-layer GPT-2 (Hugging Face generate, KV cache), batch 1:
    each token is a forward pass of small kernels."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=512, n_head=8, vocab_size=8192, n_positions=256, bos_token_id=1,
                                         eos_token_id=1))
    model = model.to(device).eval()
    prompt = torch.randint(0, 8192, (1, 32), device=device)

    @torch.no_grad()
    def step():
        model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, min_new_tokens=16,
                       do_sample=False, pad_token_id=0)
    return step


def resnet50_train(device, channels_last=True, batch=32):
    """torchvision's ResNet-50 trained with bf16 autocast in channels_last (or NCHW) at 224x224."""
    import torch
    import torchvision
    torch.manual_seed(0)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    model = torchvision.models.resnet50().to(device).to(memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=layout)
    y = torch.randint(0, 1000, (batch,), device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def fp8_mlp(device, fp8=True):
    """Inference through 4 layers of 4096x4096 weights at batch 2048, each layer's input quantized to
    e4m3 with a per-tensor scale and multiplied by e4m3 weights with torch._scaled_mm, bf16 out (the
    dynamic float8 recipe, without a library); fp8=False or a CPU: the same layers in bf16."""
    import torch
    torch.manual_seed(0)
    weights = [torch.randn(4096, 4096, device=device) * 0.02 for _ in range(4)]
    x0 = torch.randn(2048, 4096, device=device)
    if not fp8 or device != "cuda":
        w16 = [w.to(torch.bfloat16) for w in weights]

        @torch.no_grad()
        def step():
            x = x0.to(torch.bfloat16)
            for w in w16:
                x = torch.relu(x @ w.t())
            return x
        return step
    f8 = torch.float8_e4m3fn
    f8_max = torch.finfo(f8).max

    def quantize(t):
        scale = t.abs().max().float().clamp(min=1e-12) / f8_max
        return (t / scale).to(f8), scale
    w8 = [quantize(w) for w in weights]  # (N, K) row-major: .t() is the column-major K x N _scaled_mm takes

    @torch.no_grad()
    def step():
        x = x0.to(torch.bfloat16)
        for w, w_scale in w8:
            x8, x_scale = quantize(x)
            x = torch.relu(torch._scaled_mm(x8, w.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=torch.bfloat16))
        return x
    return step


def prefetch_serial(device, overlap=False):
    """A training step of an MLP on a 32 MB batch copied each step from pinned host memory with
    non_blocking=True on the compute stream, so the copy and the step's kernels take turns; with
    overlap (prefetch_overlap) the next batch is copied on a side stream while this step computes."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    cuda = device == "cuda"
    batches = [torch.randn(2048, 4096) for _ in range(2)]
    batches = [b.pin_memory() for b in batches] if cuda else batches
    model = nn.Sequential(nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    copy_stream = torch.cuda.Stream() if overlap and cuda else None
    state = {"i": 0, "next": None}

    def load(i):
        return batches[i % 2].to(device, non_blocking=True)

    def train(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def step():
        i = state["i"]
        if copy_stream is None:
            train(load(i))
        else:
            x = state["next"]
            if x is None:
                with torch.cuda.stream(copy_stream):
                    x = load(i)
            torch.cuda.current_stream().wait_stream(copy_stream)
            x.record_stream(torch.cuda.current_stream())
            with torch.cuda.stream(copy_stream):
                state["next"] = load(i + 1)
            train(x)
        state["i"] = i + 1
    return step


def resnet50_train_nchw(device):
    """resnet50_train in the default NCHW memory format: cuDNN's fastest convolutions take NHWC, so it
    converts layouts around them."""
    return resnet50_train(device, channels_last=False)


def resnet50_b128_nchw(device):
    """resnet50_train_nchw at batch 128: enough GPU work a step for the GPU, not dispatch, to pace it."""
    return resnet50_train(device, channels_last=False, batch=128)


# The remedies applied: each pairs with a workload above, on the same shapes, to check what whatif
# predicted against what the change really gives.
def transformer_train_compiled(device):
    return transformer_train(device, "default")


def transformer_train_graphed(device):
    return transformer_train(device, "reduce-overhead")


def inductor_mlp_graphed(device):
    return inductor_mlp(device, "reduce-overhead")


def transformer_train_whole_graph(device):
    """transformer_train captured whole in one CUDA graph: forward, backward and the optimizer step
    (torch.cuda.graph's whole-network recipe: static input, capturable fused AdamW, warm-up on a side
    stream, gradients kept between replays)."""
    import torch
    from torch import nn
    if device != "cuda":
        return transformer_train(device)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), nn.Linear(512, 512)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True, capturable=True)
    x = torch.randn(16, 256, 512, device=device)

    def body():
        with torch.autocast(device, dtype=torch.bfloat16, cache_enabled=False):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()
    return graph.replay


def tiny_ops_compiled(device):
    """tiny_ops under torch.compile: each parameter's four elementwise ops become one kernel."""
    import torch
    return torch.compile(tiny_ops(device))


def tiny_ops_graphed(device):
    """tiny_ops captured whole in one CUDA graph (torch.cuda.graph) and replayed."""
    import torch
    step = tiny_ops(device)
    if device != "cuda":
        return step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream before capture, as torch.cuda.graph asks
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def item_sync_nosync(device):
    """item_sync with the losses summed on the device and read once per step."""
    import torch
    from torch import nn
    model, opt, xs, ys = _micro_batches(device)

    def step():
        total = torch.zeros((), device=device)
        for x, y in zip(xs, ys, strict=True):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            total += loss.detach()
        return total.item()
    return step


def resnet50_b128(device):
    """resnet50_b128_nchw in channels_last (the layout remedy)."""
    return resnet50_train(device, batch=128)


def fp8_mlp_bf16(device):
    return fp8_mlp(device, fp8=False)


def prefetch_overlap(device):
    return prefetch_serial(device, overlap=True)


def item_sync_stack(device):
    """item_sync, profiled with Python stacks, tensor shapes and memory events (PROFILE_OPTIONS): the
    same workload, so the same verdict, from a trace several times larger."""
    return item_sync(device)


def _small_profile():
    """jax.profiler's options without the HLO protos (2.1 MB for the scan LSTM on a GPU; tracekit reads
    none of them)."""
    import jax
    options = jax.profiler.ProfileOptions()
    options.enable_hlo_proto = False
    return options


def jax_train(out, device, block_each_step=True):
    """A jitted MLP training step in JAX, 5 steps marked with StepTraceAnnotation. With
    block_each_step the loop waits for every step's result (block_until_ready); without, it waits
    once after the steps (each timed step: the mean over 10 dispatched back to back)."""
    import jax
    import jax.numpy as jnp
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (1024, 4096)) * 0.02, "w2": jax.random.normal(k2, (4096, 1024)) * 0.02}
    x = jax.random.normal(k3, (512, 1024))

    def loss_fn(p, x):
        h = jax.nn.gelu(x @ p["w1"])
        return jnp.mean((h @ p["w2"]) ** 2)

    @jax.jit
    def step(p, x):
        grads = jax.grad(loss_fn)(p, x)
        return jax.tree_util.tree_map(lambda w, g: w - 1e-3 * g, p, grads)

    def run(params, steps, marked=False):
        for i in range(steps):
            if marked:
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    params = step(params, x)
                    if block_each_step:
                        params = jax.block_until_ready(params)
            else:
                params = step(params, x)
                if block_each_step:
                    params = jax.block_until_ready(params)
        return jax.block_until_ready(params)

    params = run(params, 1)
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        params = run(params, 10)
        times.append((time.perf_counter() - t0) / 10)
    name = "jax_train" if block_each_step else "jax_train_nonblocking"
    with tempfile.TemporaryDirectory() as tmp:
        jax.profiler.start_trace(tmp, profiler_options=_small_profile())
        params = run(params, 5, marked=True)
        jax.profiler.stop_trace()
        src = glob.glob(f"{tmp}/**/*.xplane.pb", recursive=True)[0]
        shutil.copy(src, out / f"{name}.xplane.pb")
    times.sort()
    return {"name": name, "step_ms_median": 1e3 * times[len(times) // 2], "backend": jax.default_backend()}


def jax_train_nonblocking(out, device):
    return jax_train(out, device, block_each_step=False)


def jax_scan_lstm(out, device, unroll=1):
    """An LSTM over 10 timesteps as one lax.scan under jax.jit (XLA's while loop on the GPU)."""
    import jax
    import jax.numpy as jnp
    h, b, t = 256, 64, 10
    key = jax.random.PRNGKey(0)
    kw, ku, kx = jax.random.split(key, 3)
    W, U = jax.random.normal(kw, (h, 4 * h)) * 0.05, jax.random.normal(ku, (h, 4 * h)) * 0.05
    xs = jax.random.normal(kx, (t, b, h))

    @jax.jit
    def lstm(xs):
        def cell(carry, x):
            hh, c = carry
            i, f, g, o = jnp.split(x @ W + hh @ U, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            hh = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (hh, c), hh
        zeros = jnp.zeros((b, h))
        return jax.lax.scan(cell, (zeros, zeros), xs, unroll=unroll)[1]

    jax.block_until_ready(lstm(xs))
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        jax.block_until_ready(lstm(xs))
        times.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as tmp:
        jax.profiler.start_trace(tmp, profiler_options=_small_profile())
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                jax.block_until_ready(lstm(xs))
        jax.profiler.stop_trace()
        src = glob.glob(f"{tmp}/**/*.xplane.pb", recursive=True)[0]
        name = "jax_scan_lstm" if unroll == 1 else f"jax_scan_lstm_unroll{unroll}"
        shutil.copy(src, out / f"{name}.xplane.pb")
    times.sort()
    return {"name": name, "step_ms_median": 1e3 * times[len(times) // 2]}


def jax_scan_lstm_unroll5(out, device):
    return jax_scan_lstm(out, device, unroll=5)


TORCH = {"transformer_train": transformer_train, "inductor_mlp": inductor_mlp, "item_sync": item_sync,
         "slow_loader": slow_loader, "tiny_ops": tiny_ops, "transformer_train_compiled": transformer_train_compiled,
         "transformer_train_graphed": transformer_train_graphed, "tiny_ops_compiled": tiny_ops_compiled,
         "item_sync_nosync": item_sync_nosync, "inductor_mlp_graphed": inductor_mlp_graphed,
         "tiny_ops_graphed": tiny_ops_graphed, "sync_each_op": sync_each_op, "pageable_copy": pageable_copy,
         "transformer_train_whole_graph": transformer_train_whole_graph, "gpt2_train": gpt2_train,
         "gpt2_generate": gpt2_generate, "resnet50_train": resnet50_train, "fp8_mlp": fp8_mlp,
         "fp8_mlp_bf16": fp8_mlp_bf16, "prefetch_serial": prefetch_serial, "prefetch_overlap": prefetch_overlap,
         "resnet50_train_nchw": resnet50_train_nchw, "item_sync_stack": item_sync_stack,
         "resnet50_b128_nchw": resnet50_b128_nchw, "resnet50_b128": resnet50_b128}
# torch.profiler options beyond the activities, per workload
PROFILE_OPTIONS = {"item_sync_stack": {"with_stack": True, "record_shapes": True, "profile_memory": True}}
JAX = {"jax_train": jax_train, "jax_train_nonblocking": jax_train_nonblocking, "jax_scan_lstm": jax_scan_lstm, "jax_scan_lstm_unroll5": jax_scan_lstm_unroll5}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else [*TORCH, *JAX]
    with open(args.out / "times.jsonl", "a") as times:
        for name in names:
            t0 = time.perf_counter()
            try:
                if name in TORCH:
                    steps = 2 if name == "gpt2_generate" else 4  # each generate call is 16 forward passes
                    row = torch_capture(name, args.out, args.device, TORCH[name](args.device), steps,
                                        PROFILE_OPTIONS.get(name))
                else:
                    row = JAX[name](args.out, args.device)
                row["device"] = args.device
                times.write(json.dumps(row) + "\n")
                times.flush()
                print(f"{name}: ok in {time.perf_counter() - t0:.1f}s {row}", flush=True)
            except Exception as e:  # one workload's failure must not stop the others
                print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
                traceback.print_exc(limit=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
