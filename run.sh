#!/usr/bin/env bash
# One entry point for a fresh machine: sets up .venv (torch, deps, the compiled extension) if
# needed, then runs the requested job.
#   bash run.sh train   [args]   main job (examples/train_second.py; --help lists its options)
#   bash run.sh test    [args]   the test suite (pytest args pass through; the whole suite runs on
#                                every core, pytest-xdist's -n auto, unless they say otherwise)
#   bash run.sh bench   [args]   side-by-side benchmark against spconv (python -m bench --help)
#   bash run.sh install          installs mx_sparse into the Python environment you are in
#                                (python3 on PATH, or $MXS_PYTHON): a regular install, not editable
# Versions: requirements/pins.txt (Python range, torch, triton, spconv).
# Environment:
#   MXS_DRY_RUN=1        print the command the job would run (paths resolved) and stop; no set-up
#   MXS_PYTHON=PATH      the interpreter that creates .venv (or receives `install`); default python3
#   MXS_TORCH_VERSION=V  install torch==V instead of the pinned version
#   MXS_TORCH_INDEX_URL  the index torch comes from (default: PyTorch's CPU index where no NVIDIA
#                        GPU is present and that index is reachable, else pip's configured indexes)
# Relative paths given to path options (--points, --labels, --config, --checkpoint, --resume,
# --out, ...) and test files given to `test` are resolved from the directory you run this in.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CALLER_DIR="$PWD"
PINS="$ROOT/requirements/pins.txt"
VENV="$ROOT/.venv"
LOG="$ROOT/build/setup.log"   # what pip and the build print (run.sh shows one line per stage)
CPU_INDEX="https://download.pytorch.org/whl/cpu"
# Options whose value is a path (the forms `--opt PATH` and `--opt=PATH` are both resolved).
PATH_OPTS=" --points --labels --config --checkpoint --resume --out --output --out-dir --output-dir \
--save --save-dir --log-dir --plot --json --data --data-dir "

pin() {  # pin NAME -> the version after NAME's ==/>= in requirements/pins.txt
  sed -n "s/^$1[=<>]=\{0,1\}\([^ #]*\).*/\1/p" "$PINS" | head -n1
}
has_nvidia_gpu() { [ -e /dev/nvidia0 ] || { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; }
if has_nvidia_gpu; then TORCH_PIN="$(pin torch-cuda)"; else TORCH_PIN="$(pin torch)"; fi
TORCH_VERSION="${MXS_TORCH_VERSION:-$TORCH_PIN}"
PY_MIN="$(pin python)"

say() { printf '[run.sh] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

# stage "what" cmd...: one line per stage with its duration; the command's own output goes to
# the log (shown when it fails).
stage() {
  local what="$1"; shift
  local t0=$SECONDS
  printf '[run.sh] %s ... ' "$what" >&2
  if "$@" >>"$LOG" 2>&1; then
    printf 'done (%d s)\n' "$((SECONDS - t0))" >&2
  else
    printf 'FAILED (%d s)\n' "$((SECONDS - t0))" >&2
    tail -n 40 "$LOG" >&2
    die "$what failed; full output in $LOG"
  fi
}

abs_path() {  # a path as the caller meant it: relative paths are relative to CALLER_DIR
  case "$1" in
    /*|'') printf '%s' "$1" ;;
    "~"|"~/"*) printf '%s%s' "$HOME" "${1#\~}" ;;
    *) printf '%s/%s' "$CALLER_DIR" "$1" ;;
  esac
}

# resolve_args JOB ARGS... -> ARGS (array) with path values made absolute.
resolve_args() {
  local job="$1"; shift
  ARGS=(); HAS_TEST_PATH=0
  local expect=0 a opt
  for a in "$@"; do
    if [ "$expect" = 1 ]; then ARGS+=("$(abs_path "$a")"); expect=0; continue; fi
    case "$a" in
      --*=*) opt="${a%%=*}"
             if [[ "$PATH_OPTS" == *" $opt "* ]]; then ARGS+=("$opt=$(abs_path "${a#*=}")"); else ARGS+=("$a"); fi ;;
      -*) ARGS+=("$a"); [[ "$PATH_OPTS" == *" $a "* ]] && expect=1 ;;
      *) # pytest's positional args: a test file/folder (optionally ::node) that exists where the caller stands
         if [ "$job" = test ] && [[ "$a" == */* || "$a" == *.py* ]] && [ -e "$(abs_path "${a%%::*}")" ]; then
           ARGS+=("$(abs_path "$a")"); HAS_TEST_PATH=1
         else
           ARGS+=("$a")
         fi ;;
    esac
  done
  [ "$expect" = 0 ] || die "option ${ARGS[${#ARGS[@]}-1]} needs a path after it"
}

