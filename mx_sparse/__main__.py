"""``python -m mx_sparse``: prints what this installation is and supports (``show_config``)."""
import argparse

from . import show_config
from .version import __version__


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m mx_sparse",
        description="Prints what this mx_sparse installation is and supports: its version and location, "
                    "torch's version, the ops with kernels registered per backend, the CPU kernel each dtype "
                    "runs on, whether CUDA/triton and NPU/torch_npu are present, and the MXS_* environment "
                    "switches in effect (the same text as mx_sparse.show_config()).")
    parser.add_argument("--version", action="version", version=f"mx_sparse {__version__}")
    parser.parse_args(argv)
    show_config()


main()
