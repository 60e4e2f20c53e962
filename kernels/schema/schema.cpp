// The one declaration of every mx_sparse operator. Backends add implementations
// under their dispatch key (CPU in kernels/cpu; CUDA and PrivateUse1 in
// mx_sparse/_accelerator/registration.py, over the device primitives of mx_sparse/_cuda
// and kernels/ascend/binding; voxelization in kernels/generic); autograd is attached once in autograd.cpp; fake (meta) kernels
// are registered from Python (mx_sparse/_core/op_registration.py) because the strided map has a
// data-dependent number of rows.
//
// Neighbor map contract: nbr[M, K] int32, nbr[m, k] = input row that weight slice
// W[k] multiplies for output row m, or -1. Offsets k run over the kernel window in
// row-major order of kernel_size. Weights are [K, Cin/groups, Cout].
#include <torch/library.h>

TORCH_LIBRARY(mx_sparse, m) {
  // Submanifold map: outputs are the input rows, in input order.
  m.def("build_subm_map(Tensor indices, int[] spatial_shape, int batch_size, "
        "int[] kernel_size, int[] dilation) -> Tensor");
  // Strided-conv map: returns (out_indices [M, 1+ndim] int32 sorted by
  // (batch, *spatial), nbr [M, K], the output spatial shape: per axis
  // (in + padding + pads_end - dilation*(kernel - 1) - 1) // stride + 1, conv_out_extent of
  // kernels/common/conv_rules.h; callers take it from here, nothing recomputes it; it is a
  // function of the arguments alone, so the fake kernel knows it). Output o reads input o*stride - padding +
  // kp*dilation; `padding` pads below each axis and `pads_end` above (ONNX/oneDNN
  // pads_begin / pads_end), pads_end = padding when omitted (symmetric).
  m.def("build_conv_map(Tensor indices, int[] spatial_shape, int batch_size, "
        "int[] kernel_size, int[] stride, int[] padding, int[] dilation, int[]? pads_end=None) "
        "-> (Tensor, Tensor, int[])");
  // Transposed (generative) conv map: input i reaches output o = i*stride -
  // pads_begin + kp*dilation (every o in [0, O)), O = (in - 1)*stride - pads_begin -
  // pads_end + dilation*(kernel - 1) + 1 + output_padding per axis (ONNX
  // ConvTranspose, torch conv_transpose); output_padding < stride or < dilation.
  // Returns (out_indices [M, 1+ndim] int32 sorted by (batch, *spatial), nbr [M, K], the output
  // spatial shape O per axis),
  // nbr[o, k] = the input reaching o through offset k: out[o] = sum_k x[nbr[o, k]] @ W[k].
  m.def("build_conv_transpose_map(Tensor indices, int[] spatial_shape, int batch_size, int[] kernel_size, "
        "int[] stride, int[] pads_begin, int[] pads_end, int[] dilation, int[] output_padding) "
        "-> (Tensor, Tensor, int[])");
  // Map of a convolution evaluated at GIVEN output voxels (Open3D's SparseConv and
  // SparseConvTranspose, oneDNN / dense conv sampled at chosen outputs): nbr [M_out, K] int32 in
  // out_indices' row order (no output is added, dropped or reordered), nbr[m, k] = the input
  // row at the position offset k reads, or -1:
  //   transposed=False: the input at o*stride - pads_begin + kp*dilation per axis (build_conv_map's rule);
  //   transposed=True:  the input i with i*stride - pads_begin + kp*dilation == o
  //                     (build_conv_transpose_map's rule; o off the stride's lattice reads nothing).
  // Any kernel size (even ones too): the window starts pads_begin cells before o*stride (before o
  // for the transposed rule), which expresses Open3D's filter `offset` (pads_begin = (kernel - 1)/2
  // + offset, in voxels, per axis). out_indices [M_out, 1+ndim] int32 (batch, *coords), unique,
  // 0 <= batch < batch_size and every coordinate inside the output grid: out_spatial_shape when
  // given, else every output whose window meets the input grid -- strided:
  // floor((in - 1 + pads_begin)/stride) + 1 cells per axis, transposed: (in - 1)*stride -
  // pads_begin + (kernel - 1)*dilation + 1 (kernels/contract/op_args.h, conv_map_at_output_grid).
  m.def("build_conv_map_at(Tensor indices, Tensor out_indices, int[] spatial_shape, int batch_size, "
        "int[] kernel_size, int[] stride, int[] pads_begin, int[] dilation, bool transposed=False, "
        "int[]? out_spatial_shape=None) -> Tensor");
  // nbr_t[i, k] = m where nbr[m, k] = i (each (i, k) has at most one m).
  // num_rows is a SymInt so that torch.compile keeps a voxel count symbolic
  // (an int argument would specialise the graph to it); kernels take int64_t.
  m.def("transpose_map(Tensor nbr, SymInt num_rows) -> Tensor");
  // A map reduced to its present entries (CPU), for keeping maps between uses:
  // mask [M, ceil(K/16)] int16, bit j of mask[m, w] set where nbr[m, 16w + j] >= 0;
  // values [P] int32, those entries in row-major order; block_starts int64, the
  // index in values of the first entry of each block of 1024 rows, then P.
  // unpack_map(pack_map(nbr)..., K) == nbr for every map with entries >= -1.
  m.def("pack_map(Tensor nbr) -> (Tensor mask, Tensor values, Tensor block_starts)");
  m.def("unpack_map(Tensor mask, Tensor values, Tensor block_starts, int kvol) -> Tensor");
  // out[m] = sum_k features[nbr[m, k]] @ weight[k]   (per group).
  // nbr_t is not read by the forward; it is the map autograd needs for the
  // input gradient, passed in when it is cached anyway (an indice_key that an
  // inverse conv also uses). None: autograd derives it when the input gradient
  // is needed; with `symmetric` (nbr's transpose is nbr with the offsets
  // reversed: the submanifold map of an odd kernel, where offset K-1-k is
  // -offset k) by running on nbr itself with the weight slices reversed, else
  // by transpose_map inside backward, so no transposed map outlives its use.
  // source, source_scale, source_shift (all or none): the caller's statement that features =
  // relu(source * source_scale + source_shift) per channel (a fused BatchNorm+ReLU output, whose
  // input source is kept for its own backward anyway; mx_sparse/nn/conv.py passes it). The forward
  // does not read them; autograd keeps them instead of features, and the weight gradient reads
  // source with the activation applied (gather_mm_backprop_filter's scale and shift), so no
  // backward holds or recomputes features.
  m.def("gather_mm(Tensor features, Tensor weight, Tensor nbr, Tensor? nbr_t, int groups, "
        "bool symmetric=False, Tensor? source=None, Tensor? source_scale=None, Tensor? source_shift=None) "
        "-> Tensor");
  // dW[k] = sum_m a[nbr[m, k]]^T (x) grad[m]   (per group), a = features, or with scale and shift
  // (both or none; [Cin] each) a = relu(features * scale + shift) per channel, rounded to the
  // features' dtype as scale_shift_relu rounds it.
  m.def("gather_mm_backprop_filter(Tensor features, Tensor grad, Tensor nbr, Tensor? nbr_t, "
        "int groups, bool symmetric=False, Tensor? scale=None, Tensor? shift=None) -> Tensor");
  // BatchNorm + ReLU on features [N, C] (mx_sparse/nn/batch_norm_relu.py builds the
  // fused layer from these). Returns (y, mean, invstd, scale, shift): batch
  // statistics, blended into running_mean/var when given (momentum, unbiased
  // variance), or the running statistics without batch_stats; mean and invstd
  // in float64; y = max(input * scale + shift, 0) with scale = weight * invstd,
  // shift = bias - mean * scale.
  m.def("batch_norm_relu_forward(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, "
        "Tensor(b!)? running_var, bool batch_stats, float momentum, float eps) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  // y = max(input * scale + shift, 0), per channel.
  m.def("scale_shift_relu(Tensor input, Tensor scale, Tensor shift) -> Tensor");
  // (grad_input, grad_weight, grad_bias) of batch_norm_relu_forward's y, from its
  // input (the ReLU mask is recomputed); with batch_stats the dependence of mean
  // and invstd on the input is included.
  m.def("batch_norm_relu_backward(Tensor grad, Tensor input, Tensor mean, Tensor invstd, Tensor? weight, "
        "Tensor scale, Tensor shift, bool batch_stats) -> (Tensor, Tensor, Tensor)");
  // The fused layer as autograd sees it (internal: mx_sparse/nn/batch_norm_relu.py calls it when
  // a gradient is to be recorded): batch_norm_relu_forward's (y, scale, shift), running statistics
  // updated as it updates them; y is differentiable in input, weight and bias through
  // batch_norm_relu_backward (the node in autograd.cpp); scale and shift are not (they describe
  // y: y = max(input * scale + shift, 0), the recipe that recomputes it).
  m.def("_batch_norm_relu(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, "
        "Tensor(b!)? running_var, bool batch_stats, float momentum, float eps) -> (Tensor, Tensor, Tensor)");
  // Pooling over a neighbor map nbr [M, K] (int32, entries -1 or a row of features [N, C]),
  // without gathering the [M, K, C] window: out [M, C]. Max: the largest input of each
  // window per channel, argmax [M, C] = its kernel offset k (lowest on ties, a NaN wins; an
  // output row without inputs gives 0 and -1), int8 for K <= 127, int16 for K <= 32767, else
  // int32. Avg: the sum of the window's inputs over their count. The backward ops scatter
  // grad [M, C] onto num_rows input rows (max: row nbr[m, argmax[m, c]]).
  m.def("sparse_max_pool(Tensor features, Tensor nbr) -> (Tensor out, Tensor argmax)");
  m.def("sparse_max_pool_backward(Tensor grad, Tensor argmax, Tensor nbr, SymInt num_rows) -> Tensor");
  m.def("sparse_avg_pool(Tensor features, Tensor nbr) -> Tensor");
  m.def("sparse_avg_pool_backward(Tensor grad, Tensor nbr, SymInt num_rows) -> Tensor");

  // ---- Accelerator primitives (internal; the leading underscore keeps them out of the public API).
  // The one device-neutral orchestration of mx_sparse/_accelerator (map builders, per-group launches)
  // is written around these five; a device contributes kernels for them and nothing else
  // (CUDA: the two gathers in Triton; NPU: the five AscendC kernels; everything else: the
  // torch-operator fallbacks of mx_sparse/_accelerator/fallback.py, CompositeExplicitAutograd).
  // They check nothing the orchestration checked already; a device adds only its own limits.
  //
  // out[s, k] = p where sorted_keys[p] == query_keys[s] + key_deltas[k], else -1 (int32 [S, K]).
  // query_keys int64 [S]; sorted_keys int64 [C] ascending and unique; key_deltas int64 [K].
  // group = kernel_size[-1] (the AscendC kernel walks offsets in runs of the innermost window);
  // key_bound: every key and key + delta lies in [0, key_bound), 0 = unknown (a kernel may then
  // compare 32-bit low words only when key_bound < 2^30).              AscendC kernel: SubmMap
  m.def("_sorted_key_lookup(Tensor query_keys, Tensor sorted_keys, Tensor key_deltas, int group, "
        "int key_bound) -> Tensor");
  // _sorted_key_lookup with the positions p written as the rows order[p] (order int64 [C]: the
  // permutation that sorted the keys; None: position p is row p; -1 stays -1), with scatter_rows
  // (S == C, the queries being the sorted keys themselves) query s's entries at row order[s]
  // instead of s: a map in its input rows' order; and with transpose_rows > 0 (no scatter_rows)
  // the map's transpose on that many rows as the second result (cell (r, k) = the result row whose
  // entry k is r, -1 where none; a map names each (row, offset) once), else an empty [0, K]. An
  // optional primitive (see _conv_output_rows): the builders call it where the tensors' device has
  // a kernel for it (CUDA: the lookup's own launch) and otherwise do the same with ATen operators
  // (rows_of, index_copy_, scatter_transpose); no fallback is registered.
  m.def("_sorted_key_lookup_rows(Tensor query_keys, Tensor sorted_keys, Tensor key_deltas, int group, "
        "int key_bound, Tensor? order, bool scatter_rows, int transpose_rows) -> (Tensor, Tensor)");
  // indices int32 [N, 1+nd] (inside the grid) -> int64 [J*N], slot-major ([J, N] flattened): per
  // axis, the kernel positions kp through which coordinate i reaches an output (i + padding -
  // kp*dilation a multiple of stride) are i's lattice positions, at most J_d = conv_out_slots
  // (kernels/common/conv_rules.h: ceil(k / (stride / gcd(stride, dilation)))); slot (j_0, ...)
  // (row-major, J = prod J_d) of input n holds the output-grid key ((b*O0 + o0)*O1 + o1)... of
  // the output voxel reached through the j_d-th lattice position (ascending) on each axis (o = (i
  // + padding - kp*dilation) / stride, 0 <= o < O), INT64_MAX where that position does not exist
  // (kp >= k) or o is outside. Every (offset, input) pair that reaches an output appears once;
  // at stride 1 slot j is offset j (the kernel volume of rows). Fewer rows than K*N: the sort
  // that follows in the strided builder sorts 8 keys per input for 3x3x3 at stride 2, not 27.
  //                                                                   AscendC kernel: ConvOutKeys
  m.def("_conv_out_keys(Tensor indices, int[] spatial_shape, int batch_size, int[] kernel_size, int[] stride, "
        "int[] padding, int[] dilation) -> Tensor");
  // sorted int64 [C] (INT64_MAX sentinels last) -> (unique_keys int64 [C] whose first `count`
  // entries are the distinct non-sentinel keys ascending, the rest unspecified; count int32 [1]).
  // The count stays on the device: reading it is the caller's one host read.
  //                                                              AscendC kernel: UniqueSortedKeys
  m.def("_unique_sorted_keys(Tensor sorted_keys) -> (Tensor unique_keys, Tensor count)");
  // The output voxels of a strided map from its sorted pair keys (keys on the output grid of
  // extents out_shape, INT64_MAX sentinels): rows int32 [C, 1+nd] whose first `count` rows are
  // the distinct keys ascending unpacked into (batch, *coords); query_keys int64 [C], row r's
  // (batch, coords * stride) packed on the grid of extents query_shape (where the strided builder
  // looks the inputs up); count int32 [1], left on the device; what follows the count unspecified.
  // An optional primitive, not one of the five, like _gather_mm_transposed below: the strided
  // builder (kernels/orchestration/neighbor_map_orchestration.cpp) calls it where the tensors'
  // device has a kernel for it (CUDA: in _unique_sorted_keys' launch) and otherwise does the same
  // with _unique_sorted_keys and ATen operators; so no fallback is registered.
  m.def("_conv_output_rows(Tensor sorted_keys, int[] out_shape, int[] query_shape, int[] stride) "
        "-> (Tensor rows, Tensor query_keys, Tensor count)");
  // One group of gather_mm: features [N, Cin], weight [K, Cin, Cout], nbr int32 [M, K] with
  // entries in [-1, N) -> [M, Cout] (absent entries contribute nothing).  AscendC kernel: GatherMm
  m.def("_gather_mm_one_group(Tensor features, Tensor weight, Tensor nbr) -> Tensor");
  // One group of gather_mm_backprop_filter: features [N, Cin], grad [M, Cout], nbr int32 [M, K]
  // -> dW [K, Cin, Cout]; with scale and shift [Cin] (both or none), of relu(features * scale +
  // shift) (the Triton kernel applies it as it loads features; the others run scale_shift_relu
  // first).                                                AscendC kernel: GatherMmBackpropFilter
  m.def("_gather_mm_backprop_filter_one_group(Tensor features, Tensor grad, Tensor nbr, Tensor? scale=None, "
        "Tensor? shift=None) -> Tensor");
  // The input gradient of a convolution with its weight read in place (one group): features
  // [N, Cout] (the output gradient), weight [K, Cin, Cout] (the layer's), nbr int32 [M, K] with
  // entries in [-1, N) -> [M, Cin], out[m] = sum_k features[nbr[m, k]] @ weight[k']^T, k' = K-1-k
  // with reverse_offsets (a symmetric map itself standing for its transpose), else k. An optional
  // primitive, not one of the five: autograd (autograd.cpp) calls it for tensors whose device has a
  // kernel for it (CUDA: the Triton gather reading the weight transposed; the NPU: AscendC GatherMm
  // with weight_layout 1 / 2), and otherwise makes the transposed weight and calls gather_mm; so no
  // fallback is registered.
  m.def("_gather_mm_transposed(Tensor features, Tensor weight, Tensor nbr, bool reverse_offsets) -> Tensor");
  // Voxelization of points [N, C] (float32/64/16, bfloat16; columns 0..ndim-1 are
  // x, y, z, ...) into the grid of voxel_size [ndim] over point_cloud_range
  // [min_0.., max_0..], with the cell rules of spconv / mmcv (kernels/common/
  // voxel_rules.h). batch: optional sample index per point (int32/int64 >= 0).
  // Voxels are listed per sample in ascending batch, within a sample in the order
  // of their first point; coords [M, 1+ndim] int32 = (batch, z, y, x);
  // point_voxel [N] int64 = voxel row of each point, -1 outside the range.
  // Dynamic: every in-range point is mapped; num_points [M] int32 counts them.
  m.def("voxelize_dynamic(Tensor points, Tensor? batch, float[] voxel_size, float[] point_cloud_range) "
        "-> (Tensor coords, Tensor num_points, Tensor point_voxel)");
  // Hard: the first max_voxels voxels of each sample (-1: no cap) and the first
  // max_points points of each voxel, in input order, as voxels [M, max_points, C]
  // (zero-padded); num_points = stored points; point_voxel = -2 for a point whose
  // voxel was beyond max_voxels (a point beyond max_points keeps its voxel's row).
  m.def("voxelize_hard(Tensor points, Tensor? batch, float[] voxel_size, float[] point_cloud_range, "
        "int max_points, int max_voxels) -> (Tensor voxels, Tensor coords, Tensor num_points, Tensor point_voxel)");
}
