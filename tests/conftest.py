"""Shared fixtures: where the real traces live, and a skip when ../shared is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
TRACES = SHARED / "traces"

needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces not found: {TRACES} is absent")


def shared_files(pattern: str) -> list[Path]:
    """Files under ../shared/traces matching a glob (empty when ../shared is absent)."""
    return sorted(TRACES.glob(pattern)) if TRACES.is_dir() else []


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(TRACES)) for p in paths]
