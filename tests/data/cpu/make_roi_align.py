"""Writes tests/data/cpu/roi_align.pt.trace.json.gz: a real torch.profiler capture (CPU, shapes recorded)
of torchvision.ops.roi_align forward and backward, as a detection model's box head runs it: 256 boxes
over a 2x64x64x64 feature map to 7x7 outputs, then a sum's backward, 3 steps marked. torchvision
registers roi_align with autograd through torch.library: its forward runs inside a range named
GeneratedBackwardFor_torchvision_roi_align_default under torchvision::roi_align, and that range's own
time is the kernel's. The report read it as work of no class (a Faster R-CNN training step: 78 ms of
roi_align's 87 ms, "inside ops with no class").

Run in a venv with torchvision (tracekit does not depend on it):
    python tests/data/cpu/make_roi_align.py
Made with torch 2.14.1 and torchvision 0.29.1.
"""

import torch
import torchvision
from profiled import write_capture


def main() -> None:
    torch.manual_seed(0)
    features = torch.rand(2, 64, 64, 64, requires_grad=True)
    corners = torch.rand(256, 2) * 48
    boxes = torch.cat([torch.randint(0, 2, (256, 1)).float(), corners, corners + 16], dim=1)

    def step(_: int) -> None:
        torchvision.ops.roi_align(features, boxes, (7, 7), spatial_scale=1.0, sampling_ratio=2).sum().backward()

    step(0)
    write_capture("roi_align", step, active=3, record_shapes=True)


if __name__ == "__main__":
    main()
