#!/usr/bin/env bash
# The GPU variant pairs of `benchmarks/whatif_validation.py` in one device call (docs/gpu_session.md):
# install tracekit in place, collect the PyTorch LSTM variants that the pairs compare (quick preset,
# then the `hidden` preset for the fused cuDNN LSTM at fp32 and under AMP), and pack the collections
# into $OUT/pairs.tgz. The replays need no GPU: `python benchmarks/whatif_validation.py --dir EMPTY
# --gpu-dir DIR` runs them here on the unpacked collections.
#
# Each step has its own limit and the sweeps resume, so a step cut short keeps its finished runs.
DEFAULT_WORK=gpu-pairs
# shellcheck source=collectors/gpu_steps.sh
source "$(dirname "$0")/gpu_steps.sh"

step 120 install python3 -m pip install -q --no-deps --no-build-isolation -e .
python3 -m tracekit --version

step "${QUICK_LIMIT:-300}" quick python3 -m tracekit collect torch \
    --variants nn_lstm,nn_lstm_amp,lstmcell_loop,custom_eager,custom_compile,custom_compile_cudagraphs \
    --preset quick --device cuda -o "$WORK/quick" --no-progress
step "${HIDDEN_LIMIT:-120}" hidden python3 -m tracekit collect torch --variants nn_lstm,nn_lstm_amp,lstmcell_loop \
    --preset hidden --device cuda -o "$WORK/hidden" --no-progress

tar czf "$OUT/pairs.tgz" "$WORK"
ls -la "$OUT"
python3 - "$WORK" <<'PY'
import json, pathlib, sys
for m in sorted(pathlib.Path(sys.argv[1]).glob("*/manifest.jsonl")):
    rows = [json.loads(line) for line in m.read_text().splitlines() if line.strip()]
    print(f"{m}: {len(rows)} runs, {sum(r.get('status') == 'ok' for r in rows)} ok")
PY
