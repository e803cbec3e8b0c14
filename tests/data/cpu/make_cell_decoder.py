"""Writes tests/data/cpu/cell_decoder_*.pt.trace.json.gz: real torch.profiler captures (CPU, one thread,
shapes recorded, 3 steps marked each) of recurrent cells called once a timestep, two that generate and
one that does not (tracekit.analyze.decoding):

- ``cell_decoder_beam``: a GRU cell (hidden 256, vocabulary 2,000) beam-searching 16 tokens with 5
  beams under no_grad: each timestep ``topk`` over the beams' scores, the beams' states reordered
  (``h[src]``, aten::index) and the chosen tokens embedded.
- ``cell_decoder_greedy``: an LSTM cell (hidden 256, vocabulary 1,000) decoding 16 tokens greedily for
  4 sequences, ``tok = logits.max(1)[1]`` (aten::max's dim overload), the token embedded next.
- ``cell_teacher_forced`` (not a decoder): the same LSTM cell trained with teacher forcing on 16
  timesteps, the next input read from the target and the accuracy counted with argmax each timestep;
  one backward pass a step. The recurrent layer (nn.LSTM) can replace this loop.
- ``cell_teacher_forced_eval`` (not a decoder either): the same loop evaluated under no_grad, no
  backward pass: between the cells an argmax, then the next input's embedding, read from the target
  by position (``target[:, t]``, aten::select).

    python tests/data/cpu/make_cell_decoder.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import write_capture

TOKENS = 16


def beam() -> None:
    vocab, hidden, beams = 2000, 256, 5
    embed, cell, out = torch.nn.Embedding(vocab, hidden), torch.nn.GRUCell(hidden, hidden), torch.nn.Linear(hidden, vocab)

    def step(_: int) -> None:
        with torch.no_grad():
            h, tok, scores = torch.zeros(beams, hidden), torch.zeros(beams, dtype=torch.long), torch.zeros(beams)
            for _ in range(TOKENS):
                h = cell(embed(tok), h)
                logp = out(h).log_softmax(-1) + scores[:, None]
                scores, flat = logp.view(-1).topk(beams)
                src, tok = flat // vocab, flat % vocab
                h = h[src]

    step(0)
    write_capture("cell_decoder_beam", step, active=3, record_shapes=True)


def lstm_parts(vocab: int = 1000, hidden: int = 256) -> tuple[torch.nn.Module, torch.nn.LSTMCell, torch.nn.Module]:
    return torch.nn.Embedding(vocab, hidden), torch.nn.LSTMCell(hidden, hidden), torch.nn.Linear(hidden, vocab)


def greedy() -> None:
    embed, cell, out = lstm_parts()

    def step(_: int) -> None:
        with torch.no_grad():
            h = c = torch.zeros(4, 256)
            tok = torch.ones(4, dtype=torch.long)
            for _ in range(TOKENS):
                h, c = cell(embed(tok), (h, c))
                tok = out(h).max(1)[1]

    step(0)
    write_capture("cell_decoder_greedy", step, active=3, record_shapes=True)


def teacher_forced(train: bool = True) -> None:
    embed, cell, out = lstm_parts()
    params = [*embed.parameters(), *cell.parameters(), *out.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    target = torch.randint(0, 1000, (4, TOKENS + 1))

    def step(_: int) -> None:
        if not train:
            with torch.no_grad():
                forward()
            return
        opt.zero_grad()
        forward().backward()
        opt.step()

    def forward() -> torch.Tensor:
        h = c = torch.zeros(4, 256)
        loss, correct = torch.zeros(()), torch.zeros((), dtype=torch.long)
        for t in range(TOKENS):
            h, c = cell(embed(target[:, t]), (h, c))
            logits = out(h)
            loss = loss + torch.nn.functional.cross_entropy(logits, target[:, t + 1])
            correct += (logits.argmax(1) == target[:, t + 1]).sum()
        return loss

    step(0)
    write_capture("cell_teacher_forced" if train else "cell_teacher_forced_eval", step, active=3, record_shapes=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    beam()
    greedy()
    teacher_forced()
    teacher_forced(train=False)
