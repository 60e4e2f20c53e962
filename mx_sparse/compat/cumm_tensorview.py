"""A minimal ``cumm.tensorview`` for machines without cumm (spconv's array library), so code
written for spconv 2.x's ``Point2VoxelCPU3d`` -- e.g. OpenPCDet's data processor, which calls
``tv.from_numpy(points)`` and ``.numpy()`` on the results -- runs after
``mx_sparse.patch_spconv()``. Installed as ``cumm.tensorview`` only when the real module
cannot be imported. It wraps a NumPy array; nothing else of cumm is provided."""
import numpy as np

float32, float64, int32, int64 = np.float32, np.float64, np.int32, np.int64


class Tensor:
    """A CPU array with the few ``tv.Tensor`` members point-to-voxel code uses."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def numpy(self) -> np.ndarray:
        """A copy (``numpy_view`` shares the memory)."""
        return self._array.copy()

    def numpy_view(self) -> np.ndarray:
        return self._array

    @property
    def shape(self):
        return list(self._array.shape)

    @property
    def dtype(self):
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def device(self) -> int:
        return -1   # cumm's number for the CPU

    @property
    def size(self) -> int:
        return self._array.size

    def dim(self, axis: int) -> int:
        return self._array.shape[axis]

    def cpu(self) -> "Tensor":
        return self

    def clone(self) -> "Tensor":
        return Tensor(self._array.copy())

    def slice_first_axis(self, start: int, end: int) -> "Tensor":
        return Tensor(self._array[start:end])

    def __repr__(self):
        return f"Tensor(shape={self.shape}, dtype={self.dtype})"


def from_numpy(array: np.ndarray) -> Tensor:
    return Tensor(np.asarray(array))
