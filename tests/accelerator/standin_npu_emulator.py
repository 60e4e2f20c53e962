"""A STAND-IN for mx_sparse.runtime.ascend (the AscendC emulator's entry, written on another branch): its
``emulator_primitives()`` returns the torch-operator fallbacks of the five primitives, wrapped to
count their calls. Loaded as a pytest plugin (``-p standin_npu_emulator``) or imported first by a
script, with MXS_NPU_ON_CPU=1, it lets the MXS_NPU_ON_CPU=1 registration be tested before the
emulator exists: the wiring (which key gets what), not the AscendC kernels."""
import collections
import sys
import types

CALLS = collections.Counter()


def emulator_primitives():
    from mx_sparse._accelerator import fallback   # imported while mx_sparse registers its ops

    def counted(name, fn):
        def primitive(*args):
            CALLS[name] += 1
            return fn(*args)
        return primitive

    return {name: counted(name, fn) for name, fn in fallback.PRIMITIVES.items()}


def emulator_stats():
    return dict(CALLS)


standin = types.ModuleType("mx_sparse.runtime.ascend")
standin.__doc__ = __doc__
standin.emulator_available = lambda: True
standin.emulator_primitives = emulator_primitives
standin.emulator_stats = emulator_stats
sys.modules["mx_sparse.runtime.ascend"] = standin
