"""What this installation of mx_sparse is and can do: ``mx_sparse.show_config()`` and
``python -m mx_sparse`` print it; ``config()`` returns it as a dict. Everything is read
from the running build (the op registrations in the dispatcher, the CPU kernel chosen at
load time, the environment), not from what the build was meant to have."""
import importlib.util
import os
import platform
import sys
from typing import Dict, List, Optional, TextIO

import torch

from .. import _C
from .._core.op_registration import has_kernel
from .environment import ON_OFF_SWITCHES, SWITCHES, keep_limit_problem  # the variables and checks (re-exported)
from .environment import problems as environment_problems
from .version import __version__


def env_switch(name: str, default: bool = False) -> bool:
    """The on/off environment switch ``name``: 1, true, on, yes -> True; 0, false, off, no -> False
    (any case); unset or empty -> ``default``; any other value -> ValueError naming the variable and
    the allowed values. The C++ parser the kernels use (one set of rules for every switch)."""
    return _C.env_switch(name, default)


def _switch_state(name: str) -> str:
    """'on' / 'off' as mx_sparse reads the switch now, or why the value is refused."""
    try:
        return "on" if env_switch(name, ON_OFF_SWITCHES[name]) else "off"
    except ValueError as e:
        return f"invalid: {e}"


def _keep_mb_state() -> Optional[str]:
    """Why MXS_CPU_POOL_KEEP_MB is refused, or None (unset or valid: no state shown)."""
    problem = keep_limit_problem() if os.environ.get("MXS_CPU_POOL_KEEP_MB") else ""
    return f"invalid: {problem}" if problem else None


def _escaped(value: str) -> str:
    """An environment value shown on one line: control characters (a newline could otherwise
    forge a line of the report) and backslashes escaped."""
    return value.encode("unicode_escape").decode("ascii")
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # mx_sparse/, where _C and _C_npu are
_BACKEND_KEYS = (("CPU", "CPU"), ("CUDA", "CUDA"), ("NPU", "PrivateUse1"))
_ISA_NAMES = {"avx512": "AVX-512", "amx": "AMX", "generic": "portable"}


def _public(names) -> List[str]:
    """The public mx_sparse ops among dispatcher names (the accelerator primitives, _-prefixed,
    are internal: kernels/schema/schema.cpp)."""
    return sorted(n.split("::", 1)[1] for n in names if n.startswith("mx_sparse::") and not n.startswith("mx_sparse::_"))


def _ops_with_kernel(key: str) -> List[str]:
    return _public(torch._C._dispatch_get_registrations_for_dispatch_key(key))


def _declared_ops() -> List[str]:
    return _public(torch._C._dispatch_get_all_op_names())


def compiled_backends() -> List[str]:
    """The devices ("cpu", "cuda", "npu") whose convolutions can run here: the dispatcher holds a
    kernel of gather_mm for them (the CUDA backend registers from Python, the NPU binding when
    it is built and loaded). Read from the registrations, like best_device()."""
    return [device for device in ("cpu", "cuda", "npu") if has_kernel(device)]


# mx_sparse._C.compiled_backends was the documented path (a C++ list of compile-time flags that no
# build set); it stays as an alias of the dispatcher-derived answer.
_C.compiled_backends = compiled_backends


def _module_version(name: str) -> Optional[str]:
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return getattr(importlib.import_module(name), "__version__", "present")
    except Exception as e:  # importable spec, broken import: say so
        return f"present but fails to import ({type(e).__name__})"


def config() -> Dict[str, object]:
    """The facts ``show_config`` prints, as a dict."""
    declared = _declared_ops()
    backends = {name: _ops_with_kernel(key) for name, key in _BACKEND_KEYS}
    npu_lib = [f for f in os.listdir(PACKAGE_DIR) if f.startswith("_C_npu")]
    return {
        "version": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "threads": torch.get_num_threads(),
        "location": PACKAGE_DIR,
        "ops": declared,
        "kernels": backends,
        "backends": compiled_backends(),
        "cpu_gemm": {dtype: _ISA_NAMES.get(isa, isa) for dtype, isa in sorted(_C.cpu_gemm_kernels().items())},
        "cuda_available": torch.cuda.is_available(),
        "torch_cuda": torch.version.cuda,
        "triton": _module_version("triton"),
        "torch_npu": _module_version("torch_npu"),
        "npu_binding": npu_lib[0] if npu_lib else None,
        "ascend_custom_opp_path": os.environ.get("ASCEND_CUSTOM_OPP_PATH"),
        "switches": {name: os.environ.get(name) for name in SWITCHES},
        "switch_states": {**{name: _switch_state(name) for name in ON_OFF_SWITCHES},
                          **({"MXS_CPU_POOL_KEEP_MB": _keep_mb_state()} if _keep_mb_state() else {})},
        "environment_problems": environment_problems(),
        "other_env": {k: v for k, v in sorted(os.environ.items())
                      if (k.startswith("MXS_") and k not in SWITCHES) or k == "TRITON_INTERPRET"},
    }


