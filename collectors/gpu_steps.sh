# Sourced by the lent-GPU scripts (gpu_session.sh, gpu_whatif_pairs.sh): $OUT and $WORK made, the
# session's output teed to $OUT/session.log, `step` to run each part with its own time limit, and
# the machine's GPU and PyTorch named at the top of the log. WORK defaults to the caller's
# DEFAULT_WORK.
set -u
OUT=${OUT:-/tmp/gpu-out}
WORK=${GPU_WORK:-$DEFAULT_WORK}
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/session.log") 2>&1
export PYTHONUNBUFFERED=1

step() {  # step SECONDS NAME COMMAND...: run with a limit, log the outcome, never stop the session
    local limit=$1 name=$2; shift 2
    local t0=$SECONDS
    echo "== $name (limit ${limit}s)"
    timeout -k 5 "$limit" "$@"
    echo "== $name: exit $? after $((SECONDS - t0))s"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())"
