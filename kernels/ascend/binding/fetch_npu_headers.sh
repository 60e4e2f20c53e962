#!/usr/bin/env bash
# Fetch the headers the NPU binding is type-checked against, without installing anything:
# torch 2.14 (include/ tree of the PyPI wheel) + torch-npu 2.14.0 (torch_npu/include: torch_npu,
# ACL and op-plugin headers). Unpacked into build/npu_headers at the repository root (gitignored,
# outside kernels/: nothing but sources lives there); idempotent.
#   kernels/ascend/binding/fetch_npu_headers.sh [PYTHON]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$(cd "$HERE/../../.." && pwd)/build/npu_headers"
PY="${1:-python3}"
if [ -f "$OUT/.complete" ]; then echo "$OUT"; exit 0; fi
mkdir -p "$OUT/wheels"
"$PY" -m pip download --no-deps --quiet -d "$OUT/wheels" "torch==2.14.*" "torch-npu==2.14.0" >&2
cd "$OUT"
for w in wheels/torch-2.14*.whl; do unzip -q -o "$w" 'torch/include/*'; done
for w in wheels/torch_npu-2.14.0*.whl; do unzip -q -o "$w" 'torch_npu/include/*'; done
rm -rf wheels
touch .complete
echo "$OUT"
