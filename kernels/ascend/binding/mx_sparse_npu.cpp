// PrivateUse1 (NPU) implementations of torch.ops.mx_sparse, built only when torch_npu and CANN are
// present (setup.py detection); in CI here this file is compiled with -fsyntax-only against the
// torch 2.14 + torch-npu 2.14.0 headers (tests/ascend/test_npu_binding_compiles.py).
//
// Calls follow the aclnn two-phase pattern through op-plugin's EXEC_NPU_CMD
// (aclnnXxxGetWorkspaceSize -> workspace allocation -> aclnnXxx on the current NPU stream), with
// the outputs allocated by ATen beforehand. What an AscendC kernel does not support is checked
// here before launch, with a clear error:
//   * K > 125 for the maps, Cin/Cout > 65535 per group, dtypes other than fp32/fp16/bf16.
// The map builders' arguments and index values are checked as on the CPU, with the same messages
// (kernels/ops/op_args.h, index_checks_generic.h); transpose_map is kernels/ops' tensor-operator
// version (transpose_map_generic.h), checks included.
// groups > 1 is a composition of our kernels, not a kernel of its own: the AscendC kernels compute
// one group, so gather_mm / gather_mm_backprop_filter launch once per group on the channel slices
// (features[:, g*Cin_g : (g+1)*Cin_g], weight[:, :, g*Cout_g : (g+1)*Cout_g], grad[:, g*Cout_g ...])
// and concatenate the results along the output channels (see per_group below).
// Host-side parts of the map builders are torch ops on NPU tensors (documented split, see
// docs/en/ascend.md): int64 key packing of the input voxels, the sorts, unpacking of the output keys
// and the un-permutation. AscendC kernels: the sorted-key lookup SubmMap, and for the strided conv
// the output keys of every (input, offset) pair (ConvOutKeys) and their unique (UniqueSortedKeys).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

#include "op_plugin/utils/op_api_common.h"

#include "../../ops/index_checks_generic.h"  // the argument and index checks every backend shares
#include "../../ops/transpose_map_generic.h"

