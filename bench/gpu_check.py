"""The prepared check for a machine with a CUDA GPU, in one command sized for a short lent
session (never run by this project's CI, which has none):

    bash tools/gpu_check.sh [options]          # or: python -m bench.gpu_check [options]

In order: (1) stops with status 2 and one line where torch sees no CUDA GPU, before anything
else; (2) installs the comparison libraries from local wheels if asked (offline: ``pip install
--no-index --find-links DIR``; directories from --wheels or MXS_GPU_CHECK_WHEELS, ':'-separated);
(3) runs ``pytest -m cuda`` (the CUDA tests; its own command too) with a timeout, its output in
OUT/pytest_cuda.log and one record in OUT/results.jsonl; (4) runs the GPU benchmark
``python -m bench.gpu_profile --out OUT`` with the time that is left of --budget. The
benchmark's options after ``--`` go to it unchanged.
"""
import argparse
import os
import subprocess
import sys
import time

from bench import gpu_profile, part_runner

NO_GPU = gpu_profile.NO_GPU


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    profile_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu_check", help="folder of results.jsonl and logs (default ./gpu_check)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for the tests and the benchmark together (default 540: a 10-minute session "
                             "less start-up)")
    parser.add_argument("--tests-timeout", type=float, default=200.0, help="seconds for pytest -m cuda (default 200)")
    parser.add_argument("--skip-tests", action="store_true", help="do not run pytest -m cuda")
    parser.add_argument("--wheels", default=os.environ.get("MXS_GPU_CHECK_WHEELS", ""),
                        help="':'-separated directories of wheels to install offline (default: $MXS_GPU_CHECK_WHEELS)")
    parser.add_argument("--install", action="append", default=[],
                        help="a requirement to install from those directories (repeatable), e.g. spconv-cu120")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error(f"--budget: expected a positive number of seconds, got {args.budget:g}")
    if args.tests_timeout <= 0:
        parser.error(f"--tests-timeout: expected a positive number of seconds, got {args.tests_timeout:g}")
    dirs = [d for d in args.wheels.split(":") if d]
    missing = [d for d in dirs if not os.path.isdir(d)]
    if missing:
        parser.error(f"--wheels: not a directory: {', '.join(missing)}")
    if args.install and not dirs:
        parser.error("--install needs --wheels (or MXS_GPU_CHECK_WHEELS): installs are offline only")
    args.wheel_dirs = dirs
    # the benchmark's own checks, before anything runs
    args.profile_args = profile_args
    gpu_profile.parse_args(profile_args)
    return args


def install(args):
    if not args.install:
        return
    links = [x for d in args.wheel_dirs for x in ("--find-links", d)]
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", *links, *args.install]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def tests_part(timeout):
    """pytest -m cuda as a runner part. tests/conftest.py turns Triton's interpreter on unless
    told otherwise: on a GPU the compiled kernels are what is checked, so it is set off (and
    the CPU emulations off)."""
    env = {"TRITON_INTERPRET": "0", "MXS_CUDA_ON_CPU": "0", "MXS_NPU_ON_CPU": "0"}
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "tests", "-q", "-p", "no:cacheprovider"]
    return part_runner.Part("pytest_cuda", cmd, timeout, env)


def main(argv=None):
    args = parse_args(argv)
    device = gpu_profile.gpu_or_exit()
    started = time.perf_counter()
    install(args)
    os.makedirs(args.out, exist_ok=True)
    tests = None
    if not args.skip_tests:
        tests = part_runner.run_part(tests_part(min(args.tests_timeout, args.budget)), args.out)
    left = args.budget - (time.perf_counter() - started)
    profile_rc = gpu_profile.main(["--out", args.out, "--budget", f"{max(left, 1.0):.0f}", *args.profile_args])
    print(f"gpu_check: {device}; pytest -m cuda: {tests['status'] if tests else 'skipped'}; benchmark rc={profile_rc}; "
          f"records in {os.path.join(args.out, part_runner.RESULTS)}", flush=True)
    return 1 if (tests and tests["status"] != "ok") or profile_rc else 0


if __name__ == "__main__":
    sys.exit(main())
