"""``python -m mx_sparse``: prints what this installation is and supports (``show_config``)."""
import argparse
import os
import sys

from . import show_config
from .runtime.version import __version__


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m mx_sparse",
        description="Prints what this mx_sparse installation is and supports: its version and location, "
                    "torch's version, the ops with kernels registered per backend, the CPU kernel each dtype "
                    "runs on, whether CUDA/triton and NPU/torch_npu are present, and the MXS_* environment "
                    "switches in effect (the same text as mx_sparse.show_config()).")
    parser.add_argument("--version", action="version", version=f"mx_sparse {__version__}")
    parser.parse_args(argv)
    try:
        show_config()
    except OSError as e:
        # stdout that cannot be written (a full disk, a descriptor closed under us): one line on
        # stderr, and stdout pointed at /dev/null so the interpreter's final flush is quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"python -m mx_sparse: cannot write the report to stdout: {e.strerror or e}", file=sys.stderr)
        raise SystemExit(1)


main()
