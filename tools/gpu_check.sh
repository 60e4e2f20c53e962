#!/usr/bin/env bash
# The prepared GPU check (bench/gpu_check.py), one command for a short GPU session: pytest -m cuda
# with a timeout, then the GPU benchmark (python -m bench.gpu_profile: each part in its own
# subprocess with a hard timeout, JSON lines into --out). Needs a CUDA GPU; exits 2 without one,
# before running anything. Options: bash tools/gpu_check.sh --help; the benchmark's after --.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec "$PY" -m bench.gpu_check "$@"
