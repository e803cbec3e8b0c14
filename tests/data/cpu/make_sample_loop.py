"""Writes tests/data/cpu/sample_loop*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread,
shapes recorded) of loops that walk a tensor one index at a time, 3 steps marked each:

- ``sample_loop``: an MLP (128-256-256-10) trained with SGD on a batch of 16 walked one sample at a
  time, ``model(x[i:i+1])``, the losses summed and one backward; timed here unprofiled on a 2-core
  AMD EPYC: 2.5 ms a step, 0.41 ms on the whole batch (at a batch of 64: 9.1-10.0 ms against 0.72).
- ``sample_loop_inference``: the same MLP run under no_grad on ``x[i]``, a vector each (aten::select).
- ``sample_loop_char_rnn`` (not a per-sample loop): the char-RNN of PyTorch's name-classification
  tutorial, a [T, 1, F] line walked by timestep, ``rnn(line[t], hidden)``, its hidden state fed back.
- ``sample_loop_decode`` (not one either): greedy decoding of 24 tokens, each written into an
  output buffer, ``out[:, t] = tok``, and fed back.
- ``sample_loop_zip``: the MLP of ``sample_loop`` trained by iterating the batch, ``for xi, yi in
  zip(x, y)`` (one aten::unbind each, no index op per sample); 2.4-3.2 ms a step unprofiled.
- ``sample_loop_grads``: per-sample gradients of the MLP by a loop, ``torch.autograd.grad`` of each
  sample's loss (batch 32), 2 steps marked: 7.2-7.3 ms a step against 3.5-4.7 ms with
  ``torch.func.vmap(torch.func.grad(...))`` (interleaved, two runs; at batch 16 3.6 against 2.8).
- ``sample_loop_unbind_recurrence`` (not one): a hand-written LSTM cell looped over
  ``x.unbind(0)`` of a [T, B, F] sequence (TorchScript's custom-LSTM example): each timestep a
  16-row product, its state fed back.
- ``sample_loop_metric``: accuracy of a classifier's outputs counted sample by sample, ``for p, t in
  zip(out, y): correct += int(p.argmax() == t)`` (batch 256, under no_grad); unprofiled 1.76 ms a call
  against 0.81 ms for ``int((out.argmax(1) == y).sum())``.
- ``sample_loop_metric_indexed``: the same, indexed, ``out[i].argmax().item()`` (aten::select).
- ``sample_loop_thresholds`` (not one): a loop reading a value into Python per threshold, each
  iteration over the whole batch, ``int((probs > t).sum())`` for 99 thresholds (a precision-recall curve).
- ``sample_loop_cnn``: a small CNN (3-16-32 convs, NCHW) run under no_grad on 32 images one at a time,
  ``cnn(im[None])``: a per-sample loop, but the convolutions' work stays when batched: unprofiled
  6.8-7.3 ms a call against 6.1-6.7 ms on the batch (8-10%), where the loop is 98% of the profiled step.

    python tests/data/cpu/make_sample_loop.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import unprofiled_ms, write_capture

BATCH = 16


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def per_sample_training() -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(BATCH, 128), torch.arange(BATCH) % 10

    def per_sample(_: int) -> None:
        opt.zero_grad()
        loss = torch.zeros(())
        for i in range(BATCH):
            loss = loss + torch.nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
        (loss / BATCH).backward()
        opt.step()

    def batched(_: int) -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for step in (per_sample, batched):
        print(f"{step.__name__}: {unprofiled_ms(step, 50):.2f} ms a step")
    write_capture("sample_loop", per_sample, active=3, record_shapes=True)


def per_sample_inference() -> None:
    model = mlp()
    x = torch.randn(BATCH, 128)

    def infer(_: int) -> None:
        with torch.no_grad():
            [model(x[i]) for i in range(BATCH)]

    infer(0)
    write_capture("sample_loop_inference", infer, active=3, record_shapes=True)


def zip_training() -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(BATCH, 128), torch.arange(BATCH) % 10

    def per_sample(_: int) -> None:
        opt.zero_grad()
        loss = torch.zeros(())
        for xi, yi in zip(x, y, strict=True):
            loss = loss + torch.nn.functional.cross_entropy(model(xi.unsqueeze(0)), yi.unsqueeze(0))
        (loss / BATCH).backward()
        opt.step()

    print(f"zip: {unprofiled_ms(per_sample, 50):.2f} ms a step")
    write_capture("sample_loop_zip", per_sample, active=3, record_shapes=True)


def per_sample_gradients() -> None:
    from torch.func import functional_call, grad, vmap

    model = mlp()
    params = dict(model.named_parameters())
    x, y = torch.randn(32, 128), torch.arange(32) % 10

    def loop(_: int) -> None:
        for i in range(32):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
            torch.autograd.grad(loss, list(params.values()))

    def sample_loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])

    per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))
    detached = {k: v.detach() for k, v in params.items()}
    # Interleaved, medians of 10 blocks of 5 calls: vmap's fixed cost (~2 ms) is paid once a call.
    times: dict[str, list[float]] = {"loop": [], "vmap": []}
    for _ in range(10):
        for name, fn in (("loop", loop), ("vmap", lambda _: per_sample(detached, x, y))):
            times[name].append(unprofiled_ms(fn, 5, warmup=1))
    print("per-sample gradients, ms a step:", {k: round(sorted(v)[len(v) // 2], 2) for k, v in times.items()})
    write_capture("sample_loop_grads", loop, active=2, record_shapes=True)


def unbind_recurrence() -> None:
    w_ih, w_hh = torch.nn.Linear(64, 4 * 128), torch.nn.Linear(128, 4 * 128)
    x = torch.randn(20, BATCH, 64)

    def step(_: int) -> None:
        with torch.no_grad():
            h = c = torch.zeros(BATCH, 128)
            for x_t in x.unbind(0):
                i, f, g, o = (w_ih(x_t) + w_hh(h)).chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)

    step(0)
    write_capture("sample_loop_unbind_recurrence", step, active=3, record_shapes=True)


class CharRNN(torch.nn.Module):
    """The tutorial's RNN: the hidden state from the letter and the previous hidden state."""

    def __init__(self, letters: int, hidden: int, categories: int) -> None:
        super().__init__()
        self.i2h = torch.nn.Linear(letters + hidden, hidden)
        self.h2o = torch.nn.Linear(hidden, categories)

    def forward(self, letter: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.tanh(self.i2h(torch.cat((letter, hidden), 1)))
        return torch.log_softmax(self.h2o(hidden), 1), hidden


def char_rnn() -> None:
    rnn = CharRNN(57, 128, 18)
    opt = torch.optim.SGD(rnn.parameters(), lr=0.005)
    line, category = torch.randn(12, 1, 57), torch.tensor([3])

    def step(_: int) -> None:
        hidden = torch.zeros(1, 128)
        opt.zero_grad()
        for t in range(line.size(0)):
            out, hidden = rnn(line[t], hidden)
        torch.nn.functional.nll_loss(out, category).backward()
        opt.step()

    step(0)
    write_capture("sample_loop_char_rnn", step, active=3, record_shapes=True)


def greedy_decode() -> None:
    embed = torch.nn.Embedding(100, 64)
    head = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 100))

    def decode(_: int) -> None:
        with torch.no_grad():
            out, token = torch.zeros(1, 24, dtype=torch.long), torch.tensor([1])
            for t in range(24):
                token = head(embed(token)).argmax(-1)
                out[:, t] = token

    decode(0)
    write_capture("sample_loop_decode", decode, active=3, record_shapes=True)


