#!/usr/bin/env bash
# One entry point for a fresh machine: sets up .venv (torch CPU build, deps, the
# compiled extension) if needed, then runs the requested job.
#   bash run.sh train [args]   main job: SECOND backbone training on a generated LiDAR scene
#   bash run.sh test  [args]   the test suite (pytest args pass through)
#   bash run.sh bench [args]   side-by-side benchmark against spconv 2.3.8
set -euo pipefail
cd "$(dirname "$0")"
PY=.venv/bin/python
TORCH_VERSION="${MXS_TORCH_VERSION:-2.13.0}"   # CPU build; pinned so pip never fetches a CUDA wheel

setup() {
  [ -x "$PY" ] || python3 -m venv .venv
  if ! "$PY" -c "import torch" 2>/dev/null; then
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q "torch==$TORCH_VERSION"
  fi
  "$PY" -m pip install -q numpy pybind11 ninja tqdm "$@"
  # Rebuild the extension only when a source is newer than the built module (kernels/cuda and
  # kernels/accelerator are Python, used in place by the editable install).
  local so; so=$(ls mx_sparse/_C*.so 2>/dev/null | head -n1 || true)
  if [ -z "$so" ] || [ -n "$(find kernels setup.py -newer "$so" -type f -not -path 'kernels/cuda/*' -not -path 'kernels/accelerator/*' | head -n1)" ]; then
    MAX_JOBS="${MAX_JOBS:-2}" "$PY" -m pip install -q --no-build-isolation -e .
  fi
}

job="${1:-}"; shift || true
case "$job" in
  train) setup; exec "$PY" examples/train_second.py "$@" ;;
  # triton: the CUDA backend's kernels run in its interpreter and compile to sm_80/sm_90 cubins in tests
  test)  setup pytest hypothesis "spconv==2.3.8" mmengine "triton==3.8.0"; exec "$PY" -m pytest tests "$@" ;;
  bench) setup matplotlib "spconv==2.3.8"; exec "$PY" -m bench "$@" ;;
  *) echo "usage: bash run.sh {train|test|bench} [args...]" >&2; exit 2 ;;
esac
