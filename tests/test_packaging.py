"""A fresh machine can install and run tracekit: every import declared, a wheel that works alone,
CI that installs exactly what the README says."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import venv
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import tomllib
from conftest import REPO, SHARED, shared_files

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _dist(spec: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;]", spec.strip(), maxsplit=1)[0]).lower()


CORE = {_dist(s) for s in PYPROJECT["dependencies"]}
EXTRAS = {_dist(s) for group in PYPROJECT["optional-dependencies"].values() for s in group}


def _guarded(tree: ast.Module) -> set[int]:
    """ids of import nodes inside ``try: ... except ImportError`` (optional by design)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _imports() -> list[tuple[Path, str, bool]]:
    """(file, top-level module, imported at module level of a tracekit/ file) for third-party imports."""
    local = {"tracekit", "collectors"}
    found = []
    for path in sorted([*REPO.glob("tracekit/**/*.py"), *REPO.glob("collectors/**/*.py")]):
        tree = ast.parse(path.read_text())
        guarded, top = _guarded(tree), {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                if root in sys.stdlib_module_names or root in local or root == "__future__" or id(node) in guarded:
                    continue
                found.append((path, root, id(node) in top and path.relative_to(REPO).parts[0] == "tracekit"))
    return found


def test_every_third_party_import_is_declared_and_installed():
    """In CI's fresh venv only declared packages exist, so 'installed' proves 'declared' too."""
    dists = packages_distributions()
    problems = []
    for path, module, core in _imports():
        owners = {_dist(d) for d in dists.get(module, [])}
        where = path.relative_to(REPO)
        if not owners:
            problems.append(f"{where}: {module} is not installed here (undeclared, or its extra was not installed)")
        elif not owners & (CORE if core else CORE | EXTRAS):
            problems.append(f"{where}: {module} ({', '.join(sorted(owners))}) is not in pyproject's "
                            f"{'dependencies' if core else 'dependencies or extras'}")
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(not (SHARED / "hooks" / "check_deps.py").exists(), reason="../shared/hooks/check_deps.py absent")
def test_shared_dependency_hook_finds_nothing():
    run = subprocess.run([sys.executable, str(SHARED / "hooks" / "check_deps.py"), str(REPO)], capture_output=True,
                         text=True, timeout=120)
    assert run.stdout.strip() == "", run.stdout


def test_ci_installs_with_the_readme_set_up_line_and_runs_its_test_command():
    readme = (REPO / "README.md").read_text()
    setup = [line for line in readme.splitlines() if "# set up" in line]
    assert len(setup) == 1 and "pip install" in setup[0] and "native" in setup[0]
    ci = (REPO / ".ci" / "run").read_text()
    assert "grep -m1 '# set up' README.md" in ci and "python -m venv" in ci
    assert "python -m pytest -q" in readme and ci.rstrip().endswith("python -m pytest -q")


def test_license_file_matches_the_metadata():
    assert PYPROJECT["license"] == "Apache-2.0"
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]


@pytest.mark.slow
def test_a_wheel_installed_alone_in_a_clean_venv_reads_a_kineto_trace(tmp_path):
    """Core dependencies only (no extras, no editable checkout on the path): `tracekit info` works."""
    traces = shared_files("hta/cpu_only/*.json.gz")
    if not traces:
        pytest.skip("../shared/traces is absent")
    # Build from a copy of the project's files: a build/ folder left in the checkout could leak stale files in.
    source = tmp_path / "source"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    for name in listed.stdout.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("tracekit-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    # The collectors ship inside the tracekit namespace, not as a generic top-level package.
    assert "tracekit/collectors/study.py" in names and "tracekit/collectors/get_nsys.sh" in names
    assert not any(n.startswith("collectors/") for n in names)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    install = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                             timeout=600)
    if install.returncode != 0 and "No matching distribution" in install.stderr:
        pytest.skip(f"no package index reachable to install the core dependencies: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr[-2000:]
    run = subprocess.run([str(env_dir / "bin" / "tracekit"), "info", str(traces[0])], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "events" in run.stdout and "torch" in run.stdout
    version = subprocess.run([str(env_dir / "bin" / "tracekit"), "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert version.returncode == 0 and "0.1.0" in version.stdout
