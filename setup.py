"""Build of mx_sparse: the Python package plus one C++ extension (mx_sparse._C)
holding the op schema, the CPU kernels and, where their toolchains exist, the
CUDA and Ascend backends.

Install with torch already present:  pip install --no-build-isolation -e .
(build isolation would make pip fetch an unpinned torch into a throw-away env).
"""
import glob
import os
import re
import sys

from setuptools import find_packages, setup

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:  # pragma: no cover - message for a missing build dependency
    sys.exit("mx_sparse: torch must be installed before building "
             "(pip install torch, then pip install --no-build-isolation .)")

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    """mx_sparse/version.py's __version__, read without importing the package."""
    with open(os.path.join(ROOT, "mx_sparse", "version.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def sources(*patterns):
    files = []
    for pattern in patterns:
        files += sorted(glob.glob(os.path.join(ROOT, pattern)))
    return [os.path.relpath(f, ROOT) for f in files]


def cpu_extension():
    # -fopenmp: at::parallel_for is an inline OpenMP region compiled into our
    # code; at run time it binds to the libgomp that torch already loaded.
    # -g0: no debug information (Python's default flags ask for it); it made the module 32 MB
    # instead of 1 MB, and the wheel 11 MB.
    cflags = ["-O3", "-std=c++17", "-fopenmp", "-Wall", "-Wno-unknown-pragmas", "-g0"]
    return CppExtension(
        name="mx_sparse._C",
        sources=sources("kernels/ops/*.cpp", "kernels/cpu/*.cpp"),
        include_dirs=[os.path.join(ROOT, "kernels")],
        extra_compile_args={"cxx": cflags},
        extra_link_args=["-fopenmp"],
    )


def npu_extension():
    """The PrivateUse1 binding (kernels/ascend/binding), built only where torch_npu, a CANN
    toolkit and the installed mx_sparse custom-op package (its aclnn API library) are present.
    Loaded by mx_sparse/_ops.py after torch_npu. Never exercised on this project's machines,
    which have neither torch_npu nor CANN; the binding source itself is syntax-checked in CI."""
    try:
        import torch_npu  # noqa: F401
    except ImportError:
        return None
    cann = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    opp = next((p for p in os.environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":") if p), None)
    if not cann or not opp:
        print("mx_sparse: torch_npu found, but ASCEND_TOOLKIT_HOME and ASCEND_CUSTOM_OPP_PATH (the installed "
              "mx_sparse op package) are not both set: building without NPU kernels")
        return None
    npu = os.path.dirname(torch_npu.__file__)
    inc = os.path.join(npu, "include")
    return CppExtension(
        name="mx_sparse._C_npu",
        sources=sources("kernels/ascend/binding/mx_sparse_npu.cpp"),
        include_dirs=[inc, os.path.join(inc, "third_party", "op-plugin"),
                      os.path.join(inc, "third_party", "acl", "inc"), os.path.join(cann, "include"),
                      os.path.join(opp, "op_api", "include")],
        library_dirs=[os.path.join(npu, "lib"), os.path.join(cann, "lib64"), os.path.join(opp, "op_api", "lib")],
        libraries=["torch_npu", "ascendcl", "cust_opapi"],
        extra_compile_args={"cxx": ["-O2", "-std=c++17"]},
    )


setup(
    name="mx_sparse",
    version=version(),
    description="Sparse 3D convolution for LiDAR networks on Ascend NPU, CUDA and CPU (mx_driving API)",
    # the CUDA backend (Python + Triton) lives beside the other backends in kernels/cuda
    packages=find_packages(include=["mx_sparse", "mx_sparse.*"]) + ["mx_sparse._cuda"],
    package_dir={"mx_sparse._cuda": "kernels/cuda"},
    python_requires=">=3.10",  # torch 2.13 needs it (requirements/pins.txt)
    install_requires=["torch>=2.1", "numpy"],
    # cuda: the CUDA backend's kernels are Triton (torch's CUDA wheels already depend on it)
    extras_require={"test": ["pytest", "hypothesis", "spconv==2.3.8", "triton"], "examples": ["tqdm"],
                    "cuda": ["triton"]},
    ext_modules=[ext for ext in (cpu_extension(), npu_extension()) if ext is not None],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    zip_safe=False,
)
