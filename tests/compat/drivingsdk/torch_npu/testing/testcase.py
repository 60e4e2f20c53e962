"""``torch_npu.testing.testcase`` stand-in: ``TestCase.assertRtolEqual`` with torch_npu's
rule and defaults (read from github.com/Ascend/pytorch, torch_npu/testing/testcase.py), the
per-test seeding of its ``setUp``, and ``run_tests``. Written for mx_sparse's test runner."""
import os
import random
import unittest
from collections.abc import Sequence
from numbers import Number

import numpy as np
import torch

# Denominator floors of the relative error (float16 / every other dtype).
_FLOOR16, _FLOOR = 6e-8, 1e-9


def run_tests():
    unittest.main()


class TestCase(unittest.TestCase):
    def setUp(self):
        seed = int(os.getenv("SEED", "666"))
        torch.manual_seed(seed)
        random.seed(seed)

    def assertRtolEqual(self, x, y, prec=1.e-4, prec16=1.e-3, auto_trans_dtype=False, message=None):
        """Passes when every element is within ``prec`` absolutely or every element within
        ``prec`` relatively (|x - y| / (max(|x|, |y|) + floor)), or when the elements failing
        each test number at most ``prec`` x size. float16 uses ``prec16``; bool must match
        exactly; NaNs must be at the same places; bfloat16 pairs use allclose(prec16)."""
        if isinstance(x, Sequence) and isinstance(y, Sequence):
            for a, b in zip(x, y):
                self.assertRtolEqual(a, b, prec, prec16, auto_trans_dtype, message)
            return
        if isinstance(x, torch.Tensor) and isinstance(y, Sequence):
            y = torch.as_tensor(y, dtype=x.dtype, device=x.device)
        elif isinstance(x, Sequence) and isinstance(y, torch.Tensor):
            x = torch.as_tensor(x, dtype=y.dtype, device=y.device)
        if torch.is_tensor(x) and torch.is_tensor(y):
            if auto_trans_dtype:
                x = x.to(y.dtype)
            if x.dtype == torch.bfloat16 and y.dtype == torch.bfloat16:
                self.assertEqual(x.shape, y.shape, "shape error!")
                self.assertTrue(torch.allclose(x.cpu(), y.cpu(), rtol=prec16, atol=prec16), "result error!")
                return
            x, y = x.detach().cpu().numpy(), y.detach().cpu().numpy()
        elif isinstance(x, Number) and isinstance(y, Number):
            x, y = np.array(x), np.array(y)
        if x.shape != y.shape:
            self.fail(message or f"shape error: {x.shape} vs {y.shape}")
        if x.dtype != y.dtype:
            self.fail(message or f"dtype error: {x.dtype} vs {y.dtype}")
        if x.dtype == np.bool_:
            if not np.equal(x, y).all():
                self.fail(message or "result error")
            return
        if x.dtype == np.float16:
            self._within(x, y, prec16, _FLOOR16, message)
        elif x.dtype in (np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64):
            self._within(x, y, prec, _FLOOR, message)
        else:
            self.fail(f"unsupported dtype {x.dtype}")

    def _within(self, x, y, prec, floor, message):
        nan = np.isnan(x)
        if not np.equal(nan, np.isnan(y)).all():
            self.fail(message or "NaN positions differ")
        if x.dtype.kind != "f":   # integers: exact arithmetic
            x, y = x.astype(np.float64), y.astype(np.float64)
        diff = np.abs(y - x)      # in the compared dtype, as torch_npu computes it
        diff[nan] = 0
        denom = np.maximum(np.abs(x), np.abs(y)) + floor
        abs_ok, rel_ok = diff <= prec, diff / denom <= prec
        if abs_ok.all() or rel_ok.all():
            return
        allowed = x.size * prec
        if (~rel_ok).sum() > allowed and (~abs_ok).sum() > allowed:
            worst = int(np.argmax(diff / denom))
            self.fail(message or f"result error: {(~rel_ok).sum()} of {x.size} elements beyond rtol {prec} "
                      f"(and {(~abs_ok).sum()} beyond atol), worst {x.flat[worst]!r} vs {y.flat[worst]!r}")