namespace mxs_npu {
namespace {

constexpr int64_t kMaxKvolLookup = 125;
constexpr int64_t kMaxMatmulDim = 65535;
constexpr int64_t kMaxKeyCoord = int64_t{1} << 24;  // ConvOutKeys works on coordinates in float-exact range

void check_float(const at::Tensor& t, const char* name) {
  const auto s = t.scalar_type();
  TORCH_CHECK_VALUE(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, name,
                    ": the Ascend kernels support float32, float16 and bfloat16, got ", s);
}

void check_map(const at::Tensor& nbr, const char* name) {
  TORCH_CHECK_VALUE(nbr.dim() == 2 && nbr.scalar_type() == at::kInt, name, ": expected an int32 [M, K] map, got ",
                    nbr.scalar_type(), " ", nbr.sizes());
}

// Channel slices of one group: [g * width, (g + 1) * width) on dim 1 (features, grad) or 2 (weight).
struct GroupWidths {
  int64_t cin, cout;
};

GroupWidths check_groups(int64_t groups, int64_t cin, int64_t cout) {
  TORCH_CHECK_VALUE(groups >= 1 && cin % groups == 0 && cout % groups == 0, "groups: ", groups,
                    " must be >= 1 and divide the input channels (", cin, ") and output channels (", cout, ")");
  return {cin / groups, cout / groups};
}

// groups > 1 as a composition of the one-group kernels: one launch per group, results concatenated
// along cat_dim (the output channels). A single group calls the kernel on the tensors themselves.
template <typename OneGroup>
at::Tensor per_group(int64_t groups, int64_t cat_dim, const OneGroup& one_group) {
  if (groups == 1) return one_group(0);
  std::vector<at::Tensor> parts;
  parts.reserve(groups);
  for (int64_t g = 0; g < groups; ++g) parts.push_back(one_group(g));
  return at::cat(parts, cat_dim);
}

// Key offsets of the kernel window on a padded grid; centered for the submanifold map.
at::Tensor lookup_deltas(c10::IntArrayRef kernel, c10::IntArrayRef dilation, const std::vector<int64_t>& padded,
                         bool centered, const at::Device& dev) {
  int64_t kvol = 1;
  for (auto k : kernel) kvol *= k;
  std::vector<int64_t> d(kvol);
  const int64_t nd = static_cast<int64_t>(kernel.size());
  for (int64_t k = 0; k < kvol; ++k) {
    int64_t rem = k, delta = 0, stride = 1;
    for (int64_t a = nd - 1; a >= 0; --a) {
      const int64_t kp = rem % kernel[a];
      rem /= kernel[a];
      delta += (kp - (centered ? kernel[a] / 2 : 0)) * dilation[a] * stride;
      stride *= padded[a];
    }
    d[k] = delta;
  }
  return at::tensor(d, at::TensorOptions().dtype(at::kLong)).to(dev);
}

// nbrS[s, k] = position in ckeys of qkeys[s] + delta_k, or -1 (AscendC kernel SubmMap).
// key_bound: every key and every key + delta_k lies in [0, batch * prod(padded)) -- the kernel compares
// 32-bit low words when that range is below 2^30 (exact two-word compares otherwise).
at::Tensor lookup(const at::Tensor& qkeys, const at::Tensor& ckeys, c10::IntArrayRef kernel, c10::IntArrayRef dilation,
                  const std::vector<int64_t>& padded, bool centered, int64_t batch_size) {
  int64_t kvol = 1;
  for (auto k : kernel) kvol *= k;
  TORCH_CHECK_VALUE(kvol <= kMaxKvolLookup, "kernel_size: the Ascend map kernel supports kernel volumes up to ",
                    kMaxKvolLookup, " (5x5x5), got ", kvol, "; build this map on the CPU backend");
  at::Tensor nbrs = at::empty({qkeys.size(0), kvol}, qkeys.options().dtype(at::kInt));
  if (qkeys.size(0) == 0) return nbrs;
  const at::Tensor deltas = lookup_deltas(kernel, dilation, padded, centered, qkeys.device());
  const int64_t group = kernel[kernel.size() - 1];
  int64_t key_bound = batch_size;
  for (auto p : padded) key_bound = p > 0 && key_bound <= INT64_MAX / p ? key_bound * p : 0;  // 0: unknown, exact compares
  EXEC_NPU_CMD(aclnnSubmMap, qkeys, ckeys, deltas, group, key_bound, nbrs);
  return nbrs;
}

at::Tensor pack_keys(const at::Tensor& idx64, const std::vector<int64_t>& shape, const std::vector<int64_t>& shift,
                     const std::vector<int64_t>& scale) {
  at::Tensor key = idx64.select(1, 0).clone();
  for (size_t d = 0; d < shape.size(); ++d)
    key = key * shape[d] + idx64.select(1, 1 + d) * scale[d] + shift[d];
  return key;
}

// Sorted unique int64 keys of the output voxels of a strided conv (canonical output order):
// AscendC ConvOutKeys -> at::sort (torch_npu; no AscendC sort: documented split) -> AscendC
// UniqueSortedKeys. The number of outputs is data dependent, so reading it is one host sync (as in
// torch.unique).
at::Tensor conv_output_keys(const at::Tensor& indices, c10::IntArrayRef spatial_shape, int64_t batch_size,
                            c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                            c10::IntArrayRef dilation) {
  int64_t kvol = 1;
  for (auto k : kernel_size) kvol *= k;
  TORCH_CHECK_VALUE(kvol <= kMaxKvolLookup, "kernel_size: the Ascend map kernels support kernel volumes up to ",
                    kMaxKvolLookup, " (5x5x5), got ", kvol, "; build this map on the CPU backend");
  TORCH_CHECK_VALUE(batch_size >= 1 && batch_size <= kMaxKeyCoord, "batch_size: the Ascend strided-conv map supports "
                    "1 <= batch_size <= 2^24, got ", batch_size);
  for (size_t d = 0; d < spatial_shape.size(); ++d)
    TORCH_CHECK_VALUE(spatial_shape[d] + padding[d] < kMaxKeyCoord && (kernel_size[d] - 1) * dilation[d] < kMaxKeyCoord,
                      "spatial_shape: the Ascend strided-conv map needs extent + padding < 2^24 on every axis; "
                      "build this map on the CPU backend");
  TORCH_CHECK_VALUE(indices.size(0) * kvol < INT32_MAX && indices.size(0) < (int64_t{1} << 29),
                    "indices: the Ascend strided-conv map supports N * kernel volume < 2^31 pairs, got ",
                    indices.size(0), " x ", kvol);
  const auto opts64 = indices.options().dtype(at::kLong);
  if (indices.size(0) == 0) return at::empty({0}, opts64);
  at::Tensor cand = at::empty({kvol * indices.size(0)}, opts64);
  EXEC_NPU_CMD(aclnnConvOutKeys, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, cand);
  const at::Tensor sorted = std::get<0>(at::sort(cand, /*dim=*/0, /*descending=*/false));
  at::Tensor ukeys = at::empty_like(sorted);
  at::Tensor count = at::empty({1}, indices.options().dtype(at::kInt));
  EXEC_NPU_CMD(aclnnUniqueSortedKeys, sorted, ukeys, count);
  return ukeys.narrow(0, 0, count.item<int32_t>());
}

// The CPU builders' index value checks, with tensor operators: the lookup kernel's low-word key
// compares (key_bound) hold only for rows inside the grid, and a duplicate voxel has no
// well-defined map.
void check_index_rows(const at::Tensor& indices, c10::IntArrayRef spatial_shape, int64_t batch_size) {
  TORCH_CHECK_VALUE(indices.size(0) < INT32_MAX, "indices: ", indices.size(0),
                    " rows do not fit the int32 neighbor map; expected fewer than 2^31 - 1");
  mxs::check_index_values_generic(indices, spatial_shape, batch_size);
}

}  // namespace

at::Tensor build_subm_map_npu(const at::Tensor& indices, c10::IntArrayRef spatial_shape, int64_t batch_size,
                              c10::IntArrayRef kernel_size, c10::IntArrayRef dilation) {
  const mxs::Grid grid = mxs::make_grid(spatial_shape, batch_size);
  mxs::check_indices(indices, grid.ndim);
  const size_t nd = spatial_shape.size();
  const std::vector<int64_t> unit(nd, 1), none(nd, 0);
  mxs::make_geometry(grid.ndim, kernel_size, unit, none, dilation);
  check_index_rows(indices, spatial_shape, batch_size);
  std::vector<int64_t> padded(nd), shift(nd), one(nd, 1);
  for (size_t d = 0; d < nd; ++d) {
    shift[d] = (kernel_size[d] / 2) * dilation[d];
    padded[d] = spatial_shape[d] + 2 * shift[d];
  }
  const at::Tensor key = pack_keys(indices.to(at::kLong), padded, shift, one);
  auto sorted = at::sort(key, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor keys = std::get<0>(sorted).contiguous();
  const at::Tensor perm = std::get<1>(sorted);
  const at::Tensor nbrs = lookup(keys, keys, kernel_size, dilation, padded, /*centered=*/true, batch_size);
  const at::Tensor perm32 = perm.to(at::kInt);
  const at::Tensor mapped = at::where(nbrs.ge(0), perm32.index_select(0, nbrs.clamp_min(0).flatten().to(at::kLong))
                                                      .view(nbrs.sizes()),
                                      at::full_like(nbrs, -1));
  at::Tensor out = at::empty_like(mapped);
  out.index_copy_(0, perm, mapped);
  return out;
}

std::tuple<at::Tensor, at::Tensor> build_conv_map_npu(const at::Tensor& indices, c10::IntArrayRef spatial_shape,
                                                      int64_t batch_size, c10::IntArrayRef kernel_size,
                                                      c10::IntArrayRef stride, c10::IntArrayRef padding,
                                                      c10::IntArrayRef dilation) {
  const mxs::Grid grid = mxs::make_grid(spatial_shape, batch_size);
  mxs::check_indices(indices, grid.ndim);
  const mxs::ConvGeometry geo = mxs::make_geometry(grid.ndim, kernel_size, stride, padding, dilation);
  mxs::conv_output_grid(grid, geo, spatial_shape, batch_size);
  check_index_rows(indices, spatial_shape, batch_size);
  const int64_t nd = static_cast<int64_t>(spatial_shape.size());
  std::vector<int64_t> out_shape(nd), padded(nd), lo(nd), zero(nd, 0), one(nd, 1), strides(nd);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t span = spatial_shape[d] + 2 * padding[d] - dilation[d] * (kernel_size[d] - 1) - 1;
    out_shape[d] = (span >= 0 ? span / stride[d] : -((-span + stride[d] - 1) / stride[d])) + 1;
    TORCH_CHECK_VALUE(out_shape[d] > 0, "spatial_shape: empty output extent on axis ", d);
    const int64_t hi = std::max<int64_t>(0, (out_shape[d] - 1) * stride[d] - padding[d] +
                                                (kernel_size[d] - 1) * dilation[d] - (spatial_shape[d] - 1));
    lo[d] = padding[d];
    padded[d] = spatial_shape[d] + padding[d] + hi;
    strides[d] = stride[d];
  }
  const auto opts64 = indices.options().dtype(at::kLong);
  const at::Tensor idx = indices.to(at::kLong);
  const at::Tensor okeys = conv_output_keys(indices.contiguous(), spatial_shape, batch_size, kernel_size, stride,
                                            padding, dilation);
  // output coordinates (canonical order) and query base keys pack_in(o * s) on the padded input grid
  at::Tensor oc = at::empty({okeys.size(0), nd + 1}, opts64);
  at::Tensor rem = okeys.clone();
  for (int64_t d = nd - 1; d >= 0; --d) {
    oc.select(1, 1 + d).copy_(rem.remainder(out_shape[d]));
    rem = rem.div(out_shape[d], "floor");
  }
  oc.select(1, 0).copy_(rem);
  const at::Tensor qkeys = pack_keys(oc, padded, zero, strides).contiguous();
  const at::Tensor ckey = pack_keys(idx, padded, lo, one);
  auto sorted = at::sort(ckey, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor ckeys = std::get<0>(sorted).contiguous();
  const at::Tensor perm32 = std::get<1>(sorted).to(at::kInt);
  const at::Tensor nbrs = lookup(qkeys, ckeys, kernel_size, dilation, padded, /*centered=*/false, batch_size);
  const at::Tensor nbr = at::where(nbrs.ge(0), perm32.index_select(0, nbrs.clamp_min(0).flatten().to(at::kLong))
                                                   .view(nbrs.sizes()),
                                   at::full_like(nbrs, -1));
  return {oc.to(at::kInt), nbr};
}

namespace {

// One group (AscendC GatherMm): out[m] = sum_k features[nbr[m, k]] @ weight[k], weight [K, Cin, Cout].
at::Tensor gather_mm_one_group(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr) {
  TORCH_CHECK_VALUE(features.size(1) <= kMaxMatmulDim && weight.size(2) <= kMaxMatmulDim,
                    "channels: the Ascend gather_mm supports Cin, Cout <= ", kMaxMatmulDim, " per group");
  at::Tensor out = at::empty({nbr.size(0), weight.size(2)}, features.options());
  if (nbr.size(0) == 0) return out;
  const at::Tensor f = features.contiguous(), w = weight.contiguous(), n = nbr.contiguous();
  EXEC_NPU_CMD(aclnnGatherMm, f, w, n, out);
  return out;
}

// One group (AscendC GatherMmBackpropFilter): dW[k] = sum_m features[nbr[m, k]]^T (x) grad[m].
at::Tensor backprop_filter_one_group(const at::Tensor& features, const at::Tensor& grad, const at::Tensor& nbr) {
  TORCH_CHECK_VALUE(grad.size(1) <= kMaxMatmulDim, "channels: the Ascend kernel supports Cout <= ", kMaxMatmulDim,
                    " per group");
  at::Tensor dw = at::empty({nbr.size(1), features.size(1), grad.size(1)}, features.options());
  if (nbr.size(0) == 0) return dw.zero_();
  const at::Tensor f = features.contiguous(), g = grad.contiguous(), n = nbr.contiguous();
  EXEC_NPU_CMD(aclnnGatherMmBackpropFilter, f, g, n, dw);
  return dw;
}

}  // namespace

at::Tensor gather_mm_npu(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                         const std::optional<at::Tensor>& nbr_t, int64_t groups, bool symmetric) {
  (void)nbr_t, (void)symmetric;  // read by autograd only
  check_float(features, "features");
  check_map(nbr, "nbr");
  TORCH_CHECK_VALUE(weight.scalar_type() == features.scalar_type() && weight.dim() == 3 &&
                        weight.size(0) == nbr.size(1),
                    "weight: expected [K, Cin/groups, Cout] of the features' dtype, got ", weight.scalar_type(), " ",
                    weight.sizes());
  const GroupWidths gw = check_groups(groups, features.size(1), weight.size(2));
  TORCH_CHECK_VALUE(weight.size(1) == gw.cin, "weight: expected Cin/groups = ", gw.cin,
                    " input channels per group, got ", weight.sizes());
  // group g: features[:, g*Cin_g : (g+1)*Cin_g] and weight[:, :, g*Cout_g : (g+1)*Cout_g] -> out[:, g*Cout_g ...]
  return per_group(groups, /*cat_dim=*/1, [&](int64_t g) {
    return gather_mm_one_group(features.narrow(1, g * gw.cin, gw.cin), weight.narrow(2, g * gw.cout, gw.cout), nbr);
  });
}

at::Tensor gather_mm_backprop_filter_npu(const at::Tensor& features, const at::Tensor& grad, const at::Tensor& nbr,
                                         const std::optional<at::Tensor>& nbr_t, int64_t groups, bool symmetric) {
  (void)nbr_t, (void)symmetric;  // read by autograd only
  check_float(features, "features");
  check_map(nbr, "nbr");
  TORCH_CHECK_VALUE(grad.scalar_type() == features.scalar_type() && grad.dim() == 2 && grad.size(0) == nbr.size(0),
                    "grad: expected [M, Cout] of the features' dtype, got ", grad.scalar_type(), " ", grad.sizes());
  const GroupWidths gw = check_groups(groups, features.size(1), grad.size(1));
  // group g: features[:, g*Cin_g ...] and grad[:, g*Cout_g ...] -> dW[:, :, g*Cout_g ...] of dW [K, Cin_g, Cout]
  return per_group(groups, /*cat_dim=*/2, [&](int64_t g) {
    return backprop_filter_one_group(features.narrow(1, g * gw.cin, gw.cin), grad.narrow(1, g * gw.cout, gw.cout),
                                     nbr);
  });
}

}  // namespace mxs_npu

namespace mxs_npu {
namespace {

// transpose_map has no AscendC kernel: the tensor-operator version (kernels/ops), which torch_npu
// runs on the device, with the CPU kernel's checks.
at::Tensor transpose_map_npu(const at::Tensor& nbr, int64_t num_rows) {
  return mxs::transpose_map_generic(nbr, num_rows);
}

}  // namespace
}  // namespace mxs_npu

TORCH_LIBRARY_IMPL(mx_sparse, PrivateUse1, m) {
  m.impl("transpose_map", &mxs_npu::transpose_map_npu);
  m.impl("build_subm_map", &mxs_npu::build_subm_map_npu);
  m.impl("build_conv_map", &mxs_npu::build_conv_map_npu);
  m.impl("gather_mm", &mxs_npu::gather_mm_npu);
  m.impl("gather_mm_backprop_filter", &mxs_npu::gather_mm_backprop_filter_npu);
}
