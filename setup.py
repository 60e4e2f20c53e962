"""Build of mx_sparse: the Python package plus one C++ extension (mx_sparse._C)
holding the op schema, the CPU kernels and, where their toolchains exist, the
CUDA and Ascend backends.

Install with torch already present:  pip install --no-build-isolation -e .
(build isolation would make pip fetch an unpinned torch into a throw-away env).
"""
import glob
import os
import sys

from setuptools import find_packages, setup

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:  # pragma: no cover - message for a missing build dependency
    sys.exit("mx_sparse: torch must be installed before building "
             "(pip install torch, then pip install --no-build-isolation .)")

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources(*patterns):
    files = []
    for pattern in patterns:
        files += sorted(glob.glob(os.path.join(ROOT, pattern)))
    return [os.path.relpath(f, ROOT) for f in files]


def cpu_extension():
    # -fopenmp: at::parallel_for is an inline OpenMP region compiled into our
    # code; at run time it binds to the libgomp that torch already loaded.
    cflags = ["-O3", "-std=c++17", "-fopenmp", "-Wall", "-Wno-unknown-pragmas"]
    return CppExtension(
        name="mx_sparse._C",
        sources=sources("kernels/ops/*.cpp", "kernels/cpu/*.cpp"),
        include_dirs=[os.path.join(ROOT, "kernels")],
        extra_compile_args={"cxx": cflags},
        extra_link_args=["-fopenmp"],
    )


setup(
    name="mx_sparse",
    version="0.1.0",
    description="Sparse 3D convolution for LiDAR networks on Ascend NPU, CUDA and CPU (mx_driving API)",
    packages=find_packages(include=["mx_sparse", "mx_sparse.*"]),
    python_requires=">=3.9",
    install_requires=["torch>=2.1", "numpy"],
    extras_require={"test": ["pytest", "hypothesis", "spconv==2.3.8"], "examples": ["tqdm"]},
    ext_modules=[cpu_extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    zip_safe=False,
)
