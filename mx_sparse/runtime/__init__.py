"""What this installation of mx_sparse is and how it runs: ``show_config`` (config.py), the MXS_*
environment switches and their check at import (environment.py), ``best_device`` (device.py), the
version (version.py), the CPU kernels' memory pool (cpu_memory.py), where the Ascend pieces are
(ascend_build_info.py, loaded by path by the build: no torch import here) and the AscendC emulator
behind ``MXS_NPU_ON_CPU=1`` (ascend.py, from a source checkout)."""