def _kernel_line(ops: List[str], declared: List[str]) -> str:
    if not ops:
        return f"0 of {len(declared)} ops"
    if len(ops) == len(declared):
        return f"all {len(declared)} ops"
    return f"{len(ops)} of {len(declared)} ops ({', '.join(ops)})"


def format_config(c: Dict[str, object]) -> str:
    k, declared = c["kernels"], c["ops"]
    cuda = "available" if c["cuda_available"] else \
        ("not available" if c["torch_cuda"] else "not available (CPU build of torch)")

    # MXS_NPU_ON_CPU=1: CPU tensors run the NPU implementations (the orchestration, the AscendC kernels
    # in the emulator, voxelization's torch-operator version): every op, emulated on CPU
    npu_ops = (f"all {len(declared)} ops (emulated on CPU)" if c["switch_states"].get("MXS_NPU_ON_CPU") == "on"
               else _kernel_line(k["NPU"], declared))

    def generic(device):   # the voxelization ops' torch-operator implementation
        return "; voxelize_* on torch's own operators" if "voxelize_hard" in k[device] else ""

    lines = [
        f"mx_sparse {c['version']}  ({c['location']})",
        f"torch {c['torch']}, Python {c['python']}, {c['platform']}, {c['threads']} threads",
        "backends (ops of torch.ops.mx_sparse with a kernel registered for the device):",
        f"  CPU   {_kernel_line(k['CPU'], declared)}; gather_mm kernel: "
        + ", ".join(f"{dtype} {isa}" for dtype, isa in c["cpu_gemm"].items()),
        f"  CUDA  {_kernel_line(k['CUDA'], declared)}; torch CUDA {cuda}; "
        f"triton {c['triton'] or 'not installed'}{generic('CUDA')}",
        f"  NPU   {npu_ops}; torch_npu {c['torch_npu'] or 'not installed'}; "
        f"mx_sparse NPU binding {c['npu_binding'] or 'not built'}; "
        f"custom-op package (ASCEND_CUSTOM_OPP_PATH) {c['ascend_custom_opp_path'] or 'not set'}{generic('NPU')}",
        "environment switches:",
    ]
    for name, value in c["switches"].items():
        state = c["switch_states"].get(name)
        lines.append(f"  {name}={_escaped(value) if value is not None else '(unset)'}"
                     f"{f' [{_escaped(state)}]' if state else ''}  -- {SWITCHES[name]}")
    for name, value in c["other_env"].items():
        lines.append(f"  {name}={_escaped(value)}")
    problems = c.get("environment_problems") or []
    lines.append(f"environment: {len(problems)} invalid value(s)" if problems else "environment: every value valid")
    lines += [f"  {_escaped(p)}" for p in problems]
    return "\n".join(lines)


def show_config(file: Optional[TextIO] = None) -> None:
    """Prints version, torch version, the backends with the ops that have kernels registered
    (CPU: the gather_mm kernel each dtype runs on -- AVX-512, AMX or portable; CUDA: whether
    torch has CUDA and triton is installed; NPU: torch_npu, mx_sparse's NPU binding and the
    custom-op package), and the environment switches in effect."""
    out = file or sys.stdout
    if out is None:   # no stdout at all (python -m mx_sparse >&-): nowhere to print, nothing to raise
        return
    try:
        print(format_config(config()), file=out)
        # Ascend: CANN / op package / binding found, built, loaded, and the fix for what is missing
        from .ascend_build_info import report_lines
        print("\n".join(["Ascend build (kernels/ascend/build.sh):"] + ["  " + line for line in report_lines()]), file=out)
        out.flush()
    except BrokenPipeError:
        # the reader went away (python -m mx_sparse | head -1): nothing left to say, no traceback;
        # stdout is pointed at /dev/null so the interpreter's final flush does not raise again
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
