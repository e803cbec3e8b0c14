"""Type stub of the C extension built from xplane_events.c (see that file for what it returns)."""

from typing import Any

def walk_line(line: bytes, base_ns: int, stat_ids: bytes, stat_name_of: bytes, names: tuple[bytes, ...], raw_names: tuple[bytes, ...],
              specials: tuple[int, ...], meta_with_stats: bytes) -> tuple[Any, ...]: ...
