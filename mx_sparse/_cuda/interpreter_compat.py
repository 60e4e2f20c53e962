"""Triton 3.6's interpreter next to NumPy 2: a loop over a kernel's scalar argument or loaded
scalar (``for _ in range(steps)``, ``range(0, pairs, BLOCK_K)``) fails there with
"InterpreterError: TypeError('only 0-dimensional arrays can be converted to Python scalars')":
the interpreter holds a scalar as a one-element 1-D array and its ``tensor.__index__`` calls
``int()`` on it, which NumPy 2 refuses for arrays of dimension 1. Triton 3.8's interpreter
squeezes the array first; ``apply`` gives older interpreters the same ``__index__``.

Only the interpreter is touched (it patches triton.language's tensor while a kernel runs);
compiled kernels are not. Applied when the Triton kernel modules are first imported
(gather_kernels.py and batch_norm_kernels.py; launch.plan_kernels / map_kernels import gather_kernels first).
"""
import os


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def apply() -> bool:
    """Makes the interpreter's scalar ``__index__`` squeeze its array; True where it patched."""
    if not _interpreting():
        return False
    from triton.runtime import interpreter
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "squeezes_scalars", False):
        return False

    def patch_lang_tensor(tensor, scope, *rest):
        original(tensor, scope, *rest)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    patch_lang_tensor.squeezes_scalars = True
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
