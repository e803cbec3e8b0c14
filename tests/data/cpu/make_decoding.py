"""Writes tests/data/cpu/decode_{sdpa,eager,no_cache}.pt.trace.json.gz: real torch.profiler captures (CPU, one
thread, 2 steps marked, shapes recorded) of Hugging Face transformers' generate() on a small GPT-2 made from
its config (2 layers, 256 wide, 4 heads, vocabulary 8,000; random weights, nothing downloaded): 4 prompts
of 8 tokens, 12 new tokens by greedy search, each step one generate() call.

- decode_sdpa: attention by torch's scaled_dot_product_attention, the key/value cache on (the default):
  each new token's attention has one query position over a cache one position longer than the last.
- decode_eager: the same with attn_implementation="eager" (q @ k^T by aten::matmul).
- decode_no_cache: use_cache=False: every token runs the whole sequence again (queries of 8 to 19
  positions), not a decode loop of one position a token.
- decode_one_prompt: decode_sdpa's loop on one prompt, 24 new tokens: its steps are mostly the
  framework's dispatch between ops, and the decode loop's own remedy (more sequences at once) is its
  batching remedy.
- decode_bf16: decode_sdpa's loop with the model in bfloat16 (``model.to(torch.bfloat16)``): its weights are
  16-bit already, and the decode remedy says so rather than suggest bf16.

    python tests/data/cpu/make_decoding.py [NAME ...]   # needs transformers (made with 5.24.0), not a tracekit dependency
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX); decode_bf16 on a
2-core Intel Xeon (Sapphire Rapids class: AVX-512, AMX).
"""

import torch
from profiled import unprofiled_ms, write_capture
from transformers import GPT2Config, GPT2LMHeadModel


def capture(name: str, attention: str, use_cache: bool, width: int = 256, prompts: int = 4, tokens: int = 12,
            dtype: torch.dtype = torch.float32) -> None:
    torch.manual_seed(0)
    config = GPT2Config(n_embd=width, n_layer=2, n_head=4, vocab_size=8000, n_positions=64,
                        attn_implementation=attention)
    model = GPT2LMHeadModel(config).eval().to(dtype)
    batch = torch.randint(0, 8000, (prompts, 8))

    def step(_: int) -> None:
        with torch.inference_mode():
            model.generate(batch, max_new_tokens=tokens, do_sample=False, pad_token_id=0, use_cache=use_cache)

    print(f"{name}: {unprofiled_ms(step, 5):.1f} ms a step unprofiled")
    write_capture(name, step, active=2, record_shapes=True)


if __name__ == "__main__":
    import sys

    torch.set_num_threads(1)
    captures = {"decode_sdpa": ("sdpa", True), "decode_eager": ("eager", True), "decode_no_cache": ("sdpa", False),
                "decode_one_prompt": ("sdpa", True, 256, 1, 24),
                "decode_bf16": ("sdpa", True, 256, 4, 12, torch.bfloat16)}
    for name in sys.argv[1:] or captures:
        capture(name, *captures[name])
