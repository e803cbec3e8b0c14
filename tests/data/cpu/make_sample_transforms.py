"""Writes tests/data/cpu/sample_transforms{,_batched}.pt.trace.json.gz: real torch.profiler captures (CPU,
shapes recorded, 3 steps marked) of a small CNN's training step (a 3x3 convolution of 16 channels,
pooling, a Linear head; SGD) on 32 images of 3x96x96, augmented inside the step with
torchvision.transforms.v2 (RandomResizedCrop to 64, RandomHorizontalFlip, ColorJitter):
* sample_transforms: image by image, ``torch.stack([augment(image) for image in images])``: an
  aten::unbind of the batch, a couple of hundred ops per image (each its own crop size), an aten::stack.
  The report read "CPU compute-bound" with torch.compile among its remedies;
* sample_transforms_batched: the same transforms on the batch tensor at once (one crop, flip and
  jitter drawn for the whole batch).
Unprofiled on a 2-core Intel Xeon (medians of 30): the per-image augmentation 8.5 ms, the model's step
10.6 ms, both 18.2 ms; the batched augmentation 1.4 ms.

Run in a venv with torchvision (tracekit does not depend on it):
    python tests/data/cpu/make_sample_transforms.py
Made with torch 2.14.1 and torchvision 0.29.1.
"""

import torch
import torch.nn.functional as F
import torchvision.transforms.v2 as T
from profiled import write_capture


def capture(name: str, batched: bool) -> None:
    torch.manual_seed(0)
    augment = T.Compose([T.RandomResizedCrop(64, antialias=True), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4)])
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    images, labels = torch.rand(32, 3, 96, 96), torch.randint(0, 10, (32,))

    def step(_: int) -> None:
        batch = augment(images) if batched else torch.stack([augment(image) for image in images])
        opt.zero_grad()
        F.cross_entropy(model(batch), labels).backward()
        opt.step()

    for i in range(3):
        step(i)
    write_capture(name, step, active=3, record_shapes=True)


def main() -> None:
    capture("sample_transforms", batched=False)
    capture("sample_transforms_batched", batched=True)


if __name__ == "__main__":
    main()