python_ok() {  # python_ok PYTHON: is it at least the supported minimum?
  "$1" -c "import sys; want = tuple(int(p) for p in '$PY_MIN'.split('.')); sys.exit(sys.version_info[:2] < want)" 2>/dev/null
}

torch_version_of() { "$1" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true; }

reachable() { "$1" -c "import urllib.request as u; u.urlopen('$2', timeout=5)" >/dev/null 2>&1; }

install_torch() {  # install_torch PYTHON
  local py="$1" args=() from
  if [ -n "${MXS_TORCH_INDEX_URL:-}" ]; then
    args=(--index-url "$MXS_TORCH_INDEX_URL"); from="$MXS_TORCH_INDEX_URL"
  elif has_nvidia_gpu; then
    from="pip's configured indexes (NVIDIA GPU present: the CUDA build)"
  elif reachable "$py" "$CPU_INDEX/torch/"; then
    args=(--index-url "$CPU_INDEX"); from="$CPU_INDEX (no NVIDIA GPU: the CPU build)"
  else
    from="pip's configured indexes ($CPU_INDEX unreachable)"
  fi
  # numpy first (from pip's configured indexes): torch imported without it warns "Failed to
  # initialize NumPy" on every import until it arrives
  "$py" -c 'import numpy' >/dev/null 2>&1 || stage "installing numpy" "$py" -m pip install numpy
  stage "installing torch==$TORCH_VERSION from $from" "$py" -m pip install ${args[@]+"${args[@]}"} "torch==$TORCH_VERSION"
  if ! has_nvidia_gpu && [ "$("$py" -c 'import torch; print(torch.version.cuda is not None)' 2>/dev/null)" = True ]; then
    say "note: pip chose a CUDA build of torch on a machine without an NVIDIA GPU (set MXS_TORCH_INDEX_URL=$CPU_INDEX to get the CPU build)"
  fi
}

triton_requirement() {  # the triton to test with: the one a CUDA build of torch names, else the pin
  "$1" - "$(pin triton)" <<'EOF'
import re, sys
from importlib import metadata
for r in metadata.requires("torch") or []:
    m = re.match(r"^(pytorch-)?triton\s*(==\s*[^;\s]+)", r)
    if m and "extra" not in r:
        print((m.group(1) or "") + "triton" + m.group(2).replace(" ", "")); break
else:
    print("triton==" + sys.argv[1])
EOF
}

# setup PYTHON REQUIREMENTS...: torch, then the requirements (pip only when this set changed since
# the last successful install: a stamp of the set).
setup_env() {
  local py="$1"; shift
  local have; have="$(torch_version_of "$py")"
  if [ -z "$have" ]; then install_torch "$py"
  elif [ "$have" != "$TORCH_VERSION" ]; then say "using the installed torch $have (tested with $TORCH_VERSION)"
  fi
  local reqs=("$@") stamp="" sum
  if [ "$py" = "$VENV/bin/python" ]; then   # the stamp lives in .venv: a new .venv installs again
    sum="$( { printf '%s\n' "${reqs[@]}" | sort; cat "$PINS"; "$py" -c 'import torch; print(torch.__version__)'; } | sha256sum | cut -c1-16)"
    stamp="$VENV/.mxs-requirements-$sum"
  fi
  if [ -z "$stamp" ] || [ ! -e "$stamp" ]; then
    stage "installing ${reqs[*]}" "$py" -m pip install "${reqs[@]}"
    [ -z "$stamp" ] || : >"$stamp"
  fi
}

