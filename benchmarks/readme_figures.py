"""The README's `tracekit run` figures, from a real run: wall time, run counts, CPU, findings excerpt.

    python benchmarks/readme_figures.py              # fresh `tracekit run` (quick preset) in a temp dir
    python benchmarks/readme_figures.py --from DIR   # figures of an existing run directory

Rewrites the block between the ``run-figures`` markers in README.md (``--dry-run`` prints it
instead), so no figure there is typed by hand. The wall time is that of the `tracekit run` process
as a whole, start-up included, measured here; with ``--from`` it is the run's own record.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- run-figures:begin (benchmarks/readme_figures.py) -->", "<!-- run-figures:end -->"
EXCERPT = ("pytorch_vs_native", "lm_forward:tf/lm_forward", "lm_forward:torch/lm_forward", "cudnn_vs_cell", "gemm_share")


def report_data(run_dir: Path) -> dict:
    html = (run_dir / "report.html").read_text()
    return json.loads(html.split('<script type="application/json" id="tracekit-data">')[1].split("</script>")[0])


def block(data: dict, wall_s: float, preset: str) -> str:
    facts = data["facts"]
    not_ok = facts["runs_not_ok"]
    skipped = sum(1 for r in not_ok if r["status"] == "skipped")
    failed = sum(1 for r in not_ok if r["status"] == "failed")
    minutes, seconds = divmod(round(wall_s), 60)
    lines = [BEGIN,
             f"Measured on {facts['device_name']} ({facts['device']}, 2 cores), `tracekit run --preset {preset}`: "
             f"{facts['runs_ok']} runs ok, {skipped} skipped, {failed} failed, in {minutes} min {seconds:02d} s "
             "(wall time of the whole command). An excerpt of its table:",
             "",
             "| study | finding | published | measured here | comparable |",
             "|:---|:---|:---|:---|:---|"]
    by_key = {f["key"]: f for f in data["findings"]}
    for key in EXCERPT:
        f = by_key.get(key)
        if f:
            lines.append(f"| {f['study']} | {f['claim']} | {f['published']} | {f['measured']} | "
                         f"{'yes' if f['comparable'] else 'no (needs a GPU)'} |")
    if not_ok:
        lines += ["", "Not run here: " + "; ".join(sorted({f"{r['run_id'].split('/')[1]} ({r['reason']})"
                                                           for r in not_ok})) + "."]
    return "\n".join(lines + [END])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="run_dir", type=Path, help="an existing `tracekit run` directory")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--dry-run", action="store_true", help="print the block; leave README.md alone")
    args = parser.parse_args()
    if args.run_dir:
        run_dir, data = args.run_dir, report_data(args.run_dir)
        wall_s = data["facts"]["wall_s"]
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="tracekit-run-")) / "run"
        started = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", "tracekit", "run", "--preset", args.preset, "-o", str(run_dir),
                               "--no-progress"]).returncode
        wall_s = time.perf_counter() - started
        if code != 0:
            print(f"tracekit run exited {code}; see {run_dir}", file=sys.stderr)
            return 1
        data = report_data(run_dir)
    text = block(data, wall_s, data["facts"]["preset"])
    if args.dry_run:
        print(text)
        return 0
    readme = (REPO / "README.md").read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        print(f"README.md has no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    (REPO / "README.md").write_text(pattern.sub(lambda _: text, readme))
    print(text)
    print(f"README.md updated from {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
