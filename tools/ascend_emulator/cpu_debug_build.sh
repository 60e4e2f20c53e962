#!/usr/bin/env bash
# Build a CPU-debug executable from AscendC kernel + harness sources against the emulator.
#   tools/ascend_emulator/cpu_debug_build.sh [--shared] OUT [-k] SOURCE... [-- EXTRA_GXX_FLAGS...]
# --shared: OUT is a shared library (everything compiled with -fPIC -fvisibility=hidden, linked with -shared) for
# launching the kernels in-process (tools/ascend_emulator); its runtime library is kept apart
# (build/pic/) so the executables' flags stay as they are.
# The emulator runtime (src/*.cpp) is compiled once into build/libascend_sim.a (rebuilt when
# any emulator source or header changes; guarded by a lock so parallel callers are safe).
# Kernel translation units -- sources in a directory named op_kernel (the CANN op layout) or
# preceded by -k -- get the scalar-block instrumentation of src/scalar_count.cpp (see
# compile_kernel_tu below); every other source (harnesses, host tiling) is compiled plainly.
set -euo pipefail
SIM_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SHARED=0
if [ "${1:-}" = "--shared" ]; then SHARED=1; shift; fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [--shared] OUT [-k] SOURCE... [-- EXTRA_GXX_FLAGS...]" >&2
    exit 2
fi
OUT="$1"; shift
SOURCES=(); KERNEL_SOURCES=(); EXTRA=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; EXTRA=("$@"); break; fi
    if [ "$1" = "-k" ]; then KERNEL_SOURCES+=("$2"); shift 2; continue; fi
    case "$1" in
        */op_kernel/*) KERNEL_SOURCES+=("$1") ;;
        *) SOURCES+=("$1") ;;
    esac
    shift
done
CXX="${CXX:-g++}"
FLAGS=(-std=c++17 -O1 -g -pthread -I "$SIM_DIR/include")
# mx_sparse's op sources include each other by file name only (CANN's op build copies kernel
# sources into one flat op_kernel directory and host sources into one flat op_host directory), so
# a build from kernels/ascend/<op>/op_{kernel,host} gets every op's op_host folder and the shared
# common/op_{kernel,host} folders as include directories, plus kernels/common (the backend-neutral
# arithmetic the op_host tiling shares with the CPU kernels).
op_include_dirs() {
    local src asc d
    for src in ${SOURCES[@]+"${SOURCES[@]}"} ${KERNEL_SOURCES[@]+"${KERNEL_SOURCES[@]}"}; do
        src=$(realpath -m -s "$src")
        [[ "$src" =~ ^(.*/kernels/ascend)/[^/]+/op_(kernel|host)/[^/]+$ ]] || continue
        asc="${BASH_REMATCH[1]}"
        printf '%s\n' "$asc/common/op_kernel" "$asc/../common"
        for d in "$asc"/*/op_host; do printf '%s\n' "$d"; done
        return
    done
}
while IFS= read -r d; do [ -n "$d" ] && FLAGS+=(-I "$d"); done < <(op_include_dirs)
# Kernel TUs: GCC calls __sanitizer_cov_trace_pc at the start of every basic block. No
# exceptions, as in device code (a call that may throw would end a block).
KERNEL_FLAGS=(-fsanitize-coverage=trace-pc -fno-exceptions)
BUILD="$SIM_DIR/build"
LINK_FLAGS=()
if [ "$SHARED" = 1 ]; then
    # hidden by default: calls inside the library stay direct (no PLT, inlinable); the entry marks
    # what it exports
    FLAGS+=(-fPIC -fvisibility=hidden)
    LINK_FLAGS=(-shared)
    BUILD="$SIM_DIR/build/pic"
fi
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

# Files of the kernel itself: the TU and its user headers (g++ -MM leaves out system headers),
# minus the emulator's headers. Paths are made absolute and lexically normalised.
kernel_files() {
    local dep
    for dep in $("$CXX" "${FLAGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} -MM -MT x "$1" | sed -e 's/^x://' -e 's/\\$//'); do
        dep=$(realpath -m -s "$dep")
        [[ "$dep" == "$SIM_DIR/include/"* ]] || printf '%s\n' "$dep"
    done
}

# Compile a kernel TU to assembly and keep only the block callbacks whose location (.loc) is in
# a file of the kernel itself. Blocks that start in inlined emulator or standard-library code
# (an API call's element loop, bounds checks, ...) lose their callback, so the emulator's own
# control flow is never counted and costs nothing; the callback is a plain call with no result,
# so deleting it changes nothing else.
compile_kernel_tu() {
    local src="$1" obj="$2" files
    files=$(kernel_files "$src" | paste -sd '|')
    "$CXX" "${FLAGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} "${KERNEL_FLAGS[@]}" -S "$src" -o "$obj.s"
    awk -v files="$files" -v src="$src" '
        function norm(p,   n, a, i, out, k, parts) {
            n = split(p, a, "/"); k = 0
            for (i = 1; i <= n; i++) {
                if (a[i] == "" || a[i] == ".") continue
                if (a[i] == "..") { if (k > 0) k--; continue }
                parts[++k] = a[i]
            }
            out = ""
            for (i = 1; i <= k; i++) out = out "/" parts[i]
            return out
        }
        BEGIN { n = split(files, f, "|"); for (i = 1; i <= n; i++) own[f[i]] = 1 }
        $1 == ".file" && $2 ~ /^[0-9]+$/ {
            q = split($0, s, "\"")                      # .file N "path"  or  .file N "dir" "path"
            path = (q >= 5) ? s[4] : s[2]
            if (q >= 5 && substr(path, 1, 1) != "/") path = s[2] "/" path
            kernel[$2] = (norm(path) in own)
        }
        $1 == ".loc" { cur = $2 }
        $1 == "call" && $2 ~ /^__sanitizer_cov_trace_pc/ {
            if (!kernel[cur]) next
            kept++
        }
        { print }
        END {
            if (!kept) {
                print "cpu_debug_build.sh: no basic block of " src " is located in the kernel'"'"'s own files" > "/dev/stderr"
                exit 2
            }
        }' "$obj.s" > "$obj.kernel.s"
    "$CXX" -c "$obj.kernel.s" -o "$obj"
}

TMP_OBJ=$(mktemp -d "$BUILD/obj/kernel.XXXXXX")
trap 'rm -rf "$TMP_OBJ"' EXIT
KERNEL_OBJS=()
for src in ${KERNEL_SOURCES[@]+"${KERNEL_SOURCES[@]}"}; do
    obj="$TMP_OBJ/${#KERNEL_OBJS[@]}_$(basename "${src%.*}").o"
    compile_kernel_tu "$(realpath -m -s "$src")" "$obj"
    KERNEL_OBJS+=("$obj")
done
# Link to a temporary name first so concurrent builds of the same OUT never expose a partial file.
"$CXX" "${FLAGS[@]}" ${LINK_FLAGS[@]+"${LINK_FLAGS[@]}"} ${EXTRA[@]+"${EXTRA[@]}"} \
    ${KERNEL_OBJS[@]+"${KERNEL_OBJS[@]}"} ${SOURCES[@]+"${SOURCES[@]}"} "$LIB" -o "$OUT.tmp.$$"
mv -f "$OUT.tmp.$$" "$OUT"