# The Open3D-ML oracle of tests/test_open3d_surface.py (optional: those tests skip, saying why, when
# it does not import). open3d-cpu without its dependencies (its GUI/notebook stack is not needed;
# the ml.torch import asks for plotly and dash), and the system library libusb-1.0 its binary links,
# through apt where this runs as root and it is missing. Any failure here only skips those tests.
install_open3d_oracle() {
  local py="$1" t0=$SECONDS
  "$py" -c 'import open3d.ml.torch' >/dev/null 2>&1 && return 0
  say "installing the Open3D oracle (open3d-cpu==$(pin open3d-cpu); optional, output in $LOG)"
  if ! ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0' && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libusb-1.0-0; } >>"$LOG" 2>&1 || true
  fi
  { "$py" -m pip install --no-deps "open3d-cpu==$(pin open3d-cpu)" &&
    "$py" -m pip install "plotly==$(pin plotly)" "dash==$(pin dash)"; } >>"$LOG" 2>&1 || true
  if "$py" -c 'import open3d.ml.torch' >/dev/null 2>&1; then say "Open3D oracle ready ($((SECONDS - t0)) s)"
  else say "the Open3D oracle does not import: tests/test_open3d_surface.py's comparisons with it will be skipped"
  fi
}

# extension_stale PYTHON: prints why mx_sparse/_C*.so must be (re)built and succeeds, or fails when
# it is up to date: the digest of the C++ sources and setup.py against the stamp the last build
# wrote (tools/extension_stamp.py), so files written by tests or tools and timestamps never count.
extension_stale() {
  local why
  why="$("$1" "$ROOT/tools/extension_stamp.py" check)" && return 1
  printf '%s' "$why"
}

build_extension() {  # build_extension PYTHON: rebuilds when a C++ source or setup.py changed
  local py="$1" why
  if why="$(extension_stale "$py")"; then
    say "the C++ extension needs a build: $why"
    stage "building the C++ extension (MAX_JOBS=${MAX_JOBS:-2}; the first build takes 5-10 min on 2 cores)" \
      env MAX_JOBS="${MAX_JOBS:-2}" "$py" -m pip install --no-build-isolation -e "$ROOT"
  fi
}

venv_setup() {  # the .venv this script's jobs run in
  local base="${MXS_PYTHON:-python3}"
  mkdir -p "$ROOT/build" && : >"$LOG"
  if [ ! -x "$VENV/bin/python" ]; then
    command -v "$base" >/dev/null 2>&1 || die "no $base on PATH (set MXS_PYTHON to a Python >= $PY_MIN)"
    python_ok "$base" || die "$("$base" -V 2>&1) is too old: torch $TORCH_VERSION needs Python >= $PY_MIN (set MXS_PYTHON)"
    local flags=() have; have="$(torch_version_of "$base")"
    if [ "${have%.*}" = "${TORCH_VERSION%.*}" ]; then
      flags=(--system-site-packages)   # reuse the torch already installed for this Python
      say "reusing torch $have installed for $base"
    fi
    stage "creating .venv with $("$base" -V 2>&1)" "$base" -m venv ${flags[@]+"${flags[@]}"} "$VENV"
  fi
  python_ok "$VENV/bin/python" || die ".venv's $("$VENV/bin/python" -V 2>&1) is below $PY_MIN; remove .venv"
  setup_env "$VENV/bin/python" numpy pybind11 ninja tqdm "$@"
  build_extension "$VENV/bin/python"
}

# The trap of a clone folder named mx_sparse: a script run from the folder holding it puts that
# folder on sys.path first, and Python imports the clone (no __init__.py) as an empty namespace
# package where mx_sparse is not installed, or installed editable as in .venv (the editable
# import hook runs after the namespace package is found): "cannot import name ... (unknown
# location)". A regular install is found first; `python -P` (3.11+) avoids the trap too.
check_importable_beside_clone() {
  local py="$1"
  if ! (cd "$(dirname "$ROOT")" && "$py" -c "from mx_sparse import SubMConv3d") >/dev/null 2>&1; then
    say "warning: from $(dirname "$ROOT"), \`import mx_sparse\` does not find the installed package;"
    say "  a script there imports the folder $(basename "$ROOT")/ as a namespace package. Run it with \`$py -P\` (Python 3.11+) or from another folder."
  fi
}

