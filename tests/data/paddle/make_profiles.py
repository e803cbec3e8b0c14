"""Writes the PaddlePaddle profiles in tests/data/paddle/: real ``paddle.profiler`` captures (CPU target,
exported with ``export_chrome_tracing``), gzipped:

* ``mlp_train.paddle_trace.json.gz``: Linear(256, 512), ReLU, Linear(512, 10) trained with Adam at batch
  64, each iteration also in ``RecordEvent("my_iteration")``; scheduler (1, 4): 3 steps marked.
* ``small_ops_train.paddle_trace.json.gz``: 20 blocks of Linear(16, 16), tanh, * 0.5, + x trained with
  SGD at batch 1; 3 steps marked. Timed here unprofiled: 1.38 ms a step in dygraph, 1.53 ms under
  ``paddle.jit.to_static``; inference 0.37 and 0.29 ms.
* ``record_event_train.paddle_trace.json.gz``: the MLP profiled without a scheduler and without
  ``prof.step()`` (no ProfileStep written), each iteration in ``RecordEvent("train_step")``.
* ``encoder_dropout_train.paddle_trace.json.gz``: a 2-layer ``paddle.nn.TransformerEncoder`` (256
  wide, 4 heads, feed-forward 1024, dropout 0.1) trained with AdamW on 8 sequences of 256; 2 steps
  marked. Timed here unprofiled: 929-995 ms a step, 783-818 ms with dropout 0 (two runs; at 128
  tokens 409-434 against 360-377 ms).

    /tmp/pdvenv/bin/python tests/data/paddle/make_profiles.py [NAME ...]   (default: all)

Run in a separate venv with paddlepaddle (tracekit does not depend on it):
    python -m venv /tmp/pdvenv && /tmp/pdvenv/bin/pip install paddlepaddle
    /tmp/pdvenv/bin/python tests/data/paddle/make_profiles.py
Made with paddlepaddle 3.3.1 (CPU) on a 2-core AMD EPYC.
"""

import gzip
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import paddle
import paddle.profiler as profiler

HERE = Path(__file__).resolve().parent


class SmallOps(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.layers = paddle.nn.LayerList([paddle.nn.Linear(16, 16) for _ in range(20)])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        for layer in self.layers:
            x = paddle.tanh(layer(x)) * 0.5 + x
        return x


def capture(name: str, step: Callable[[], None], scheduler: tuple[int, int] | None, label: str) -> None:
    for _ in range(3):
        step()
    with tempfile.TemporaryDirectory() as tmp:
        prof = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU], scheduler=scheduler,
                                 on_trace_ready=profiler.export_chrome_tracing(tmp))
        prof.start()
        for _ in range(scheduler[1] + 1 if scheduler else 3):
            with profiler.RecordEvent(label):
                step()
            if scheduler:
                prof.step()
        prof.stop()
        written = next(Path(tmp).glob("*.json"))
        with open(written, "rb") as src, gzip.open(HERE / f"{name}.paddle_trace.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)


def mlp_step() -> Callable[[], None]:
    paddle.seed(0)
    model = paddle.nn.Sequential(paddle.nn.Linear(256, 512), paddle.nn.ReLU(), paddle.nn.Linear(512, 10))
    opt = paddle.optimizer.Adam(parameters=model.parameters())
    x, y = paddle.randn([64, 256]), paddle.randint(0, 10, [64])

    def step() -> None:
        paddle.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.clear_grad()
    return step


def small_ops_step() -> Callable[[], None]:
    paddle.seed(0)
    model = SmallOps()
    opt = paddle.optimizer.SGD(parameters=model.parameters())
    x = paddle.randn([1, 16])

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.clear_grad()
    return step


def encoder_step() -> Callable[[], None]:
    paddle.seed(0)
    layer = paddle.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1)
    model = paddle.nn.TransformerEncoder(layer, 2)
    opt = paddle.optimizer.AdamW(parameters=model.parameters())
    x = paddle.randn([8, 256, 256])

    def step() -> None:
        model(x).mean().backward()
        opt.step()
        opt.clear_grad()
    return step


if __name__ == "__main__":
    wanted = set(sys.argv[1:]) or {"mlp_train", "small_ops_train", "record_event_train", "encoder_dropout_train"}
    if "mlp_train" in wanted:
        capture("mlp_train", mlp_step(), (1, 4), "my_iteration")
    if "small_ops_train" in wanted:
        capture("small_ops_train", small_ops_step(), (1, 4), "my_iteration")
    if "record_event_train" in wanted:
        capture("record_event_train", mlp_step(), None, "train_step")
    if "encoder_dropout_train" in wanted:
        capture("encoder_dropout_train", encoder_step(), (1, 3), "my_iteration")
