"""Writes tests/data/cpu/graph_breaks{,_none}.pt.trace.json.gz: real torch.profiler captures (CPU, two
threads, shapes recorded) of a torch.compile'd function of two passes through a small MLP (256-256-256,
batch 64) under no_grad, 4 steps marked after compiling outside the profile: the first scales the second
pass by float(y.sum()), a graph break (Dynamo runs the .item() eagerly and compiles the rest as a resume
function, whose region runs nested inside the first's); the second keeps the scale a tensor, one graph.
Timed here unprofiled on a 2-core AMD EPYC: 0.302 ms a call with the break, 0.271 ms without.

    python tests/data/cpu/make_graph_breaks.py
Made with torch 2.13.0 (CPU build).
"""

import torch
from profiled import unprofiled_ms, write_capture


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    x = torch.randn(64, 256)

    @torch.compile
    def broken(x: torch.Tensor) -> torch.Tensor:
        y = model(x)
        return model(y * float(y.sum()))  # float() of a tensor: a graph break

    @torch.compile
    def whole(x: torch.Tensor) -> torch.Tensor:
        y = model(x)
        return model(y * y.sum())

    for name, fn in (("graph_breaks", broken), ("graph_breaks_none", whole)):
        def step(_: int, fn=fn) -> None:
            with torch.no_grad():
                fn(x)

        print(f"{name}: {unprofiled_ms(step, 200):.3f} ms a call")
        write_capture(name, step, active=4, record_shapes=True)


if __name__ == "__main__":
    main()
