"""Writes tests/data/cpu/parameter_loop_diffusers_ema.pt.trace.json.gz: a real torch.profiler capture
(CPU, two threads, shapes recorded) of a training step as diffusers' training scripts write it, on a
Hugging Face GPT-2 (4 layers, 256 wide, vocabulary 5,000: 52 tensors, 4.7M parameters, random weights)
over 4 sequences of 64 tokens: loss, backward, ``clip_grad_norm_`` (foreach, its default), AdamW,
and diffusers' ``EMAModel.step`` with its default ``foreach=False`` (a tensor at a time:
``s_param.sub_(one_minus_decay * (s_param - param))``). 3 steps marked.

Then the EMA alone timed (medians of interleaved rounds of 10 calls): EMAModel(foreach=False),
EMAModel(foreach=True) (``_foreach_sub`` into a temporary, then ``_foreach_sub_``) and one
``torch._foreach_lerp_`` over the lists.

    python tests/data/cpu/make_diffusers_ema.py   # needs diffusers and transformers, not tracekit dependencies
Made with torch 2.13.0 (CPU build), transformers 5.24.0 and diffusers 0.42.1 on a 2-core Xeon (AVX-512, AMX):
the EMA 2.64 ms a step, 2.18 ms with foreach=True, 0.93 ms as torch._foreach_lerp_.
"""

import statistics
import time

import torch
from diffusers.training_utils import EMAModel
from profiled import write_capture
from transformers import AutoConfig, AutoModelForCausalLM

torch.manual_seed(0)
torch.set_num_threads(2)
config = AutoConfig.for_model("gpt2", n_layer=4, n_embd=256, n_head=4, vocab_size=5000, bos_token_id=0, eos_token_id=0)
model = AutoModelForCausalLM.from_config(config)
ema = EMAModel(model.parameters())
opt = torch.optim.AdamW(model.parameters(), 1e-4)
tokens = torch.randint(0, 5000, (4, 64))


def step(_: int) -> None:
    model(input_ids=tokens, labels=tokens).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    ema.step(model.parameters())


def timing() -> None:
    params = list(model.parameters())
    shadow = [p.detach().clone() for p in params]
    per_tensor, foreach = EMAModel(params, foreach=False), EMAModel(params, foreach=True)

    def lerp() -> None:
        with torch.no_grad():
            torch._foreach_lerp_(shadow, params, 0.001)

    calls = {"EMAModel(foreach=False)": lambda: per_tensor.step(params),
             "EMAModel(foreach=True)": lambda: foreach.step(params), "torch._foreach_lerp_": lerp}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(12):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(10):
                call()
            times[name].append((time.perf_counter() - start) / 10 * 1e3)
    for name, t in times.items():
        print(f"{name}: {statistics.median(t[2:]):.2f} ms ({len(params)} tensors)")


if __name__ == "__main__":
    for i in range(3):
        step(i)
    write_capture("parameter_loop_diffusers_ema", step, active=3, record_shapes=True)
    timing()