def metric_loops() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval()
    x, y = torch.randn(256, 256), torch.randint(0, 10, (256,))
    thresholds = torch.linspace(0.01, 0.99, 99)

    def zipped(_: int) -> int:
        with torch.no_grad():
            return sum(int(p.argmax() == t) for p, t in zip(model(x), y, strict=True))

    def indexed(_: int) -> int:
        with torch.no_grad():
            out = model(x)
            return sum(out[i].argmax().item() == y[i].item() for i in range(len(out)))

    def whole(_: int) -> int:
        with torch.no_grad():
            return int((model(x).argmax(1) == y).sum())

    def per_threshold(_: int) -> list[int]:
        with torch.no_grad():
            probs = model(x).softmax(1)
            return [int((probs > t).sum()) for t in thresholds]

    print(f"metric: {unprofiled_ms(zipped, 50):.2f} ms a call sample by sample, {unprofiled_ms(whole, 50):.2f} on the whole tensor")
    write_capture("sample_loop_metric", zipped, active=3, record_shapes=True)
    write_capture("sample_loop_metric_indexed", indexed, active=3, record_shapes=True)
    write_capture("sample_loop_thresholds", per_threshold, active=3, record_shapes=True)


def per_image_cnn() -> None:
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()
    images = torch.randn(32, 3, 32, 32)

    def per_image(_: int) -> list[torch.Tensor]:
        with torch.no_grad():
            return [cnn(im[None]).argmax(1) for im in images]

    def batched(_: int) -> torch.Tensor:
        with torch.no_grad():
            return cnn(images).argmax(1)

    print(f"cnn: {unprofiled_ms(per_image, 20):.2f} ms a call per image, {unprofiled_ms(batched, 20):.2f} batched")
    write_capture("sample_loop_cnn", per_image, active=3, record_shapes=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    per_sample_training()
    per_sample_inference()
    char_rnn()
    greedy_decode()
    zip_training()
    per_sample_gradients()
    unbind_recurrence()
    metric_loops()
    per_image_cnn()
