"""pytest plugin for DrivingSDK's own sparse-conv tests on an NPU: `import mx_driving` gives mx_sparse's
mx_driving surface (mx_sparse.patch_mx_driving()), with the real torch_npu."""
import mx_sparse

mx_sparse.patch_mx_driving()
