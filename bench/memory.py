"""Peak resident memory over baseline, measured in a fresh subprocess per (variant,
workload) so that the libraries' allocators and caches never pollute each other.

In the child: build the network and the input, run one warm-up training step, then for
each phase collect garbage, ``malloc_trim(0)``, reset the high-water mark (``echo 5 > /proc/self/clear_refs``), read VmRSS as
the baseline, run the phase once and read VmHWM. ``extra = VmHWM - baseline``.

With glibc's defaults, memory a library frees often stays in the heap (the mmap threshold rises
after the first large free, so later tensors come from the heap and freed ones are kept), and
the RSS peak then includes what the allocator keeps. ``NO_RETENTION`` fixes the threshold at
64 KiB: every tensor is its own mapping, returned at free, so the peak is what the library holds
(and sets mx_sparse's pool to keep no freed pages). Before each baseline, mx_sparse's pool
gives back the pages it keeps, as ``malloc_trim`` does for glibc's heap.

Run by hand: ``python -m bench.memory WORKLOAD VARIANT THREADS``; prints JSON."""
import ctypes
import gc
import json
import os
import subprocess
import sys

# (mx_sparse's CPU pool gives its free ranges back at every free too)
NO_RETENTION = {"MALLOC_MMAP_THRESHOLD_": "65536", "MXS_CPU_POOL_KEEP_MB": "0"}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _trim_heap() -> None:
    """Return freed heap memory to the OS, so that memory a library freed but the C
    allocator kept does not hide in the baseline; mx_sparse's CPU pool likewise gives back
    the mappings it keeps (so the phase measured pays for refilling them)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    if "mx_sparse._C" in sys.modules:
        sys.modules["mx_sparse._C"].cpu_pool_release_cached()


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure_in_child(workload: str, variant: str, threads: int) -> dict:
    from . import timing
    from .workloads import BY_NAME
    from .__main__ import build_nets
    w = BY_NAME[workload]
    v = next(x for x in timing.variants(threads) if x.name == variant)
    inp = w.make_input()
    nets = build_nets(w, libs=(v.lib,))
    net = nets[v.lib]
    v.activate()
    timing.run_train(net, v.lib, inp)   # warm-up: one-time allocations, lazy init
    out = {}
    for phase, run in (("forward", timing.run_forward), ("train", timing.run_train)):
        net.zero_grad(set_to_none=True)
        gc.collect()
        _trim_heap()
        resettable = _reset_hwm()
        base = _status_kb("VmRSS")
        run(net, v.lib, inp)
        out[phase] = dict(baseline_mb=base / 1024, extra_mb=(_status_kb("VmHWM") - base) / 1024,
                          hwm_reset=resettable)
    return out


def measure(workload: str, variant: str, threads: int, timeout: float = 600, env: dict = None) -> dict:
    """Runs ``measure_in_child`` in a new interpreter (with ``env`` added to the environment,
    e.g. ``NO_RETENTION``); returns its result (or the error)."""
    cmd = [sys.executable, "-m", "bench.memory", workload, variant, str(threads)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        p = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return dict(error=f"timeout after {timeout}s")
    if p.returncode != 0:
        return dict(error=p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    # the child process of memory(); not a command of its own (python -m bench measures memory)
    if len(sys.argv) != 4 or sys.argv[1] in ("-h", "--help"):
        sys.exit("usage: python -m bench.memory WORKLOAD VARIANT THREADS  (internal: the child process python -m bench "
                 "starts to measure one configuration's peak memory; run python -m bench instead)")
    print(json.dumps(measure_in_child(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
