"""Writes tests/data/cpu/aoti_mlp{,_stack,_kernels}.pt.trace.json.gz: real torch.profiler captures (CPU, one
thread, 3 steps marked, shapes recorded) of an AOTInductor package running a 5-layer MLP (256-1024, GELU,
LayerNorm, 1024-256, ReLU, 256-10; batch 64) in inference: torch.export, then
torch._inductor.aoti_compile_and_package and aoti_load_package.

- aoti_mlp: the package as usually compiled. Its C++ kernels and the GEMMs it calls through ATen's C shim
  record no op: the trace holds only ATen's internals of those calls (aten::expand, aten::copy_ for the
  bias, aten::resolve_conj) and stretches of hundreds of µs with no op running.
- aoti_mlp_stack: the same, with Python stacks (with_stack=True): the stretches lie inside the package
  runner's one native call (<built-in method boxed_run ...>, called by torch/export/pt2_archive/_package.py).
- aoti_mlp_kernels: compiled with inductor_configs={"cpp.enable_kernel_profile": True,
  "profiler_mark_wrapper_call": True}: the kernels appear as graph_0_cpp_fused_* ops and the ATen calls as
  aoti_torch_cpu_addmm_out, inside an inductor_wrapper_call range.

    python tests/data/cpu/make_aoti.py
Made with torch 2.13.0 (CPU build) on a 2-core AMD EPYC (Zen 4: AVX-512 with BF16, no AMX).
"""

import tempfile
from pathlib import Path

import torch
from profiled import unprofiled_ms, write_capture


def package(model: torch.nn.Module, x: torch.Tensor, directory: Path, name: str, configs: dict) -> object:
    exported = torch.export.export(model, (x,))
    path = torch._inductor.aoti_compile_and_package(exported, package_path=str(directory / f"{name}.pt2"),
                                                    inductor_configs=configs)
    return torch._inductor.aoti_load_package(path)


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024),
                              torch.nn.Linear(1024, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
    x = torch.randn(64, 256)
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        plain = package(mlp, x, Path(tmp), "plain", {})
        kernels = package(mlp, x, Path(tmp), "kernels", {"cpp.enable_kernel_profile": True,
                                                          "profiler_mark_wrapper_call": True})
        print(f"eager: {unprofiled_ms(lambda _: mlp(x), 200):.3f} ms, AOTInductor: "
              f"{unprofiled_ms(lambda _: plain(x), 200):.3f} ms a step unprofiled")
        write_capture("aoti_mlp", lambda _: plain(x), active=3, record_shapes=True)
        write_capture("aoti_mlp_stack", lambda _: plain(x), active=3, record_shapes=True, with_stack=True)
        write_capture("aoti_mlp_kernels", lambda _: kernels(x), active=3, record_shapes=True)
