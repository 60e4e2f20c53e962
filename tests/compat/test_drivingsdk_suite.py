"""DrivingSDK's own sparse-convolution tests (Ascend/DrivingSDK, tests/torch) run unmodified
against mx_sparse through tests/compat/run_drivingsdk_tests.sh. Needs a DrivingSDK checkout in
MXS_DRIVINGSDK (CI has no network, so it is skipped there); takes ~10 minutes on two cores."""
import os
import re
import subprocess

import pytest

SDK = os.environ.get("MXS_DRIVINGSDK")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(not SDK, reason="set MXS_DRIVINGSDK to a DrivingSDK checkout (git clone "
                                    "https://github.com/Ascend/DrivingSDK DIR) to run its sparse-convolution tests on mx_sparse")
def test_drivingsdk_sparse_conv_tests_pass():
    out = subprocess.run(["bash", os.path.join(HERE, "run_drivingsdk_tests.sh"), SDK], capture_output=True, text=True,
                         timeout=7200)
    summary = out.stdout.strip().splitlines()[-1]
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 10 and not re.search(r"failed|error", summary), summary
