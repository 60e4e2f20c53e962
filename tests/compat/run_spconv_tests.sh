#!/usr/bin/env bash
# Runs spconv's own convolution tests (traveller59/spconv, test/test_conv.py: conv, deconv,
# max-pool, global max-pool; test/test_multi_impl.py) unmodified against mx_sparse on CPU:
#   bash tests/compat/run_spconv_tests.sh SPCONV_DIR [pytest args]
# SPCONV_DIR is a checkout (git clone https://github.com/traveller59/spconv DIR, or any source
# tree). `spconv` is mx_sparse's surface (patch_spconv()); the tests' cuda:0 is the CPU where
# torch has no CUDA (tests/compat/spconv_suite/spconv_plugin.py). Ends with pytest's summary
# line. Not part of CI (needs the checkout); tests/compat/test_spconv_suite.py runs it when
# MXS_SPCONV_SRC is set.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SRC="${1:?usage: run_spconv_tests.sh SPCONV_DIR [pytest args]}"; shift
SRC="$(cd "$SRC" && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
TESTS=(test_conv.py test_multi_impl.py)
for t in "${TESTS[@]}"; do [ -f "$SRC/test/$t" ] || { echo "missing $SRC/test/$t" >&2; exit 2; }; done
cd "$SRC/test"
# the checkout's own spconv package must not shadow the surface: only the plugin folder and
# mx_sparse's root go on the path, and the tests run from test/ (not the checkout root)
PYTHONPATH="$HERE/spconv_suite:$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pytest -p spconv_plugin -p no:cacheprovider -rA --tb=short --rootdir "$SRC/test" "$@" "${TESTS[@]}"
