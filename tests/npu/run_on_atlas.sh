#!/usr/bin/env bash
# On a machine with an Atlas A2 (CANN >= 8.0 environment sourced, torch_npu importable, an NPU visible):
#     bash tests/npu/run_on_atlas.sh [--no-build] [--drivingsdk DIR] [--soc Ascend910B2]
# 1. builds and installs the op package and the binding (kernels/ascend/build.sh),
# 2. shows what mx_sparse found (python -m mx_sparse),
# 3. runs the op tests on `npu` tensors against the CPU backend (tests/npu/test_npu_vs_cpu.py),
# 4. runs DrivingSDK's sparse-conv tests on `npu` with mx_sparse as mx_driving (--drivingsdk DIR:
#    a DrivingSDK checkout; its tests/torch),
# 5. times a training step beside mx_driving's SparseConv3d/SubMConv3d when mx_driving is installed,
# then prints ONE summary block to paste into an issue. Without an NPU it exits 3 with "no NPU".
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
BUILD=1; SDK=""; SOC_ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) BUILD=0; shift ;;
        --drivingsdk) SDK="${2:?--drivingsdk needs a DrivingSDK checkout}"; shift 2 ;;
        --soc) SOC_ARGS=(--soc "${2:?--soc needs a SoC name}"); shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "run_on_atlas.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

probe=$("$PY" - <<'PYEOF' 2>&1
try:
    import torch
    import torch_npu  # noqa: F401
except Exception as e:  # noqa: BLE001
    print(f"NO: torch_npu is not importable ({type(e).__name__}: {e})")
else:
    n = torch.npu.device_count() if torch.npu.is_available() else 0
    print(f"YES: {n} NPU(s), {torch.npu.get_device_name(0)}, torch {torch.__version__}, torch_npu {torch_npu.__version__}"
          if n else "NO: torch_npu is importable but no NPU is visible (driver / ASCEND_RT_VISIBLE_DEVICES)")
PYEOF
)
if [[ "$probe" != YES:* ]]; then
    echo "run_on_atlas.sh: no NPU here -- ${probe#NO: }"
    echo "Nothing was built or run. This script needs an Atlas A2 with CANN >= 8.0 (source set_env.sh) and torch_npu."
    exit 3
fi

LOG="$(mktemp -d)"
declare -A RESULT
step() {  # step NAME COMMAND...: runs, keeps the log, records ok/FAILED(rc)
    local name="$1"; shift
    echo "=== $name: $*"
    "$@" 2>&1 | tee "$LOG/$name.log"
    local rc=${PIPESTATUS[0]}
    RESULT[$name]=$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc, log $LOG/$name.log)")
}
cd "$ROOT"
if [ "$BUILD" -eq 1 ]; then step build bash kernels/ascend/build.sh ${SOC_ARGS[@]+"${SOC_ARGS[@]}"}; else RESULT[build]="skipped (--no-build)"; fi
step config "$PY" -m mx_sparse
step op_tests "$PY" -m pytest -p no:cacheprovider -q "$HERE/test_npu_vs_cpu.py"
if [ -n "$SDK" ]; then
    SDK="$(cd "$SDK" && pwd)"
    pushd "$SDK/tests/torch" >/dev/null
    PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" step drivingsdk "$PY" -m pytest -p mx_driving_is_mx_sparse \
        -p no:cacheprovider -q test_sparse_conv3d.py test_sparse_conv3d_grad.py test_sparse_inverse_conv3d.py \
        test_subm_sparse_conv3d.py test_subm_sparse_conv3d_grad.py
    popd >/dev/null
else
    RESULT[drivingsdk]="skipped (pass --drivingsdk DIR)"
fi
step bench "$PY" "$HERE/bench_vs_mx_driving.py"

echo
echo "----- mx_sparse on Atlas: summary (paste into an issue) -----"
echo "commit     $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "device     ${probe#YES: }"
echo "CANN       ${ASCEND_HOME_PATH:-unset}"
grep -h "^  CANN\|^  op package\|^  binding" "$LOG/config.log" 2>/dev/null | sed 's/^  /           /'
for k in build config op_tests drivingsdk bench; do printf '%-10s %s\n' "$k" "${RESULT[$k]:-not run}"; done
grep -h -E "passed|failed|error" "$LOG/op_tests.log" 2>/dev/null | tail -1 | sed 's/^/op tests   /'
grep -h -E "passed|failed|error" "$LOG/drivingsdk.log" 2>/dev/null | tail -1 | sed 's/^/drivingsdk /'
grep -h "^BENCH" "$LOG/bench.log" 2>/dev/null
echo "-------------------------------------------------------------"
