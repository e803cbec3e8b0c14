"""Writes tests/data/cpu/autocast_attention_{fp32,bf16,fp32_again}.pt.trace.json.gz: real torch.profiler
captures (CPU, one thread, shapes recorded) of a transformer encoder layer (d_model 256, 4 heads,
feed-forward 512, batch 8 of 128 tokens) with a 100-way head, trained with AdamW, 3 steps marked:
in float32, under torch.autocast("cpu", dtype=torch.bfloat16), and in float32 again (the same loop
captured twice). Under autocast the matrix products take about half their float32 time on this CPU
(AVX-512 BF16), but the fused attention's backward (aten::_scaled_dot_product_flash_attention_for_cpu_backward)
takes several times its float32 time: the step is faster while that op is slower.

    python tests/data/cpu/make_autocast_attention.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX).
"""

import torch
from profiled import unprofiled_ms, write_capture


def capture(name: str, bf16: bool) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 512, dropout=0.0, batch_first=True)
    head = torch.nn.Linear(256, 100)
    opt = torch.optim.AdamW([*layer.parameters(), *head.parameters()], lr=1e-3)
    x, y = torch.randn(8, 128, 256), torch.randint(0, 100, (8 * 128,))

    def step(_: int) -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = head(layer(x))
        torch.nn.functional.cross_entropy(out.float().reshape(-1, 100), y).backward()
        opt.step()

    print(f"{name}: {unprofiled_ms(step, 10):.1f} ms a step unprofiled")
    write_capture(name, step, active=3, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    capture("autocast_attention_fp32", bf16=False)
    capture("autocast_attention_bf16", bf16=True)
    capture("autocast_attention_fp32_again", bf16=False)
