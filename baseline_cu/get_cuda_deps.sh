#!/usr/bin/env bash
# cuBLAS and cuDNN headers and link libraries from PyPI's wheels (the ones PyTorch's GPU build
# uses), unpacked into DEST/include and DEST/lib: enough to compile and link the CUDA baselines
# on a machine with nvcc and no GPU, without installing 2 GB of wheels into site-packages.
#
#   baseline_cu/get_cuda_deps.sh [DEST]     # default: ${XDG_CACHE_HOME:-~/.cache}/tracekit/cuda-deps
#
# Only libcudnn.so.9 (cuDNN 9's dispatcher, which loads its engine libraries at run time) and
# libcublas.so.13 are kept; a GPU run needs the full libraries (the same wheels installed, or the
# toolkit's), found through LD_LIBRARY_PATH.
set -euo pipefail
dest="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/tracekit/cuda-deps}"
if [ -f "$dest/include/cudnn.h" ] && [ -f "$dest/include/cublas_v2.h" ] && [ -e "$dest/lib/libcudnn.so" ]; then
  echo "$dest"; exit 0
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
python -m pip download -q --no-deps -d "$work" "nvidia-cublas>=13,<14" "nvidia-cudnn-cu13>=9,<10" >&2
mkdir -p "$dest/include" "$dest/lib"
for wheel in "$work"/*.whl; do
  python - "$wheel" "$dest" <<'PY'
import sys, zipfile, pathlib
wheel, dest = sys.argv[1], pathlib.Path(sys.argv[2])
keep_libs = {"libcudnn.so.9", "libcublas.so.13"}
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        parts = pathlib.PurePosixPath(info.filename).parts
        if "include" in parts and info.filename.endswith((".h", ".hpp")):
            target = dest / "include" / parts[-1]
        elif "lib" in parts and parts[-1] in keep_libs:
            target = dest / "lib" / parts[-1]
        else:
            continue
        target.write_bytes(z.read(info))
PY
done
ln -sf libcudnn.so.9 "$dest/lib/libcudnn.so"
ln -sf libcublas.so.13 "$dest/lib/libcublas.so"
echo "$dest"
