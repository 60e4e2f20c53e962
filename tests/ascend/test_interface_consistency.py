"""tools/ascend_consistency/check_interfaces.py: OpDef <-> generated aclnn prototype <-> binding calls
<-> kernel entry <-> tiling struct, parsed from the sources. It passes on the repository and fails,
naming the mismatch, on a copy with one seeded inconsistency each."""
import importlib.util
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("check_interfaces",
                                                  REPO / "tools" / "ascend_consistency" / "check_interfaces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_repository_interfaces_are_consistent():
    ops, calls, problems, _ = _tool().check(REPO)
    assert problems == []
    assert {e["opdef"].op_type for e in ops.values()} == {
        "SubmMap", "ConvOutKeys", "UniqueSortedKeys", "GatherMm", "GatherMmBackpropFilter"}
    assert {c.op_type for c in calls} == {e["opdef"].op_type for e in ops.values()}


def test_generated_prototype_follows_cann_naming():
    ops, _, _, _ = _tool().check(REPO)
    sm = ops["subm_map"]["opdef"].aclnn_prototype()
    assert sm.startswith("aclnnStatus aclnnSubmMapGetWorkspaceSize(const aclTensor* qkeys, const aclTensor* ckeys, "
                         "const aclTensor* deltas, int64_t group_size, int64_t key_bound, aclTensor* out, ")
    assert "aclTensor* ukeysOut, aclTensor* countOut" in ops["unique_sorted_keys"]["opdef"].aclnn_prototype()
    assert "const aclIntArray* spatial_shape, int64_t batch_size" in ops["conv_out_keys"]["opdef"].aclnn_prototype()


def _seeded(tmp_path, rel, old, new):
    root = tmp_path / "repo"
    shutil.copytree(REPO / "kernels" / "ascend", root / "kernels" / "ascend",
                    ignore=shutil.ignore_patterns("build"))
    f = root / "kernels" / "ascend" / rel
    text = f.read_text()
    assert old in text, f"seed anchor not found in {rel}"
    f.write_text(text.replace(old, new, 1))
    return _tool().check(root)[2]


SEEDS = {
    # an attr dropped from the OpDef: the binding still passes 6 arguments to aclnnSubmMap
    "attr_removed": ("subm_map/op_host/subm_map_cann.cpp", 'this->Attr("key_bound").AttrType(REQUIRED).Int();', "",
                     "aclnnSubmMap called with 6 arguments"),
    # two kernel arguments swapped against the OpDef's input order
    "kernel_args_swapped": ("gather_mm/op_kernel/gather_mm.cpp", "void gather_mm(GM_ADDR features, GM_ADDR weight, GM_ADDR nbr",
                            "void gather_mm(GM_ADDR features, GM_ADDR nbr, GM_ADDR weight",
                            "does not take the OpDef's GM arguments in order"),
    # the binding passes a tensor where the prototype has the Int attr group_size
    "binding_arg_kind": ("binding/mx_sparse_npu.cpp", "EXEC_NPU_CMD(aclnnSubmMap, q, c, d, group,",
                         "EXEC_NPU_CMD(aclnnSubmMap, q, c, d, d,", "argument `d` is tensor, parameter group_size"),
    # tiling struct field moved to a misaligned offset
    "tiling_misaligned": ("subm_map/op_host/subm_map_tiling_data.h", "    int64_t numVoxels;", "    int32_t pad0;\n    int64_t numVoxels;",
                          "SubmMapTilingData.numVoxels at byte 4 is not aligned"),
    # tiling registration removed from a kernel entry
    "tiling_not_registered": ("unique_sorted_keys/op_kernel/unique_sorted_keys.cpp",
                              "REGISTER_TILING_DEFAULT(UniqueSortedKeysTilingData);", "",
                              "does not register its tiling struct"),
    # a dtype column dropped from the OpDef while the kernel still instantiates three types
    "dtype_column": ("gather_mm_backprop_filter/op_host/gather_mm_backprop_filter_cann.cpp",
                     'this->Input("features").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})',
                     'this->Input("features").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16})',
                     "DataType lists of different lengths"),
    # a variant's tiling-key branch (GatherMm reading the weight transposed) instantiating another dtype
    "variant_dtype": ("gather_mm/op_kernel/gather_mm.cpp", "GatherMmKernel<half, true> op;",
                      "GatherMmKernel<float, true> op;", "kernel tiling-key branches instantiate"),
    # the binding omits GatherMm's weight_layout attribute
    "attr_not_passed": ("binding/mx_sparse_npu.cpp", "EXEC_NPU_CMD(aclnnGatherMm, f, w, n, weight_layout, out);",
                        "EXEC_NPU_CMD(aclnnGatherMm, f, w, n, out);", "aclnnGatherMm called with 4 arguments"),
    # the kernel entry renamed: CANN looks the kernel up by snake_case(OpType)
    "kernel_renamed": ("conv_out_keys/op_kernel/conv_out_keys.cpp", "void conv_out_keys(", "void conv_out_key(",
                       "CANN expects `conv_out_keys`"),
}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seeded_mismatch_is_caught(tmp_path, seed):
    rel, old, new, expected = SEEDS[seed]
    problems = _seeded(tmp_path, rel, old, new)
    assert any(expected in p for p in problems), problems


THIN_BINDING = '''
// a thin primitive launch, as the orchestration rewrite writes them
at::Tensor sorted_key_lookup(const at::Tensor& query_keys, const at::Tensor& sorted_keys,
                             const at::Tensor& key_deltas, int64_t group, int64_t key_bound) {
  auto out = at::empty({query_keys.size(0), key_deltas.size(0)}, query_keys.options().dtype(at::kInt));
  EXEC_NPU_CMD(aclnnSubmMap, query_keys, sorted_keys, key_deltas, group, key_bound, out);
  return out;
}
at::Tensor conv_out_keys(const at::Tensor& indices, at::IntArrayRef spatial_shape, int64_t batch_size,
                         at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                         at::IntArrayRef dilation) {
  auto keys = at::empty({indices.size(0)}, indices.options().dtype(at::kLong));
  EXEC_NPU_CMD(aclnnConvOutKeys, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, keys);
  return keys;
}
std::tuple<at::Tensor, at::Tensor> unique_sorted_keys(const at::Tensor& sorted) {
  at::Tensor ukeys = at::empty_like(sorted), count = at::empty({1}, sorted.options().dtype(at::kInt));
  EXEC_NPU_CMD(aclnnUniqueSortedKeys, sorted, ukeys, count);
  return {ukeys, count};
}
at::Tensor gather_mm(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr, int64_t cout,
                     int64_t weight_layout) {
  auto f = features.contiguous();
  auto w = weight.contiguous();
  auto out = at::empty({nbr.size(0), cout}, features.options());
  EXEC_NPU_CMD(aclnnGatherMm, f, w, nbr, weight_layout, out);
  return out;
}
at::Tensor gather_mm_backprop_filter_one_group(const at::Tensor& features, const at::Tensor& grad, const at::Tensor& nbr) {
  auto dw = at::empty({nbr.size(1), features.size(1), grad.size(1)}, features.options());
  EXEC_NPU_CMD(aclnnGatherMmBackpropFilter, features, grad, nbr, dw);
  return dw;
}
'''


def test_thin_primitive_binding_is_parsed_too(tmp_path):
    """The binding rewritten as thin primitive launches (same aclnn calls, other names, `auto`)."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "kernels" / "ascend", root / "kernels" / "ascend", ignore=shutil.ignore_patterns("build"))
    (root / "kernels" / "ascend" / "binding" / "mx_sparse_npu.cpp").write_text(THIN_BINDING)
    _, calls, problems, notes = _tool().check(root)
    assert problems == [] and notes == [] and len(calls) == 5
    bad = THIN_BINDING.replace("query_keys, sorted_keys, key_deltas, group, key_bound, out);",
                               "query_keys, sorted_keys, key_deltas, key_bound, out);")
    (root / "kernels" / "ascend" / "binding" / "mx_sparse_npu.cpp").write_text(bad)
    assert any("aclnnSubmMap called with 5 arguments" in p for p in _tool().check(root)[2])
