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
import time

from setuptools import find_packages, setup

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:  # pragma: no cover - message for a missing build dependency
    sys.exit("mx_sparse: torch must be installed before building "
             "(pip install torch, then pip install --no-build-isolation .)")

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    """mx_sparse/runtime/version.py's __version__, read without importing the package."""
    with open(os.path.join(ROOT, "mx_sparse", "runtime", "version.py")) as f:
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
    # -ffp-contract=off: an FMA only where the source writes one (an intrinsic). GCC's default
    # (fast) fused a * b + c differently in a loop's vector body and in the scalar copy it runs
    # when a run-time overlap check between output and inputs fails, so the fused BatchNorm
    # backward's dx changed by one ulp with where the heap put dx (issue 35). Off, every copy
    # of a loop rounds the same, and the AVX-512 and portable builds give the same bits.
    cflags = ["-O3", "-std=c++17", "-fopenmp", "-ffp-contract=off", "-Wall", "-Wno-unknown-pragmas", "-g0"]
    return CppExtension(
        name="mx_sparse._C",
        sources=sources("kernels/module/*.cpp", "kernels/schema/*.cpp", "kernels/contract/*.cpp", "kernels/generic/*.cpp",
                        "kernels/cpu/*.cpp", "kernels/orchestration/*.cpp"),
        include_dirs=[os.path.join(ROOT, "kernels")],
        extra_compile_args={"cxx": cflags},
        extra_link_args=["-fopenmp"],
    )


def _load_by_path(name, path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def build_op_package_if_missing(info):
    """Inside `pip install --no-build-isolation .` with CANN and torch_npu present: build and install the
    AscendC op package into the package (kernels/ascend/build.sh --skip-binding) unless it already is
    there or MXS_BUILD_ASCEND_OPS=0."""
    if info.op_package_installed() or os.environ.get("MXS_BUILD_ASCEND_OPS") == "0":
        return
    build_ops = _load_by_path("mxs_build_ops", "kernels/ascend/build_tools/build_ops.py")
    if build_ops.main(["--skip-binding"]) != 0:
        print("mx_sparse: the AscendC op package was not built (see above); the binding is built anyway and "
              "`python -m mx_sparse` will say what is missing")


def npu_extension():
    """The PrivateUse1 binding (kernels/ascend/binding), built where torch_npu and a CANN toolkit
    (ASCEND_HOME_PATH) are present, after the AscendC op package (kernels/ascend/build.sh) is
    installed into the package. Nothing is linked against the op package: torch_npu's EXEC_NPU_CMD
    resolves the aclnn entry points at run time from the custom-op path, which mx_sparse sets when
    imported (mx_sparse/runtime/ascend_build_info.py). Loaded by mx_sparse/_core/op_registration.py after torch_npu. Never
    exercised on this project's machines (no torch_npu, no CANN); the binding source is
    syntax-checked in CI."""
    try:
        import torch_npu  # noqa: F401
    except ImportError:
        return None
    info = _load_by_path("mxs_ascend_build_info", "mx_sparse/runtime/ascend_build_info.py")
    cann, why = info.find_cann(os.environ)
    if cann is None:
        print(f"mx_sparse: torch_npu found, but no CANN toolkit ({why}): building without NPU kernels")
        return None
    build_op_package_if_missing(info)
    npu = os.path.dirname(torch_npu.__file__)
    inc = os.path.join(npu, "include")
    return CppExtension(
        name="mx_sparse._C_npu",
        sources=sources("kernels/ascend/binding/mx_sparse_npu.cpp"),
        # the kernels' limit and tiling headers (op_host/) include each other by file name
        include_dirs=[inc, os.path.join(inc, "third_party", "op-plugin"),
                      os.path.join(inc, "third_party", "acl", "inc"), os.path.join(str(cann.home), "include"),
                      os.path.join(ROOT, "kernels", "common"), os.path.join(ROOT, "kernels", "ascend", "common", "op_kernel")]
                     + sorted(glob.glob(os.path.join(ROOT, "kernels", "ascend", "*", "op_host"))),
        library_dirs=[os.path.join(npu, "lib"), os.path.join(str(cann.home), "lib64")],
        libraries=["torch_npu", "ascendcl"],
        extra_compile_args={"cxx": ["-O2", "-std=c++17"]},
    )


def build_ext_with_stamp():
    """build_ext that writes, beside the compiled mx_sparse._C, the digest of the sources as they
    were when the build started (tools/extension_stamp.py): run.sh rebuilds when it no longer
    matches, not when a file is merely newer."""
    base = BuildExtension.with_options(use_ninja=True)
    stamp_tool = os.path.join(ROOT, "tools", "extension_stamp.py")
    if not os.path.exists(stamp_tool):   # a source tree without tools/: no stamp, run.sh rebuilds
        return base
    stamp = _load_by_path("mxs_extension_stamp", "tools/extension_stamp.py")

    class BuildExtWithStamp(base):
        def run(self):
            digest, started = stamp.digest(ROOT), time.time()
            super().run()
            # beside the module this build wrote: where build_ext put it, and the source tree's
            # mx_sparse/ where an editable install copied it there
            folders = {os.path.dirname(self.get_ext_fullpath("mx_sparse._C")), os.path.join(ROOT, "mx_sparse")}
            for folder in folders:
                built = [f for f in glob.glob(os.path.join(folder, "_C*.so")) if os.path.getmtime(f) >= started - 1]
                if built or folder == os.path.dirname(self.get_ext_fullpath("mx_sparse._C")):
                    stamp.write_stamp(folder, digest)

    return BuildExtWithStamp


setup(
    name="mx_sparse",
    version=version(),
    description="Sparse 3D convolution for LiDAR networks on Ascend NPU, CUDA and CPU (mx_driving API)",
    # every Python module's file path is its import path (mx_sparse/_accelerator, mx_sparse/_cuda
    # included); kernels/ holds only compiled sources
    packages=find_packages(include=["mx_sparse", "mx_sparse.*"]),
    # the AscendC op package kernels/ascend/build.sh installs inside the package (absent elsewhere)
    package_data={"mx_sparse": ["_ascend_opp/**/*"]},
    python_requires=">=3.10",  # torch 2.13 needs it (requirements/pins.txt)
    install_requires=["torch>=2.1", "numpy"],
    # cuda: the CUDA backend's kernels are Triton (torch's CUDA wheels already depend on it)
    extras_require={"test": ["pytest", "hypothesis", "spconv==2.3.8", "triton"], "examples": ["tqdm"],
                    "cuda": ["triton"]},
    ext_modules=[ext for ext in (cpu_extension(), npu_extension()) if ext is not None],
    cmdclass={"build_ext": build_ext_with_stamp()},
    zip_safe=False,
)
