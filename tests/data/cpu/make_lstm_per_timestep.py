"""Writes tests/data/cpu/lstm_{packed,float64,proj,packed_no_shapes}.pt.trace.json.gz: real
torch.profiler captures (CPU) of nn.LSTM inference that runs as PyTorch's own per-timestep loop, not
oneDNN's fused aten::mkldnn_rnn_layer: a PackedSequence input, a float64 layer, a layer with
proj_size (shapes recorded), and the packed one without record_shapes. 8 sequences of up to 8
timesteps, hidden size 64, 2 steps marked by a schedule (lstm_layer, made by make_recurrent_layers.py,
is the fused counterpart).

    python tests/data/cpu/make_lstm_per_timestep.py
Made with torch 2.13.0 (CPU build).
"""

from collections.abc import Callable

import torch
from profiled import write_capture
from torch.nn.utils.rnn import pack_padded_sequence

T, B, H = 8, 8, 64


def capture(name: str, step: Callable[[], object], shapes: bool = True) -> None:
    def run(_: int) -> None:
        with torch.no_grad():
            step()

    write_capture(name, run, active=2, record_shapes=shapes)

if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(T, B, H)
    lengths = torch.tensor([8, 8, 7, 6, 5, 4, 3, 2])
    lstm = torch.nn.LSTM(H, H)
    capture("lstm_packed", lambda: lstm(pack_padded_sequence(x, lengths)))
    capture("lstm_packed_no_shapes", lambda: lstm(pack_padded_sequence(x, lengths)), shapes=False)
    wide = torch.nn.LSTM(H, H).double()
    capture("lstm_float64", lambda: wide(x.double()))
    projected = torch.nn.LSTM(H, H, proj_size=16)
    capture("lstm_proj", lambda: projected(x))
