#!/usr/bin/env bash
# The prepared GPU check (bench/gpu_check.py): pytest -m cuda and a training step timed beside
# spconv / spconv-Triton. Needs a CUDA GPU; exits 2 without one. Options: bash tools/gpu_check.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec "$PY" -m bench.gpu_check "$@"
