"""The direction of data flow, kept by a test: ingest -> analyze -> render -> cli, never back.

Rules (every import counts, at module level or inside a function):
* ``tracekit.ingest`` imports only ``schema``, ``errors``, ``_native``, ``_version``, ``atomic``, ``threads``
  and itself;
* ``tracekit.analyze`` never imports ``render``, ``cli`` or ``collectors``;
* ``tracekit.render`` never imports ``cli`` or ``collectors``;
* ``tracekit.export`` (writers of the table for other tools) never imports ``render``, ``cli`` or ``collectors``;
* no library module imports ``cli``;
* the library never imports ``tracekit.collectors`` at module level (the frameworks load only when a
  collector runs).
docs/architecture.md describes the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tracekit"
INGEST_MAY_IMPORT = ("tracekit.schema", "tracekit.errors", "tracekit._native", "tracekit._version", "tracekit.atomic",
                     "tracekit.threads", "tracekit.ingest")


def _module(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported tracekit module, at module level) for each import in the file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("tracekit"):
                out.append((target, id(node) in top))
    return out


def _within(target: str, package: str) -> bool:
    return target == package or target.startswith(package + ".")


def _violations(package: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(package.rglob("*.py")):
        module = _module(path, package)
        for target, module_level in _imports(path):
            # "from tracekit import schema" names tracekit.schema; the bare package root is its own rule.
            if target == "tracekit":
                continue
            if _within(module, "tracekit.ingest") and not any(_within(target, ok) for ok in INGEST_MAY_IMPORT):
                problems.append(f"{module} imports {target}: ingest reads formats and knows nothing above it")
            if _within(module, "tracekit.analyze") and any(
                    _within(target, f"tracekit.{p}") for p in ("render", "cli", "collectors")):
                problems.append(f"{module} imports {target}: analyses are pure and render nothing")
            if _within(module, "tracekit.render") and any(_within(target, f"tracekit.{p}") for p in ("cli", "collectors")):
                problems.append(f"{module} imports {target}: renderers do not call the CLI")
            if _within(module, "tracekit.export") and any(
                    _within(target, f"tracekit.{p}") for p in ("cli", "collectors", "render")):
                problems.append(f"{module} imports {target}: exporters write the table, not reports")
            if not (_within(module, "tracekit.cli") or module == "tracekit.__main__") and _within(target, "tracekit.cli"):
                problems.append(f"{module} imports {target}: the library never calls its CLI")
            if module_level and _within(target, "tracekit.collectors") and not _within(module, "tracekit.cli"):
                problems.append(f"{module} imports {target} at module level: importing tracekit would load the frameworks")
    return problems


def test_imports_follow_the_layers():
    problems = _violations()
    assert not problems, "\n".join(problems)


def test_the_rules_catch_backward_imports(tmp_path):
    """The checker itself, on a small package with one import of each forbidden kind."""
    package = tmp_path / "tracekit"
    for module, source in {
        "render/probe.py": "from tracekit.cli._output import emit\n",
        "analyze/probe.py": "def f():\n    from tracekit.render import documents\n",
        "ingest/probe.py": "from tracekit.analyze import frame\n",
        "dataset.py": "from tracekit.collectors import study\n",
    }.items():
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).write_text(source)
    found = "\n".join(_violations(package))
    for expected in ("tracekit.render.probe imports tracekit.cli._output", "tracekit.analyze.probe imports tracekit.render",
                     "tracekit.ingest.probe imports tracekit.analyze", "tracekit.dataset imports tracekit.collectors"):
        assert expected in found, found
