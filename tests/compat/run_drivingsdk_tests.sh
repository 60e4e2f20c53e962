#!/usr/bin/env bash
# Runs DrivingSDK's own sparse-convolution tests (Ascend/DrivingSDK, tests/torch) unmodified
# against mx_sparse on CPU:
#   bash tests/compat/run_drivingsdk_tests.sh DRIVINGSDK_DIR [pytest args]
# DRIVINGSDK_DIR is a checkout (git clone https://github.com/Ascend/DrivingSDK DIR, or any source tree).
# torch_npu is a test-only stand-in (tests/compat/drivingsdk/torch_npu), mx_driving is
# mx_sparse's surface (mx_sparse.patch_mx_driving()); cases too large for this machine are
# scaled as tests/compat/drivingsdk/drivingsdk_plugin.py documents. Golden caches go to a
# temporary directory. Ends with pytest's summary line. Not part of CI (needs the checkout).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SDK="${1:?usage: run_drivingsdk_tests.sh DRIVINGSDK_DIR [pytest args]}"; shift
SDK="$(cd "$SDK" && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
TESTS=(test_sparse_conv3d.py test_sparse_conv3d_grad.py test_sparse_inverse_conv3d.py
       test_subm_sparse_conv3d.py test_subm_sparse_conv3d_grad.py)
for t in "${TESTS[@]}"; do [ -f "$SDK/tests/torch/$t" ] || { echo "missing $SDK/tests/torch/$t" >&2; exit 2; }; done
# The helper beside the tests (cv_fused_double_benchmark_compare.py) imports these two.
"$PY" -c "import prettytable, pydantic" 2>/dev/null || "$PY" -m pip install -q prettytable pydantic
CACHE="$(mktemp -d)"
trap 'rm -rf "$CACHE"' EXIT
cd "$SDK/tests/torch"
status=0
MXDRIVING_CACHE_PATH="$CACHE" PYTHONPATH="$HERE/drivingsdk${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pytest -p drivingsdk_plugin -p no:cacheprovider -rA --tb=short "$@" "${TESTS[@]}" || status=$?
exit "$status"
