"""Writes tests/data/cpu/{lstm_layer,gru_layer,gru_cell_loop}.pt.trace.json.gz: real torch.profiler
captures (CPU, shapes recorded) of inference over one batch of 16 sequences of 10 timesteps, hidden
size 128, 3 steps marked by a schedule: nn.LSTM (one aten::mkldnn_rnn_layer for all timesteps; like
every recurrent layer it asks aten::cudnn_is_acceptable, on a CPU too), nn.GRU (no oneDNN path on the
CPU: aten::gru runs an addmm per timestep itself) and a GRUCell called per timestep.

    python tests/data/cpu/make_recurrent_layers.py
Made with torch 2.13.0 (CPU build).
"""

from collections.abc import Callable

import torch
from profiled import write_capture

T, B, H = 10, 16, 128


def capture(name: str, step: Callable[[torch.Tensor], object]) -> None:
    x = torch.randn(T, B, H)

    def run(_: int) -> None:
        with torch.no_grad():
            step(x)

    write_capture(name, run, active=3, record_shapes=True)

def cell_loop(cell: torch.nn.GRUCell) -> Callable[[torch.Tensor], object]:
    def step(x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(B, H)
        for t in range(T):
            h = cell(x[t], h)
        return h
    return step


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    capture("lstm_layer", torch.nn.LSTM(H, H))
    capture("gru_layer", torch.nn.GRU(H, H))
    capture("gru_cell_loop", cell_loop(torch.nn.GRUCell(H, H)))
