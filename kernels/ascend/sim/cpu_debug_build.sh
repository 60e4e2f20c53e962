#!/usr/bin/env bash
# Build a CPU-debug executable from AscendC kernel + harness sources against the emulator.
#   kernels/ascend/sim/cpu_debug_build.sh OUT SOURCE... [-- EXTRA_GXX_FLAGS...]
# The emulator runtime (src/*.cpp) is compiled once into build/libascend_sim.a (rebuilt when
# any emulator source or header changes; guarded by a lock so parallel callers are safe).
set -euo pipefail
SIM_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 2 ]; then
    echo "usage: $0 OUT SOURCE... [-- EXTRA_GXX_FLAGS...]" >&2
    exit 2
fi
OUT="$1"; shift
SOURCES=(); EXTRA=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; EXTRA=("$@"); break; fi
    SOURCES+=("$1"); shift
done
CXX="${CXX:-g++}"
FLAGS=(-std=c++17 -O1 -g -pthread -I "$SIM_DIR/include")
BUILD="$SIM_DIR/build"
LIB="$BUILD/libascend_sim.a"
mkdir -p "$BUILD/obj"
(
    flock 9
    newest_dep=$(ls -t "$SIM_DIR"/src/*.cpp "$SIM_DIR"/include/*.h "$SIM_DIR"/include/*/*.h "$SIM_DIR/cpu_debug_build.sh" | head -1)
    if [ ! -f "$LIB" ] || [ "$newest_dep" -nt "$LIB" ]; then
        objs=()
        pids=()
        for src in "$SIM_DIR"/src/*.cpp; do
            obj="$BUILD/obj/$(basename "${src%.cpp}").o"
            "$CXX" "${FLAGS[@]}" -c "$src" -o "$obj" &
            pids+=($!)
            objs+=("$obj")
        done
        for p in "${pids[@]}"; do wait "$p"; done
        rm -f "$LIB.tmp"
        ar rcs "$LIB.tmp" "${objs[@]}"
        mv "$LIB.tmp" "$LIB"
    fi
) 9>"$BUILD/.lock"
# link to a temporary name first so concurrent builds of the same OUT never expose a partial file
"$CXX" "${FLAGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} "${SOURCES[@]}" "$LIB" -o "$OUT.tmp.$$"
mv -f "$OUT.tmp.$$" "$OUT"
