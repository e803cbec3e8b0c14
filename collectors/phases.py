"""NVTX ranges around workload phases, recorded by Nsight Systems 2023.4 as well as newer ones.

The PyPI ``nvtx`` package (>= 0.2.12) asks ``nvtxDomainIsEnabled`` before creating a domain and
turns every call into a no-op when the answer is 0. Nsight Systems 2023.4's injection library
predates that NVTX entry point, so under it the answer is always 0: the trace gets the domain's
create/destroy events and no ranges. When a tool is attached (``NVTX_INJECTION64_PATH`` is set)
we therefore build the domain without that check; the range calls themselves are ones 2023.4
implements. Without a tool, or without the package, ranges cost nothing. On a CUDA machine
without the package (the lent GPU images), PyTorch's own ``torch.cuda.nvtx`` records them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

DOMAIN = "tracekit"

try:
    import nvtx as _nvtx
except ImportError:  # the lent GPU machines have no nvtx package unless it is carried there
    _nvtx = None


def _domain() -> Any | None:
    if _nvtx is None:
        return None
    domain = _nvtx.get_domain(DOMAIN)
    if hasattr(domain, "handle") or not os.environ.get("NVTX_INJECTION64_PATH"):
        return domain if hasattr(domain, "handle") else None
    # A tool is attached but reports the domain disabled: the nvtxDomainIsEnabled gap above.
    from nvtx._lib.lib import DomainHandle

    forced = object.__new__(_nvtx.Domain)
    forced.handle = DomainHandle(DOMAIN)
    forced.__init__(DOMAIN)
    return forced


_DOMAIN = _domain()


def backend() -> str:
    """What records the ranges: for the manifest."""
    if _nvtx is None:
        return "torch.cuda.nvtx (default domain)" if _torch_nvtx() is not None else "none (nvtx package not installed)"
    from importlib.metadata import version

    state = f"domain {DOMAIN!r}" if _DOMAIN is not None else "no tool attached"
    return f"nvtx {version('nvtx')}, {state}"


def _torch_nvtx() -> Any | None:
    """PyTorch's NVTX bindings, for CUDA machines without the nvtx package (the lent GPU images):
    used only when torch is already imported and sees a GPU (a CPU build raises on every call)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.nvtx


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """A push/pop NVTX range named ``name`` in the tracekit domain (nsys shows ``tracekit:name``);
    with only PyTorch's bindings, in the default domain (``name``)."""
    if _DOMAIN is None:
        fallback = _torch_nvtx() if _nvtx is None else None
        if fallback is None:
            yield
            return
        fallback.range_push(name)
        try:
            yield
        finally:
            fallback.range_pop()
        return
    _DOMAIN.push_range(_DOMAIN.get_event_attributes(message=name))
    try:
        yield
    finally:
        _DOMAIN.pop_range()
