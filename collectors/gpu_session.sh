#!/usr/bin/env bash
# One lent-GPU session in one command (docs/gpu_session.md): install tracekit in place, run the
# quick study (PyTorch + native baselines) on CUDA, the `hidden` preset for cuDNN's algorithm
# boundary and the cuBLAS-vs-cuDNN gap, and two Nsight Systems captures; pack everything into
# $OUT/gpu.tgz (split into 15 MB parts when larger, the device tool's file limit).
#
# Every step has its own time limit and the sweeps resume, so a step cut short keeps its finished
# runs; a second call with the unpacked directory carried as `gpu-work` goes on from there.
DEFAULT_WORK=gpu-work
# shellcheck source=collectors/gpu_steps.sh
source "$(dirname "$0")/gpu_steps.sh"
NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"

step 90 install python3 -m pip install -q --no-deps --no-build-isolation -e .
python3 -m tracekit --version

step "${STUDY_LIMIT:-270}" study python3 -m tracekit run --frameworks torch,native --preset quick --device cuda \
    -o "$WORK/study" --no-nsys --no-progress
step 100 hidden-torch python3 -m tracekit collect torch --variants nn_lstm,nn_lstm_amp,lstmcell_loop \
    --preset hidden --device cuda -o "$WORK/hidden" --no-progress
step 60 hidden-native python3 -m tracekit baseline --preset hidden --device cuda --dtype fp32,fp16 \
    -o "$WORK/hidden" --no-progress
# cuDNN's algorithms side by side around the persistent kernel's limit (hidden 192), one JSON line each.
BUILD=$(python3 -m tracekit baseline --build-only --device cuda 2>/dev/null | tail -1)
if [ -x "$BUILD/lstm_cudnn" ] && [ ! -s "$WORK/cudnn_algos.jsonl" ]; then
    export LD_LIBRARY_PATH=$(python3 -c "from tracekit.collectors.native import library_path; print(library_path())")
    : > "$WORK/cudnn_algos.jsonl"
    for dtype in fp32 fp16; do
        for algo in standard persist_small_h persist; do
            for h in 128 192 256 512; do
                timeout 30 "$BUILD/lstm_cudnn" --config $h,64,100 --dtype $dtype --algo $algo --warmup 5 --repeats 30 \
                    >> "$WORK/cudnn_algos.jsonl" 2>> "$WORK/cudnn_algos.err"
            done
        done
    done
    echo "== cudnn algorithms: $(wc -l < "$WORK/cudnn_algos.jsonl") runs"
fi
if [ -n "$NSYS" ]; then
    # A bare capture of a few matrix products first, watched: the target-only nsys has been seen
    # streaming its .qdstrm without end in a VM (1.9 GB in 95 s with CPU sampling on).
    mkdir -p "$WORK/nsys-probe"
    ("$NSYS" profile --sample=none --cpuctxsw=none -t cuda,nvtx --force-overwrite=true -o "$WORK/nsys-probe/matmul" \
        python3 -c "import torch; x = torch.randn(1024, 1024, device='cuda'); [x @ x for _ in range(20)]; torch.cuda.synchronize()" \
        > "$WORK/nsys-probe/log" 2>&1; echo "nsys exit $?" >> "$WORK/nsys-probe/log") &
    probe=$!
    for i in $(seq 60); do
        sleep 1
        kill -0 $probe 2>/dev/null || break
        if [ "$(du -sm "$WORK/nsys-probe" | cut -f1)" -gt 200 ]; then echo "nsys probe: over 200 MB after ${i}s"; break; fi
    done
    pkill -f "nsys profile" ; sleep 2; pkill -9 -f nsys
    ls -la "$WORK/nsys-probe"; cat "$WORK/nsys-probe/log"
    if grep -q "nsys exit 0" "$WORK/nsys-probe/log"; then
        step 90 nsys python3 -m tracekit collect torch --variants nn_lstm --preset tiny --device cuda \
            --profiler nsys --nsys "$NSYS" -o "$WORK/nsys" --no-progress
    fi
fi
# Nothing large comes back (the device tool returns 8 files of 15 MB at most).
find "$WORK" -type f -size +30M -print -delete

tar czf "$OUT/gpu.tgz" "$WORK"
if [ "$(stat -c %s "$OUT/gpu.tgz")" -gt 15000000 ]; then
    split -b 15000000 -d "$OUT/gpu.tgz" "$OUT/gpu.tgz.part" && rm "$OUT/gpu.tgz"
fi
ls -la "$OUT"
python3 - "$WORK" <<'PY'
import json, pathlib, sys
for m in sorted(pathlib.Path(sys.argv[1]).glob("*/manifest.jsonl")):
    rows = [json.loads(line) for line in m.read_text().splitlines() if line.strip()]
    print(f"{m}: {len(rows)} runs, {sum(r.get('error') is None for r in rows)} without error")
PY
