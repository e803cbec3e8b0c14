"""Writes tests/data/cpu/train_mode_*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread,
shapes recorded) of inference under ``torch.inference_mode()`` with the model left in training mode
and in eval mode, 3 steps (calls) marked each:

- ``train_mode_encoder`` / ``train_mode_encoder_eval``: a 4-layer nn.TransformerEncoder (d_model 256,
  4 heads, feed-forward 1024, dropout 0.1, batch_first) on 8 sequences of 128; timed here unprofiled
  on a 2-core AMD EPYC: 157-191 ms a call in training mode, 74-87 ms in eval mode (three runs).
- ``train_mode_mlp`` / ``train_mode_mlp_eval``: 6 layers of Linear(512, 512), ReLU and Dropout(0.2) at
  batch 64: 3.85-5.02 against 2.33-2.73 ms.
- ``train_mode_batch_norm`` / ``train_mode_batch_norm_eval``: a small CNN with BatchNorm and no dropout
  (3-16 conv, 3 blocks of conv, BatchNorm and ReLU at 16 channels) on 8 images of 32x32.
- ``train_mode_training`` (training mode where it belongs): that MLP trained with SGD, its dropout
  drawing masks in a step that runs backward.
- ``train_mode_validation`` / ``train_mode_validation_eval``: that MLP at batch 256 trained with SGD,
  every third step an evaluation batch under ``torch.no_grad()``, without and with ``model.eval()``
  around it (the evaluation steps timed apart below).

    python tests/data/cpu/make_train_mode.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import unprofiled_ms, write_capture, write_training_capture


def inference(name: str, model: torch.nn.Module, x: torch.Tensor) -> None:
    for mode, suffix in (("train", ""), ("eval", "_eval")):
        getattr(model, mode)()

        def call(_: int) -> None:
            with torch.inference_mode():
                model(x)

        print(f"{name} in {mode} mode: {unprofiled_ms(call, 30):.2f} ms a call")
        write_capture(f"{name}{suffix}", call, active=3, record_shapes=True)


def validation(name: str, model: torch.nn.Module, switch: bool) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 512), torch.randint(0, 512, (256,))

    def evaluate() -> None:
        if switch:
            model.eval()
        with torch.no_grad():
            torch.nn.functional.cross_entropy(model(x), y)
        model.train()

    def step(i: int) -> None:
        if i % 3 == 2:
            evaluate()
            return
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    print(f"{name}: {unprofiled_ms(lambda _: evaluate(), 30):.2f} ms an evaluation step")
    write_capture(name, step, active=8, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
    inference("train_mode_encoder", torch.nn.TransformerEncoder(layer, 4), torch.randn(8, 128, 256))
    blocks = [m for _ in range(3) for m in (torch.nn.Conv2d(16, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                             torch.nn.ReLU())]
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), *blocks, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(16, 10))
    inference("train_mode_batch_norm", cnn, torch.randn(8, 3, 32, 32))
    mlp = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Dropout(0.2))])
    inference("train_mode_mlp", mlp, torch.randn(64, 512))
    mlp.train()
    write_training_capture("train_mode_training", mlp, torch.optim.SGD(mlp.parameters(), lr=0.01), torch.randn(64, 512),
                           torch.randint(0, 512, (64,)))
    validation("train_mode_validation", mlp, switch=False)
    validation("train_mode_validation_eval", mlp, switch=True)
