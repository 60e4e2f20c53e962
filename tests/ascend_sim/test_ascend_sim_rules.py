"""Rule-rejection tests: every enforced rule of ASCENDC_REFERENCE.md §9 has at least one
deliberately wrong kernel in bad_kernels.cpp; the emulator must abort with
``ASCEND-SIM RULE <id> violated in <API> (kernel <name>, core <idx>)``."""
import re

import pytest

from ascend_sim_build import run_bin

# case -> (rule id, API named in the message)
CASES = {
    "a1_ub_overflow": ("A1", "TPipe::InitBuffer"),
    "a1_zero_len": ("A1", "TPipe::InitBuffer"),
    "a2_select_scratch": ("A2", "Select"),
    "a3_too_many_handles": ("A3", "TPipe::InitBuffer"),
    "a3_num_zero": ("A3", "TPipe::InitBuffer"),
    "a4_nine_tensors": ("A4", "TQue::AllocTensor"),
    "a5_two_pipes": ("A5", "TPipe::TPipe"),
    "a5_matmul_after_initbuffer": ("A5", "REGIST_MATMUL_OBJ"),
    "a6_tbuf_get_too_big": ("A6", "TBuf::Get"),
    "a6_getwithoffset_unaligned": ("A6", "TBuf::GetWithOffset"),
    "b8_datacopy_ub_overflow": ("B8", "DataCopy(GM->UB)"),
    "b8_vector_overflow": ("B8", "Adds"),
    "b8_gathermask_normal_tail": ("B8", "GatherMask"),
    "b9_gm_write_oob": ("B9", "DataCopy(UB->GM)"),
    "b9_gm_read_far": ("B9", "DataCopyPad(GM->UB)"),
    "b9_not_gmalloc": ("B9", "DataCopy(GM->UB)"),
    "b10_local_getvalue": ("B10", "LocalTensor::GetValue"),
    "b10_global_setvalue": ("B10", "GlobalTensor::SetValue"),
    "c11_unaligned_ub_dma": ("C11", "DataCopy(GM->UB)"),
    "c11_unaligned_vector": ("C11", "Adds"),
    "c12_datacopy_len": ("C12", "DataCopy(GM->UB)"),
    "c12_gm_misaligned": ("C12", "DataCopy(GM->UB)"),
    "c13_blockcount": ("C13", "DataCopy(GM->UB)"),
    "c13_pad_too_wide": ("C13", "DataCopyPad(GM->UB)"),
    "c13_blocklen_not_multiple": ("C13", "DataCopyPad(GM->UB)"),
    "c14_stride_units": ("C14", "DataCopyPad(GM->UB)"),
    "d15_alloc_exhausted": ("D15", "TQue::AllocTensor"),
    "d15_deque_empty": ("D15", "TQue::DeQue"),
    "d15_double_free": ("D15", "TQue::FreeTensor"),
    "d15_enque_over_depth": ("D15", "TQue::EnQue"),
    "d15_free_other_queue": ("D15", "TQue::FreeTensor"),
    "d15_free_enqueued": ("D15", "TQue::FreeTensor"),
    "e17_wait_without_set": ("E17", "WaitFlag"),
    "e17_double_set": ("E17", "SetFlag"),
    "e17_leftover_set": ("E17", "kernel exit"),
    "e17_bad_id": ("E17", "SetFlag"),
    "e18_pipe_barrier_s": ("E18", "PipeBarrier"),
    "e19_missing_mte2_v": ("E19", "Adds"),
    "e19_war_v_mte2": ("E19", "DataCopy(GM->UB)"),
    "e19_vecin_read_by_mte3": ("E19", "DataCopy(UB->GM)"),
    "e19_vecout_reuse_without_free": ("E19", "Duplicate"),
    "e20_overlapping_writes": ("E20", "kernel end"),
    "e20_read_other_core_write": ("E20", "kernel end"),
    "e20_syncall_missing_core": ("E20", ""),
    "e20_syncall_multiwave": ("E20", "SyncAll"),
    "e20_atomic_vs_plain": ("E20", "kernel end"),
    "e21_read_before_wait": ("E21", "DataCopy(GM->UB)"),
    "e21_write_a_before_wait": ("E21", "DataCopy(UB->GM)"),
    "e21_never_waited": ("E21", "kernel exit"),
    "f23_mask_too_big": ("F23", "Adds"),
    "f24_int32_compare_lt": ("F24", "Compares"),
    "f24_cast_float_int32_none": ("F24", "Cast"),
    "f24_add_int64": ("F24", "Add"),
    "f25_compare_count": ("F25", "Compares"),
    "f26_gather_alias": ("F26", "Gather"),
    "f27_gather_offset_unaligned": ("F27", "Gather"),
    "g28_atomic_type": ("G28", "SetAtomicAdd"),
    "g28_atomic_type_mismatch": ("G28", "DataCopy(UB->GM)"),
    "h29_blockdim_zero": ("H29", "ICPU_RUN_KF"),
    "h29_blockdim_too_large": ("H29", "ICPU_RUN_KF"),
    "h29_mix_too_many_blocks": ("H29", "ICPU_RUN_KF"),
    "h29_matmul_in_aiv_mode": ("H29", "REGIST_MATMUL_OBJ"),
    "h29_declared_mix_in_aiv": ("H29", "KERNEL_TASK_TYPE_DEFAULT"),
    "i32_transpose_without_istrans": ("I32", "Matmul::SetTensorA"),
    "d15_depth0_returning_alloc": ("D15", "TQue::AllocTensor"),
    "d15_queue_after_destroy": ("D15", "TQue::AllocTensor"),
    "c13_pad64_value": ("C13", "DataCopyPad(GM->UB)"),
    "f23_dst_blk_stride_zero": ("F23", "Adds"),
    "f26_cast_widening_inplace": ("F26", "Cast"),
    "e21_second_async_without_wait": ("E21", "Matmul::IterateAll<false>"),
    "i32_single_shape_zero": ("I32", "Matmul::SetSingleShape"),
}
WARN_CASES = {"w_overread_small": "B9", "w_atomic_left_on": "D16"}
# Rules of the real runtime that the emulator's execution cannot show (it runs Matmul on the AIV, has
# no TQue event pool and compiles every API form): warnings, fatal in strict mode, each with the
# broken form -> (rule, API named) and extra environment.
STRICT_CASES = {
    "j33_literal_event_id": ("J33", "SetFlag", {}),
    "j33_event_collides_with_queue": ("J33", "SetFlag", {}),
    "j34_syncall_false_after_matmul": ("J34", "SyncAll", {}),
    "j35_compares_before_9_0": ("J35", "Compares", {}),
    "j35_compares_before_9_0@8.5": ("J35", "Compares", {"ASCEND_SIM_CANN_VERSION": "8.5"}),
    "j35_int32_comparescalar_before_8_2": ("J35", "CompareScalar<int32_t>", {}),
    "j36_tiling_not_registered": ("J36", "GET_TILING_DATA", {}),
}
# the corrected forms pass strict mode (and the version rule follows the targeted release)
STRICT_OK_CASES = {
    "ok_pool_event_ids": {}, "ok_syncall_aiv_after_matmul": {}, "ok_float_comparescalar": {},
    "ok_tiling_registered": {},
    "j35_compares_before_9_0@9.0": {"ASCEND_SIM_CANN_VERSION": "9.0"},
    "j35_int32_comparescalar_before_8_2@8.2": {"ASCEND_SIM_CANN_VERSION": "8.2"},
}

