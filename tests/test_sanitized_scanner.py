"""CI fuzzing: 20,000 mutated inputs for each parser, none ending in a crash, a sanitizer report, a hang
or an exception other than a one-line TracekitError.

* Kineto JSON through the C scanner built with -fsanitize=address,undefined (tests/fuzz/sanitized_scan.py);
* XSpace and nsys SQLite through tracekit.load (tests/fuzz/reader_fuzz.py).
The three run side by side in child processes (about 2-3 minutes on 2 cores).
``python benchmarks/fuzz_long.py`` runs the same harnesses longer.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_shared

FUZZ = Path(__file__).parent / "fuzz"
INPUTS = 20_000


def _libasan() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return ""
    out = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return out if out and Path(out).exists() else ""


@needs_shared
@pytest.mark.slow
def test_twenty_thousand_inputs_per_parser_end_cleanly():
    if not _libasan():
        pytest.skip("no C compiler with AddressSanitizer here")
    runs = {
        "kineto (ASan+UBSan scanner)": [sys.executable, str(FUZZ / "sanitized_scan.py"), str(INPUTS)],
        "xspace": [sys.executable, str(FUZZ / "reader_fuzz.py"), "xspace", str(INPUTS)],
        "nsys": [sys.executable, str(FUZZ / "reader_fuzz.py"), "nsys", str(INPUTS)],
    }
    procs = {name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, cmd in runs.items()}
    problems = []
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=1200)
        print(f"{name}: {out.strip()}")
        if proc.returncode != 0:
            problems.append(f"{name}: exit {proc.returncode}\n{out.strip()}\n{err[-3000:]}")
        elif f"{INPUTS} inputs" not in out:
            problems.append(f"{name}: unexpected summary {out!r}")
    assert not problems, "\n\n".join(problems)
