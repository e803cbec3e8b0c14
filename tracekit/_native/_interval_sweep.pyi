"""Type stub of the C extension built from interval_sweep.c (see that file for the contract)."""

from typing import Any

def exclusive(order: Any, group: Any, start: Any, end: Any, cls: Any, n_classes: int, out: Any) -> None: ...