REQUIRED = {"A1", "A3", "A4", "A5", "A6", "B8", "B9", "B10", "C11", "C12", "C13", "C14", "D15", "E17", "E20", "E21",
            "G28", "H29"}

MSG = re.compile(r"ASCEND-SIM RULE (\w+) violated in (.+?) \(kernel (\S+), (core \d+|host)\): (.+)")


def test_every_required_rule_has_a_rejection_case():
    assert REQUIRED <= {rule for rule, _ in CASES.values()}


def test_case_list_matches_program(sim_bins):
    proc = run_bin(sim_bins["bad_kernels"], ["--list"])
    strict = {c.split("@")[0] for c in list(STRICT_CASES) + list(STRICT_OK_CASES)}
    assert set(proc.stdout.split()) == set(CASES) | set(WARN_CASES) | strict


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_kernel_is_rejected(sim_bins, case):
    rule, api = CASES[case]
    proc = run_bin(sim_bins["bad_kernels"], [case])
    assert proc.returncode == 86, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "NO VIOLATION DETECTED" not in proc.stdout
    m = MSG.search(proc.stderr)
    assert m, proc.stderr
    assert m.group(1) == rule, proc.stderr
    assert api in m.group(2), proc.stderr
    # the kernel is named (host-side launch checks name the kernel being launched)
    assert m.group(3) in (case, "h29_kernel"), proc.stderr


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_race_detection_independent_of_core_order(sim_bins, seed):
    proc = run_bin(sim_bins["bad_kernels"], ["e20_read_other_core_write"], {"ASCEND_SIM_SEED": seed})
    assert proc.returncode == 86 and "RULE E20" in proc.stderr


