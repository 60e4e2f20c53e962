#!/usr/bin/env bash
# One command from a clone to installed NPU kernels, on a machine with CANN >= 8.0 (environment
# sourced: source /usr/local/Ascend/ascend-toolkit/set_env.sh) and torch_npu:
#     bash kernels/ascend/build.sh [--soc Ascend910B2] [--skip-binding] [--dry-run]
# Generates and builds the CANN custom-op project of the five AscendC ops, installs the op package
# inside the mx_sparse package, then builds the torch_npu binding. See docs/en/ascend.md
# ("Building on Atlas A2") and kernels/ascend/build_tools/build_ops.py for the steps.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$HERE/build_tools/build_ops.py" "$@"