# workers_args PYTEST_ARGS...: for the whole suite, "-n auto" (pytest-xdist: one worker per core;
# the suite is mostly single-threaded Python: 23:37 -> 15:30 on 2 cores) unless the arguments choose
# the workers (-n N, --numprocesses, -p no:xdist), want a test's output on the terminal (-s) or the
# debugger (--pdb, --trace: one process). Named test files run in one process.
workers_args() {
  local a
  for a in "$@"; do
    case "$a" in -n|-n*|--numprocesses|--numprocesses=*|no:xdist|-s|--capture=no|--pdb|--trace) return 0 ;; esac
  done
  printf '%s\n' -n auto
}

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
}

job="${1:-}"; shift || true
case "$job" in
  -h|--help|help) usage; exit 0 ;;
  train|test|bench|install) ;;
  *) usage >&2; exit 2 ;;
esac
resolve_args "$job" "$@"
export MXS_CALLER_DIR="$CALLER_DIR"
PY="$VENV/bin/python"
case "$job" in
  train) CMD=("$PY" examples/train_second.py ${ARGS[@]+"${ARGS[@]}"}) ;;
  test)  if [ "$HAS_TEST_PATH" = 1 ]; then CMD=("$PY" -m pytest ${ARGS[@]+"${ARGS[@]}"})
         else CMD=("$PY" -m pytest tests $(workers_args ${ARGS[@]+"${ARGS[@]}"}) ${ARGS[@]+"${ARGS[@]}"}); fi ;;
  bench) CMD=("$PY" -m bench ${ARGS[@]+"${ARGS[@]}"}) ;;
  # a regular (not editable) install: a regular package anywhere on sys.path wins over the
  # namespace package a clone folder named mx_sparse makes beside a script; an editable install's
  # import hook comes after that namespace package and loses (see check_importable_beside_clone)
  install) CMD=("${MXS_PYTHON:-python3}" -m pip install --no-build-isolation "$ROOT") ;;
esac
if [ "${MXS_DRY_RUN:-0}" = 1 ]; then
  printf 'cd %q &&' "$ROOT"; printf ' %q' "${CMD[@]}"; printf '\n'
  # what the set-up would do about the extension (stderr; any Python 3 computes the digest)
  if [ "$job" != install ] && why="$(extension_stale "$( [ -x "$PY" ] && echo "$PY" || echo "${MXS_PYTHON:-python3}")")"; then
    say "dry run: the C++ extension would be built ($why)"
  elif [ "$job" != install ]; then
    say "dry run: the C++ extension is up to date (no build)"
  fi
  exit 0
fi
cd "$ROOT"
case "$job" in
  train) venv_setup matplotlib ;;   # matplotlib: the main job's loss/AP plot
  # triton: the CUDA backend's kernels run in its interpreter and compile to sm_80/sm_90 cubins in tests
  test)  venv_setup pytest pytest-xdist hypothesis "spconv==$(pin spconv)" mmengine
         setup_env "$PY" "$(triton_requirement "$PY")"
         install_open3d_oracle "$PY" ;;
  bench) venv_setup matplotlib "spconv==$(pin spconv)" ;;
  install)
    base="${MXS_PYTHON:-python3}"; mkdir -p "$ROOT/build" && : >"$LOG"
    python_ok "$base" || die "$("$base" -V 2>&1) is too old: torch $TORCH_VERSION needs Python >= $PY_MIN"
    say "installing into $("$base" -c 'import sys; print(sys.prefix)')"
    setup_env "$base" numpy pybind11 ninja tqdm
    where="$(cd / && "$base" -c 'import mx_sparse, os; print(os.path.dirname(os.path.dirname(mx_sparse.__file__)))' 2>/dev/null || true)"
    if [ "$where" = "$ROOT" ] && ! extension_stale "$base" >/dev/null; then
      say "mx_sparse from this clone is installed there already and its extension is up to date"
    else
      stage "building and installing mx_sparse (the first build takes 5-10 min on 2 cores)" \
        env MAX_JOBS="${MAX_JOBS:-2}" "${CMD[@]}"
    fi
    check_importable_beside_clone "$base"
    say "done: $("$base" -c 'import mx_sparse; print("mx_sparse", mx_sparse.__version__, "at", mx_sparse.__path__[0])')"
    exit 0 ;;
esac
say "running: ${CMD[*]}"
exec "${CMD[@]}"