@pytest.mark.parametrize("case", sorted(WARN_CASES))
def test_warning_and_strict_mode_rejects(sim_bins, case):
    """W rules (a GM over-read of < 32 B from DMA rounding; atomic mode left on at kernel end)
    only warn, unless ASCEND_SIM_STRICT=1."""
    rule = WARN_CASES[case]
    proc = run_bin(sim_bins["bad_kernels"], [case])
    assert proc.returncode == 0 and f"ASCEND-SIM WARNING {rule}" in proc.stderr, proc.stderr
    proc = run_bin(sim_bins["bad_kernels"], [case], {"ASCEND_SIM_STRICT": "1"})
    assert proc.returncode == 86 and f"RULE {rule}" in proc.stderr, proc.stderr


def test_hazard_checker_can_be_disabled(sim_bins):
    """ASCEND_SIM_HAZARDS=0 switches rule E19 off (escape hatch while porting a kernel)."""
    proc = run_bin(sim_bins["bad_kernels"], ["e19_missing_mte2_v"], {"ASCEND_SIM_HAZARDS": "0"})
    assert proc.returncode == 0 and "NO VIOLATION DETECTED" in proc.stdout, proc.stderr


@pytest.mark.parametrize("case", sorted(STRICT_CASES))
def test_strict_mode_rejects_the_old_form(sim_bins, case):
    rule, api, env = STRICT_CASES[case]
    name = case.split("@")[0]
    proc = run_bin(sim_bins["bad_kernels"], [name], env)
    assert proc.returncode == 0 and f"ASCEND-SIM WARNING {rule} in {api}" in proc.stderr, proc.stderr
    proc = run_bin(sim_bins["bad_kernels"], [name], {**env, "ASCEND_SIM_STRICT": "1"})
    assert proc.returncode == 86, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    m = MSG.search(proc.stderr)
    assert m and m.group(1) == rule and api in m.group(2) and m.group(3) == name, proc.stderr


@pytest.mark.parametrize("case", sorted(STRICT_OK_CASES))
def test_strict_mode_accepts_the_portable_form(sim_bins, case):
    proc = run_bin(sim_bins["bad_kernels"], [case.split("@")[0]], {**STRICT_OK_CASES[case], "ASCEND_SIM_STRICT": "1"})
    assert proc.returncode == 0 and "NO VIOLATION DETECTED" in proc.stdout, proc.stderr
    assert "ASCEND-SIM WARNING" not in proc.stderr, proc.stderr
