"""The environment variables mx_sparse reads and the check that refuses an invalid value at
import: every invalid value at once, each with the variable's name, what it accepts and what it
holds, parsed by the same C++ functions the kernels read them with (kernels/cpu/env_switch.h,
the CPU pool's MXS_CPU_POOL_KEEP_MB in large_tensor_pool.cpp). ``python -m mx_sparse`` prints
the same lines instead of a traceback (``exit_if_reporting``)."""
import os
import sys
from typing import List

# The variables with what setting them does. The on/off switches (ON_OFF_SWITCHES, with their
# defaults) take 1/true/on/yes or 0/false/off/no.
SWITCHES = {
    "MXS_CPU_PORTABLE": "on keeps every CPU kernel on its portable C++ path (read when the extension loads)",
    "MXS_DISABLE_AMX": "on turns the AMX bfloat16 kernel off",
    "MXS_CPU_POOL": "off turns the CPU large-tensor pool off (read at the first large tensor; default on)",
    "MXS_CPU_POOL_KEEP_MB": "freed MiB the CPU pool keeps resident (default 256)",
    "MXS_CUDA_ON_CPU": "on runs the CUDA backend (Triton kernels interpreted) for CPU tensors (read at import)",
    "MXS_NPU_ON_CPU": "on runs the NPU backend (its orchestration, the AscendC kernels in the emulator) for CPU "
                      "tensors (read at import)",
    "MXS_CUDA_GUARD_LAUNCHES": "on checks every Triton launch's operands (contiguous, 16-byte aligned; the test "
                               "suite sets it; read at the first launch)",
}
ON_OFF_SWITCHES = {"MXS_CPU_PORTABLE": False, "MXS_DISABLE_AMX": False, "MXS_CPU_POOL": True, "MXS_CUDA_ON_CPU": False,
                   "MXS_NPU_ON_CPU": False, "MXS_CUDA_GUARD_LAUNCHES": False}
INTERPRETER_OFF = ("0", "false", "off", "no")   # TRITON_INTERPRET values that turn Triton's interpreter off


def _extension():
    import torch  # noqa: F401  (the extension links against torch's libraries)
    from .. import _C
    return _C


def _parsed_switch(name: str):
    """(value, None) or (None, the parser's message)."""
    _C = _extension()
    try:
        return _C.env_switch(name, ON_OFF_SWITCHES[name]), None
    except ValueError as e:
        return None, str(e)


def keep_limit_problem() -> str:
    """The C++ pool's message for MXS_CPU_POOL_KEEP_MB (it reads the variable once, when the pool
    is first used), or '' when the value is accepted."""
    _C = _extension()
    try:
        _C.cpu_pool_stats()
        return ""
    except ValueError as e:
        return str(e)


def problems() -> List[str]:
    """One line per invalid value (or combination) in the environment, empty when all are valid."""
    found, on = [], {}
    for name in ON_OFF_SWITCHES:
        on[name], message = _parsed_switch(name)
        if message:
            found.append(message)
    if os.environ.get("MXS_CPU_POOL_KEEP_MB"):
        message = keep_limit_problem()
        if message:
            found.append(message)
    if on["MXS_CUDA_ON_CPU"] and on["MXS_NPU_ON_CPU"]:
        found.append("MXS_CUDA_ON_CPU, MXS_NPU_ON_CPU: both ask to serve CPU tensors; set one of them")
    interpret = os.environ.get("TRITON_INTERPRET")
    if on["MXS_CUDA_ON_CPU"] and interpret is not None and interpret.strip().lower() in INTERPRETER_OFF:
        found.append(f"MXS_CUDA_ON_CPU={os.environ['MXS_CUDA_ON_CPU'].strip()} runs the Triton kernels in "
                     f"Triton's interpreter, which "
                     f"TRITON_INTERPRET={interpret!r} turns off: set TRITON_INTERPRET=1 (or unset it)")
    return found


def check() -> None:
    """ValueError listing every invalid value, one per line, if there is any."""
    found = problems()
    if found:
        raise ValueError("\n".join(found) if len(found) == 1 else
                         "invalid mx_sparse environment:\n" + "\n".join("  " + line for line in found))


def reporting() -> bool:
    """Whether this process is ``python -m mx_sparse`` importing its package: the interpreter's
    own command line names the module, and runpy has not yet replaced argv[0] ('-m' until then)."""
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[:1] == ["-m"] and any(a == "-m" and b == "mx_sparse" for a, b in zip(argv, argv[1:]))


def exit_if_reporting(error: BaseException) -> None:
    """Under ``python -m mx_sparse``, the import's error as the report (stderr, status 2) instead
    of a traceback; otherwise nothing (the caller re-raises)."""
    if reporting():
        print(f"python -m mx_sparse: {error}", file=sys.stderr)
        raise SystemExit(2)
