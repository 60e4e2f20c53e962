"""The tensor and the layers a sparse network is built from, and what they keep between calls:
``SparseConvTensor`` (sparse_tensor.py), the convolutions (conv.py, with their padding rules,
initial weights and the convolution at given outputs), ``SparseSequential`` and the fused
BatchNorm+ReLU (modules.py, batch_norm_relu.py), the neighbor-map cache of an ``indice_key``
(indice_data.py) with its maps held packed (packed_map.py) and the smaller saved tensors of
autograd (saved_tensors.py), weight layouts and checkpoint loading (layouts.py, serialization.py),
the layers' argument checks (validation.py) and what ``torch.compile`` needs (compile_support.py).
The public names are ``mx_sparse.<Name>`` (mx_sparse/__init__.py)."""
