"""The stacked LSTM language model of the TF/PyTorch/Julia comparison.

Embedding (vocab 10001 -> 128), three LSTM layers of 256, a decoder back to the vocabulary, on
sequences of 50 tokens in batches of 128; the study timed the forward pass per batch on CPU
(PyTorch 0.348 s, PyTorch JIT 0.260 s) and a full training step.
"""

from __future__ import annotations

import torch
from torch import nn
from tracekit.collectors.sweep import LMConfig


class LanguageModel(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.embed)
        self.lstm = nn.LSTM(config.embed, config.hidden, num_layers=config.layers)
        self.decoder = nn.Linear(config.hidden, config.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [timesteps, batch] -> logits [timesteps, batch, vocab]."""
        hidden, _ = self.lstm(self.embed(tokens))
        return self.decoder(hidden)


def make_model(config: LMConfig, device: torch.device, seed: int = 0) -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel(config).to(device)


def make_batch(config: LMConfig, device: torch.device, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens and their next-token targets, [timesteps, batch] each."""
    generator = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, config.vocab, (config.timesteps + 1, config.batch), generator=generator)
    return tokens[:-1].to(device), tokens[1:].to(device)
