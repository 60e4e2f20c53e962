"""Markdown tables, the chart and the docs pages (English and Chinese) from results.json."""
import os
from typing import Dict, List, Optional

MX = "mx_sparse"


# ---------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------
def spconv_names(res) -> Dict[str, str]:
    """Variant names: oracle (1 thread), shipped T-thread (racy), fixed T-thread."""
    t = res["threads"]
    have = {v["name"] for v in res["variants"]}
    return {k: (n if n in have else None) for k, n in
            (("one", "spconv-1t"), ("racy", f"spconv-{t}t"), ("fix", f"spconv-{t}t-fix"))}


def best_correct(res, table: Dict, stat: str = "median") -> Optional[str]:
    """The faster of spconv's correct configurations (1 thread, or T threads with the
    scatter fix): the baseline of every speedup."""
    n = spconv_names(res)
    cands = [k for k in (n["one"], n["fix"]) if k and k in table]
    return min(cands, key=lambda k: table[k][stat]) if cands else None


def speedup(res, table: Dict, vs: Optional[str] = None, stat: str = "median") -> Optional[float]:
    vs = vs or best_correct(res, table, stat)
    if not vs or vs not in table or MX not in table:
        return None
    return table[vs][stat] / table[MX][stat]


def ms(x):
    return "–" if x is None else f"{x * 1e3:.1f}" if x >= 0.01 else f"{x * 1e3:.2f}"


def med_min(table, name):
    r = table.get(name)
    return "–" if r is None else f"{ms(r['median'])} / {ms(r['min'])}"


def fx(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}×"


def gflops(flops, seconds):
    return flops / seconds / 1e9 if seconds else None


def targets(res) -> List[Dict]:
    """The benchmark's goals with what this run measured (None: not measured)."""
    W = res["workloads"]
    rows = []

    def add(key, target, value, ok, note=""):
        rows.append(dict(key=key, target=target, value=value, ok=ok, note=note))

    for name, label in (("second_kitti_b1", "kitti_b1"), ("second_kitti_b4", "kitti_b4"),
                        ("second_nusc_b1", "nusc_b1")):
        w = W.get(name)
        s = speedup(res, w["train"]) if w else None
        add(f"train_{label}", "≥ 3×", fx(s), None if s is None else s >= 3)
    for name, label in (("second_kitti_b1", "kitti_b1"), ("second_kitti_b4", "kitti_b4"),
                        ("second_nusc_b1", "nusc_b1")):
        w = W.get(name)
        s = speedup(res, w["forward"]) if w else None
        add(f"forward_{label}", "≥ 3×", fx(s), None if s is None else s >= 3)
    w = W.get("second_kitti_b1")
    s = speedup(res, w["maps"]) if w else None
    add("maps_kitti_b1", "≥ 4×", fx(s), None if s is None else s >= 4)
    if w:
        eff = gflops(3 * w["flops_forward"], w["train"][MX]["median"])
        frac = eff / w["mm_ceiling"]["gflops"]
        add("gflops_kitti_b1", "≥ 60 %", f"{100 * frac:.0f} % ({eff:.1f} / {w['mm_ceiling']['gflops']:.1f} GFLOP/s)",
            frac >= 0.6)
    else:
        add("gflops_kitti_b1", "≥ 60 %", "–", None)
    for key, label in (("memory", "memory_kitti_b1"), ("memory_held", "memory_held_kitti_b1")):
        m = (w or {}).get(key, {})
        mx_mb = m.get(MX, {}).get("train", {}).get("extra_mb")
        sp = [v["train"]["extra_mb"] for k, v in m.items() if k != MX and "train" in v]
        if mx_mb is not None and sp:
            r = mx_mb / min(sp)
            add(label, "≤ 0.5×", f"{r:.2f}× ({mx_mb:.0f} MB vs {min(sp):.0f} MB)", r <= 0.5)
        else:
            add(label, "≤ 0.5×", "–", None)
    bw = W.get("second_kitti_b1") if "bf16" in W.get("second_kitti_b1", {}) else \
        next((x for x in W.values() if "bf16" in x), None)
    b = (bw or {}).get("bf16")
    if b:
        where = "" if bw is W.get("second_kitti_b1") else f", on {next(k for k, x in W.items() if x is bw)}"
        add("bf16_kitti_b1", "≥ 1.5×", f"{b['speedup']:.2f}× (max rel err {b['max_rel_err']:.1e}{where})",
            b["speedup"] >= 1.5)
    else:
        add("bf16_kitti_b1", "≥ 1.5×", "–", None)
    w = W.get("second_kitti_1k")
    s = speedup(res, w["train"]) if w else None
    add("small_1k", "not slower (≥ 1×)", fx(s), None if s is None else s >= 1)
    f64 = [speedup(res, x["train_f64"]) for x in W.values() if "train_f64" in x]
    f64 = [x for x in f64 if x is not None]
    add("train_f64", "≥ 1× (every size)", fx(min(f64)) + " (lowest)" if f64 else "–",
        min(f64) >= 1 if f64 else None)
    return rows


# ---------------------------------------------------------------------------------------
# Text (English / Chinese)
# ---------------------------------------------------------------------------------------
TEXT = {
    "en": dict(
        title="Performance: mx_sparse vs spconv 2.3.8 (CPU)",
        provisional="These numbers come from one run of the command below on the machine described. "
                    "Ratios are medians of alternating runs in one process (A B C … A B C), after a warm-up round.",
        command="Command", machine="Machine and versions", runtime="Run time",
        load="load average before the run (1/5/15 min)",
        other_cpu="CPU time used by other processes during the run (share of all CPUs)",
        load_warn="Other processes were running during this run (see above); on 2 vCPUs that slows "
                  "2-thread runs disproportionately. Treat the numbers as provisional and re-run on an idle machine.",
        targets="Goals and what this run measured", target="goal", measured="measured", met="met",
        yes="yes", no="**no**", na="not measured",
        t_train_kitti_b1="VoxelBackBone8x fwd+bwd, KITTI-like, batch 1 (speedup)",
        t_train_kitti_b4="VoxelBackBone8x fwd+bwd, KITTI-like, batch 4 (speedup)",
        t_train_nusc_b1="VoxelBackBone8x fwd+bwd, nuScenes-like, batch 1 (speedup)",
        t_forward_kitti_b1="VoxelBackBone8x forward, KITTI-like, batch 1 (speedup)",
        t_forward_kitti_b4="VoxelBackBone8x forward, KITTI-like, batch 4 (speedup)",
        t_forward_nusc_b1="VoxelBackBone8x forward, nuScenes-like, batch 1 (speedup)",
        t_maps_kitti_b1="Neighbor-map building, VoxelBackBone8x, KITTI-like (speedup)",
        t_gflops_kitti_b1="Effective GFLOP/s, fwd+bwd, of the torch.mm ceiling",
        t_memory_kitti_b1="Extra peak RSS during fwd+bwd, relative to spconv",
        t_memory_held_kitti_b1="The same with allocator retention off (memory held; see the memory section)",
        t_bf16_kitti_b1="bfloat16 fwd+bwd vs our fp32",
        t_small_1k="1 000-voxel VoxelBackBone8x fwd+bwd (speedup)",
        t_train_f64="VoxelBackBone8x fwd+bwd in float64 (speedup)",
        baseline_note="Speedup = spconv time / mx_sparse time, against the **faster correct spconv configuration** "
                      "(1 thread, or {t} threads with the scatter fix). mx_sparse always runs with {t} threads.",
        variants="Configurations",
        v_mx="mx_sparse with {t} torch threads.",
        v_one="spconv 2.3.8, 1 torch thread: its correct shipped configuration and the numerical oracle.",
        v_racy="spconv 2.3.8, {t} threads as shipped. **Wrong output**: with more than one torch thread its CPU "
               "scatter-add races (see the accuracy table). Shown for reference only.",
        v_fix="spconv 2.3.8, {t} threads with the scatter fix: spconv's own Python gather-mm-scatter path "
              "(same algorithm and torch.mm calls) with the scatter-add done by `Tensor.index_add_`; correct.",
        v_patch="spconv's CPU backward calls `torch.cuda` (`get_current_stream`) and fails on a CPU-only torch; "
                "it is patched to return stream 0 in every configuration.",
        workloads="Workloads",
        workloads_note="Inputs are seeded ray-cast LiDAR street scenes (`mx_sparse.synthetic`); *mean nbrs* is the "
                       "mean number of active voxels in each voxel's 3×3×3 block (real scans: about 5–8). "
                       "GFLOP counts 2·pairs·Cin·Cout per conv layer, pairs = entries ≠ −1 of its neighbor map.",
        h_workload="workload", h_desc="description", h_voxels="voxels", h_nbrs="mean nbrs", h_shape="spatial shape",
        h_layers="conv layers", h_pairs="pairs", h_gflop="GFLOP (fwd)",
        accuracy="Accuracy (same function in both libraries)",
        accuracy_note="Weights are copied from mx_sparse into the spconv networks (layout [Cout, *k, Cin] → "
                      "[*k, Cin, Cout]). Max relative error = max|a − ref| / max|ref| against spconv at 1 thread, "
                      "rows matched by voxel coordinates: eval forward output, train-mode forward output, and "
                      "(eval mode) the input-feature gradient and the first layer's weight gradient of a fixed random "
                      "linear loss. Gradients are checked in eval mode because through train-mode BatchNorm they are "
                      "ill-conditioned in fp32 (both libraries then differ from a float64 reference by ~2e-2).",
        forward="Forward (eval, no autograd), ms, median / min",
        forward_note="Includes building the neighbor maps, as every new point cloud must.",
        train="Forward + backward (train), ms, median / min",
        train_note="Train-mode forward, scalar loss, backward into all weights (no optimizer step).",
        train_f64="Forward + backward in float64 (train), ms, median / min",
        train_f64_note="The same training step with both networks and the input in float64, what gradchecks "
                       "and models' unit tests run in.",
        maps="Neighbor-map building, ms, median / min",
        maps_note="All maps of one forward pass (one per indice_key). mx_sparse: `build_subm_map` / `build_conv_map` "
                  "+ `transpose_map` where training needs one (strided maps; odd submanifold maps need none); spconv: `spconv.pytorch.ops.get_indice_pairs` (its Native rulebook, which "
                  "serves both directions). The calls are collected from one real forward of each network. "
                  "`mx_sparse-1t`: the same map ops on one thread, beside `spconv-1t`. Below 16,384 input rows the "
                  "map ops stay on the calling thread whatever the thread count: the OpenMP regions they opened "
                  "for sub-millisecond work made the 1,000-voxel figure 15 ms on a loaded 2-core machine (issue 37; ops "
                  "themselves: 0.4-0.8 ms), i.e. the old figure measured waiting for a second thread.",
        h_speedup="speedup", h_speedup_min="speedup (mins)", h_vs_racy="vs {t}t shipped",
        gflops="Effective GFLOP/s and the torch.mm ceiling",
        gflops_note="Effective GFLOP/s = counted FLOPs / end-to-end median time (×3 FLOPs for fwd+bwd). Ceiling: "
                    "dense `torch.mm` doing the same GEMMs (for each layer, kvol GEMMs [pairs/kvol, Cin] @ [Cin, Cout]), "
                    "fastest call of each shape at {t} threads or 1 thread.",
        h_mx_fwd="mx fwd", h_mx_train="mx fwd+bwd", h_sp_fwd="spconv fwd", h_sp_train="spconv fwd+bwd",
        h_ceiling="torch.mm ceiling", h_frac="mx fwd+bwd / ceiling",
        memory="Peak memory over baseline (MB)",
        memory_note="Measured in a fresh subprocess per (configuration, workload): after a warm-up step, the RSS "
                    "high-water mark is reset (`/proc/self/clear_refs`), and VmHWM − VmRSS(before) is recorded for "
                    "one forward (eval) and one forward+backward, with glibc's default allocator settings. Before "
                    "the baseline, glibc's free heap pages (`malloc_trim`) and mx_sparse's CPU pool "
                    "(`mx_sparse.cpu_memory.release_cached()`) are given back, so each phase pays for the pages it "
                    "touches.",
        memory_held_note="The same with `MALLOC_MMAP_THRESHOLD_=65536` in the child's environment. By default glibc "
                         "raises its mmap threshold after the first large free, so later tensors come from the heap "
                         "and memory freed during backward stays resident; the RSS peak above then includes what the "
                         "allocator keeps. With a fixed 64 KiB threshold every tensor is its own mapping, returned at "
                         "free, so this peak is what each library actually holds; mx_sparse's pool runs with "
                         "`MXS_CPU_POOL_KEEP_MB=0` (free ranges given back at every free) for the same reason "
                         "(forward / fwd+bwd, MB):",
        h_fwd="forward", h_trainm="fwd+bwd", h_ratio="mx / spconv (fwd+bwd)",
        bf16="bfloat16", bf16_note="mx_sparse with features and all parameters cast to bfloat16, fwd+bwd, "
                                   "alternating with fp32; error of the bf16 eval output relative to fp32.",
        bf16_no_amx="**This CPU has no AMX**: bfloat16 runs the float32 kernels, with a conversion of every "
                    "operand and result, so it is not faster than float32 here; the ≥ 1.5× goal needs AMX tiles.",
        h_fp32="fp32 ms", h_bf16="bf16 ms", h_maxerr="max rel err", h_meanerr="mean rel err",
        overhead="Small scale and per-call overhead",
        overhead_note="One SubMConv3d 4→16 k3 on a 10-voxel tensor; time per call including tensor creation and "
                      "map building. *layers × overhead* relates it to the 1 000-voxel VoxelBackBone8x forward.",
        h_config="configuration", h_call_fwd="per call, forward (µs)", h_call_train="per call, fwd+bwd (µs)",
        chart="Chart", extra="extra (not realistic LiDAR input)",
        reproduce="Reproduce",
        reproduce_note="From the repository root, with the project's virtualenv active. `--quick` runs a small "
                       "subset in about 3 minutes; `--workloads a,b` selects workloads; results go to bench/results/.",
    ),
    "zh": dict(
        title="性能：mx_sparse 与 spconv 2.3.8 对比（CPU）",
        provisional="以下数据来自在所述机器上运行一次下述命令的结果。比值取同一进程内交替运行（A B C … A B C）"
                    "的中位数，正式计时前先预热一轮。",
        command="命令", machine="机器与版本", runtime="运行时间",
        load="运行前系统负载（1/5/15 分钟）",
        other_cpu="运行期间其他进程占用的 CPU 时间（占全部 CPU 的比例）",
        load_warn="本次运行期间有其他进程在运行（见上文）；在 2 个 vCPU 上这会不成比例地拖慢双线程运行。"
                  "以下数据仅供参考，请在空闲机器上重新运行。",
        targets="目标与本次实测", target="目标", measured="实测", met="达成",
        yes="是", no="**否**", na="未测",
        t_train_kitti_b1="VoxelBackBone8x 前向+反向，类 KITTI 场景，batch 1（加速比）",
        t_train_kitti_b4="VoxelBackBone8x 前向+反向，类 KITTI 场景，batch 4（加速比）",
        t_train_nusc_b1="VoxelBackBone8x 前向+反向，类 nuScenes 场景，batch 1（加速比）",
        t_forward_kitti_b1="VoxelBackBone8x 仅前向，类 KITTI，batch 1（加速比）",
        t_forward_kitti_b4="VoxelBackBone8x 仅前向，类 KITTI，batch 4（加速比）",
        t_forward_nusc_b1="VoxelBackBone8x 仅前向，类 nuScenes，batch 1（加速比）",
        t_maps_kitti_b1="邻居表（neighbor map）构建，VoxelBackBone8x，类 KITTI（加速比）",
        t_gflops_kitti_b1="前向+反向有效 GFLOP/s 占 torch.mm 上限的比例",
        t_memory_kitti_b1="前向+反向额外峰值内存（RSS），相对 spconv",
        t_memory_held_kitti_b1="同上，关闭分配器保留（实际持有的内存；见内存一节）",
        t_bf16_kitti_b1="bfloat16 前向+反向相对本库 fp32",
        t_small_1k="1 000 体素 VoxelBackBone8x 前向+反向（加速比）",
        t_train_f64="VoxelBackBone8x float64 前向+反向（加速比）",
        baseline_note="加速比 = spconv 时间 / mx_sparse 时间，基准取 **spconv 正确配置中较快者**"
                      "（单线程，或 {t} 线程加 scatter 修复）。mx_sparse 始终使用 {t} 个线程。",
        variants="对比配置",
        v_mx="mx_sparse，{t} 个 torch 线程。",
        v_one="spconv 2.3.8，1 个 torch 线程：其正确的原始配置，同时作为数值基准（oracle）。",
        v_racy="spconv 2.3.8，{t} 线程原始版本。**输出错误**：torch 线程数大于 1 时其 CPU scatter-add 存在数据竞争"
               "（见精度表），仅供参考。",
        v_fix="spconv 2.3.8，{t} 线程加 scatter 修复：走 spconv 自带的 Python gather-mm-scatter 路径"
              "（相同算法与 torch.mm 调用），scatter-add 改用 `Tensor.index_add_`，结果正确。",
        v_patch="spconv 的 CPU 反向会调用 `torch.cuda`（`get_current_stream`），在纯 CPU 版 torch 上报错；"
                "所有配置中都将其打补丁为返回 stream 0。",
        workloads="测试负载",
        workloads_note="输入为带随机种子的光线投射 LiDAR 街景（`mx_sparse.synthetic`）；*mean nbrs* 为每个体素 3×3×3 "
                       "邻域内活跃体素的平均个数（真实扫描约 5–8）。GFLOP 按每个卷积层 2·pairs·Cin·Cout 计算，"
                       "pairs 为其邻居表中不等于 −1 的条目数。",
        h_workload="负载", h_desc="说明", h_voxels="体素数", h_nbrs="平均邻居", h_shape="空间尺寸",
        h_layers="卷积层数", h_pairs="pairs", h_gflop="GFLOP（前向）",
        accuracy="精度（两个库计算同一函数）",
        accuracy_note="权重从 mx_sparse 复制到 spconv 网络（布局 [Cout, *k, Cin] → [*k, Cin, Cout]）。"
                      "最大相对误差 = max|a − ref| / max|ref|，以单线程 spconv 为基准，按体素坐标对齐行："
                      "eval 前向输出、train 模式前向输出，以及（eval 模式下）固定随机线性损失对输入特征和第一层权重的梯度。"
                      "梯度在 eval 模式下检查，因为经过 train 模式 BatchNorm 的梯度在 fp32 下病态"
                      "（两个库相对 float64 参考都偏差约 2e-2）。",
        forward="仅前向（eval，无 autograd），毫秒，中位数 / 最小值",
        forward_note="包含邻居表构建（每帧新点云都必须构建）。",
        train="前向 + 反向（train），毫秒，中位数 / 最小值",
        train_note="train 模式前向、标量损失、对全部权重反向（不含优化器步骤）。",
        train_f64="float64 前向 + 反向（train），毫秒，中位数 / 最小值",
        train_f64_note="同样的训练步骤，两个网络与输入均为 float64（梯度检查和模型单元测试所用的精度）。",
        maps="邻居表构建，毫秒，中位数 / 最小值",
        maps_note="一次前向所需的全部邻居表（每个 indice_key 一个）。mx_sparse：`build_subm_map` / `build_conv_map` "
                  "+ `transpose_map`（仅训练需要时：带步长的表；奇数核 submanifold 表不需要）；spconv：`spconv.pytorch.ops.get_indice_pairs`（其 Native 规则表，正反两个方向共用）。"
                  "调用参数取自各网络的一次真实前向。`mx_sparse-1t`：同样的建表算子在单线程下的耗时，与 `spconv-1t` 并列。"
                  "输入少于 16,384 行时，无论线程数多少，建表算子都在调用线程上运行：此前它们为亚毫秒级的工作开启 OpenMP 并行区，"
                  "在负载较高的 2 核机器上使 1,000 体素的数字达到 15 毫秒（issue 37；算子本身 0.4–0.8 毫秒），即旧数字测到的是等待第二个线程的时间。",
        h_speedup="加速比", h_speedup_min="加速比（按最小值）", h_vs_racy="对比 {t} 线程原始版",
        gflops="有效 GFLOP/s 与 torch.mm 上限",
        gflops_note="有效 GFLOP/s = 计数 FLOPs / 端到端中位时间（前向+反向按 3 倍 FLOPs）。上限：稠密 `torch.mm` "
                    "完成同样的 GEMM（每层 kvol 次 [pairs/kvol, Cin] @ [Cin, Cout]），每种形状取 {t} 线程或单线程下最快的一次。",
        h_mx_fwd="mx 前向", h_mx_train="mx 前向+反向", h_sp_fwd="spconv 前向", h_sp_train="spconv 前向+反向",
        h_ceiling="torch.mm 上限", h_frac="mx 前向+反向 / 上限",
        memory="相对基线的峰值内存（MB）",
        memory_note="每个（配置，负载）在独立子进程中测量：预热一步后重置 RSS 峰值（`/proc/self/clear_refs`），"
                    "记录一次前向（eval）与一次前向+反向的 VmHWM − VmRSS(开始前)，glibc 分配器使用默认设置。"
                    "读取基线前先归还 glibc 堆中的空闲页（`malloc_trim`）和 mx_sparse CPU 内存池保留的页"
                    "（`mx_sparse.cpu_memory.release_cached()`），因此每个阶段都要为自己触及的页付出代价。",
        memory_held_note="子进程环境中加上 `MALLOC_MMAP_THRESHOLD_=65536` 后重复测量。默认情况下 glibc 在第一次释放大块"
                         "内存后会提高 mmap 阈值，之后的张量从堆上分配，反向过程中释放的内存仍驻留，上表的 RSS 峰值因此包含"
                         "分配器保留的部分。阈值固定为 64 KiB 时每个张量单独映射、释放即归还，此峰值即各库实际持有的内存"
                         "；出于同样的理由，mx_sparse 的内存池以 `MXS_CPU_POOL_KEEP_MB=0` 运行（每次释放即归还空闲区间）"
                         "（前向 / 前向+反向，MB）：",
        h_fwd="前向", h_trainm="前向+反向", h_ratio="mx / spconv（前向+反向）",
        bf16="bfloat16", bf16_note="mx_sparse 将特征与全部参数转为 bfloat16，前向+反向，与 fp32 交替运行；"
                                   "误差为 bf16 eval 输出相对 fp32 输出。",
        bf16_no_amx="**此 CPU 没有 AMX**：bfloat16 使用 float32 内核，每个操作数与结果都要转换，因此在这里不比 float32 快；"
                    "≥ 1.5× 的目标需要 AMX 矩阵单元。",
        h_fp32="fp32 毫秒", h_bf16="bf16 毫秒", h_maxerr="最大相对误差", h_meanerr="平均相对误差",
        overhead="小规模与单次调用开销",
        overhead_note="单个 SubMConv3d 4→16 k3，输入 10 个体素；每次调用时间，含张量创建与邻居表构建。"
                      "*层数 × 开销* 与 1 000 体素 VoxelBackBone8x 前向时间对照。",
        h_config="配置", h_call_fwd="每次调用，前向（µs）", h_call_train="每次调用，前向+反向（µs）",
        chart="图表", extra="附加（非真实 LiDAR 输入）",
        reproduce="复现",
        reproduce_note="在仓库根目录、激活项目虚拟环境后运行。`--quick` 约 3 分钟运行一个小子集；"
                       "`--workloads a,b` 选择负载；结果写入 bench/results/。",
    ),
}


def _memory_table(W, names, key, T) -> List[str]:
    """Extra peak RSS per configuration (forward / fwd+bwd) and mx_sparse's ratio to the best spconv."""
    mcols = [x for x in names if any(x in w.get(key, {}) for w in W.values())]
    rows = []
    for k, w in W.items():
        m = w.get(key)
        if not m:
            continue
        cells = []
        for c in mcols:
            r = m.get(c, {})
            cells.append(f"{r['forward']['extra_mb']:.0f} / {r['train']['extra_mb']:.0f}" if "train" in r
                         else r.get("error", "–"))
        sp = [m[c]["train"]["extra_mb"] for c in mcols if c != MX and "train" in m.get(c, {})]
        mxm = m.get(MX, {}).get("train", {}).get("extra_mb")
        cells.append(f"{mxm / min(sp):.2f}×" if sp and mxm is not None and min(sp) > 0 else "–")
        rows.append([f"`{k}`"] + cells)
    return _table([T["h_workload"]] + [f"{c} ({T['h_fwd']} / {T['h_trainm']})" for c in mcols] + [T["h_ratio"]], rows)


def _table(header: List[str], rows: List[List[str]]) -> List[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def markdown(res: Dict, lang: str = "en", chart: Optional[str] = None) -> str:
    T = TEXT[lang]
    t = res["threads"]
    n = spconv_names(res)
    W = res["workloads"]
    mach = res["machine"]
    names = [x["name"] for x in res["variants"]]
    L = [f"# {T['title']}", "", T["provisional"], "",
         f"**{T['command']}:** `{res['command']}`  ", f"**{T['runtime']}:** {res.get('runtime_s', 0) / 60:.1f} min",
         "", f"## {T['machine']}", "",
         f"- CPU: {mach['cpu']}, {mach['logical_cpus']} logical CPUs (AVX-512: {mach['flags_avx512']}); {mach['os']}",
         f"- Python {mach['python']}, torch {mach['torch']}, spconv {mach['spconv']}, numpy {mach['numpy']}",
         f"- mx_sparse {mach['mx_sparse']} (commit {mach['mx_sparse_commit'] or '?'})"
         + ("; CPU kernels: " + ", ".join(f"{k} {v}" for k, v in mach["cpu_gemm_kernels"].items())
            if "cpu_gemm_kernels" in mach else ""),
         f"- {mach['date']}; device: {res.get('device', 'cpu')}; torch threads: {t}; rounds per measurement: up to {res['repeats']} "
         f"(≥ 3, budget {res['budget_s']:.0f} s)",
         f"- {T['load']}: " + " / ".join(f"{x:.2f}" for x in res.get("load_before", []))
         + (f"; {T['other_cpu']}: {100 * res['other_cpu_share']:.0f} %" if "other_cpu_share" in res else ""), ""]
    L[-1:] = [f"- {note}" for note in res.get("notes", [])] + [""]   # notes end the machine list
    if machine_busy(res) > 0.1:
        L += [f"> **{T['load_warn']}**", ""]

    L += [f"## {T['targets']}", "", T["baseline_note"].format(t=t), ""]
    L += _table([T["target"], "", T["measured"], T["met"]],
                [[T["t_" + r["key"]], r["target"], r["value"], T["na"] if r["ok"] is None else
                  (T["yes"] if r["ok"] else T["no"])] for r in targets(res)])

    L += [f"## {T['variants']}", "", f"- `{MX}`: {T['v_mx'].format(t=t)}"]
    if n["one"]:
        L += [f"- `{n['one']}`: {T['v_one']}"]
    if n["racy"]:
        L += [f"- `{n['racy']}`: {T['v_racy'].format(t=t)}", f"- `{n['fix']}`: {T['v_fix'].format(t=t)}"]
    if n["one"]:
        L += [f"- {T['v_patch']}"]
    L += [""]

    if chart:
        L += [f"## {T['chart']}", "", f"![chart]({chart})", ""]

    L += [f"## {T['workloads']}", "", T["workloads_note"], ""]
    L += _table([T["h_workload"], T["h_desc"], T["h_voxels"], T["h_nbrs"], T["h_shape"], T["h_layers"],
                 T["h_pairs"], T["h_gflop"]],
                [[f"`{k}`", w["desc"], f"{w['input']['voxels']:,}", w["input"]["mean_active_neighbors"],
                  "×".join(map(str, w["input"]["spatial_shape"])) + f", b={w['input']['batch_size']}",
                  len(w["layers"]), f"{w['pairs']:,}", f"{w['flops_forward'] / 1e9:.2f}"] for k, w in W.items()])

    L += [f"## {T['accuracy']}", "", T["accuracy_note"], ""]
    acc_names = [x for x in names if x != n["one"]]
    L += _table([T["h_workload"]] + [f"{x} (fwd / train / dx / dW)" for x in acc_names],
                [[f"`{k}`"] + [" / ".join(f"{w['accuracy'][x][q]:.1e}" for q in ("forward", "train", "input_grad", "weight_grad"))
                               if x in w["accuracy"] else "–" for x in acc_names] for k, w in W.items()])

    for sec in ("forward", "train", "train_f64", "maps"):
        if not any(sec in w for w in W.values()):
            continue
        L += [f"## {T[sec]}", "", T[sec + "_note"], ""]
        cols = [x for x in names if any(x in w.get(sec, {}) for w in W.values())]
        cols[1:1] = [x for x in dict.fromkeys(k for w in W.values() for k in w.get(sec, {})) if x not in names]
        hdr = [T["h_workload"]] + cols + [T["h_speedup"], T["h_speedup_min"]] + \
            ([T["h_vs_racy"].format(t=t)] if n["racy"] else [])
        rows = []
        for k, w in W.items():
            if sec not in w:
                continue
            tab = w[sec]
            row = [f"`{k}`"] + [med_min(tab, c) for c in cols]
            bc = best_correct(res, tab)
            row.append(f"**{fx(speedup(res, tab))}** (vs {bc})" if bc else "–")
            row.append(fx(speedup(res, tab, stat="min")))
            if n["racy"]:
                row.append(fx(speedup(res, tab, n["racy"])))
            rows.append(row)
        L += _table(hdr, rows)

    L += [f"## {T['gflops']}", "", T["gflops_note"].format(t=t), ""]
    rows = []
    for k, w in W.items():
        f = w["flops_forward"]
        bf, bt = best_correct(res, w["forward"]), best_correct(res, w["train"])
        mx_t = gflops(3 * f, w["train"][MX]["median"])
        rows.append([f"`{k}`", f"{gflops(f, w['forward'][MX]['median']):.1f}", f"{mx_t:.1f}",
                     f"{gflops(f, w['forward'][bf]['median']):.1f}" if bf else "–",
                     f"{gflops(3 * f, w['train'][bt]['median']):.1f}" if bt else "–",
                     f"{w['mm_ceiling']['gflops']:.1f}", f"{100 * mx_t / w['mm_ceiling']['gflops']:.0f} %"])
    L += _table([T["h_workload"], T["h_mx_fwd"], T["h_mx_train"], T["h_sp_fwd"], T["h_sp_train"], T["h_ceiling"],
                 T["h_frac"]], rows)

    for key, note in (("memory", "memory_note"), ("memory_held", "memory_held_note")):
        if any(key in w for w in W.values()):
            L += ([f"## {T['memory']}", ""] if key == "memory" else []) + [T[note], ""]
            L += _memory_table(W, names, key, T)

    b16 = [(k, w["bf16"]) for k, w in W.items() if "bf16" in w]
    if b16:
        L += [f"## {T['bf16']}", "", T["bf16_note"], ""]
        if mach.get("cpu_gemm_kernels", {}).get("bfloat16", "amx") != "amx":
            L += [T["bf16_no_amx"], ""]
        L += _table([T["h_workload"], T["h_fp32"], T["h_bf16"], T["h_speedup"], T["h_maxerr"], T["h_meanerr"]],
                    [[f"`{k}`", med_min(b, "fp32"), med_min(b, "bf16"), fx(b["speedup"]), f"{b['max_rel_err']:.1e}",
                      f"{b['mean_rel_err']:.1e}"] for k, b in b16])

    if "overhead" in res:
        L += [f"## {T['overhead']}", "", T["overhead_note"], ""]
        small = W.get("second_kitti_1k")
        hdr = [T["h_config"], T["h_call_fwd"], T["h_call_train"]]
        if small:
            hdr += [f"1k-voxel fwd (ms)", f"layers × overhead / fwd"]
        rows = []
        for c, r in res["overhead"].items():
            row = [f"`{c}`", f"{r['forward']['median'] * 1e6:.0f}", f"{r['train']['median'] * 1e6:.0f}"]
            if small and c in small["forward"]:
                fwd = small["forward"][c]["median"]
                row += [ms(fwd), f"{100 * len(small['layers']) * r['forward']['median'] / fwd:.0f} %"]
            elif small:
                row += ["–", "–"]
            rows.append(row)
        L += _table(hdr, rows)

    L += [f"## {T['reproduce']}", "", T["reproduce_note"], "", "```bash", res["command"], "```", ""]
    return "\n".join(L)


# ---------------------------------------------------------------------------------------
# Chart
# ---------------------------------------------------------------------------------------
def chart(res: Dict, path: str) -> Optional[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    W = res["workloads"]
    names = list(W)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.2))
    width = 0.27
    for i, (sec, label) in enumerate((("forward", "forward (eval)"), ("train", "forward+backward"),
                                      ("maps", "map building"))):
        vals = [speedup(res, W[k][sec]) or 0 for k in names]
        xs = [j + (i - 1) * width for j in range(len(names))]
        ax1.bar(xs, vals, width, label=label)
    ax1.axhline(1, color="k", lw=0.8)
    ax1.axhline(3, color="tab:red", ls="--", lw=0.8, label="3× target")
    ax1.axhline(4, color="tab:purple", ls=":", lw=0.8, label="4× target (maps)")
    ax1.set_xticks(range(len(names)))
    ax1.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax1.set_ylabel("speedup over spconv 2.3.8 (faster correct config)")
    ax1.set_title(f"mx_sparse speedup, {res['threads']} threads")
    ax1.legend(fontsize=8)
    vnames = [v["name"] for v in res["variants"]]
    width = 0.8 / len(vnames)
    for i, v in enumerate(vnames):
        vals = [W[k]["train"].get(v, {}).get("median", 0) * 1e3 for k in names]
        ax2.bar([j + (i - (len(vnames) - 1) / 2) * width for j in range(len(names))], vals, width, label=v)
    ax2.set_yscale("log")
    ax2.set_xticks(range(len(names)))
    ax2.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
    ax2.set_ylabel("forward+backward time, ms (median, log scale)")
    ax2.set_title("training step time")
    ax2.legend(fontsize=8)
    fig.suptitle(f"{res['machine']['cpu']}, torch {res['machine']['torch']}, {res['machine']['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(res: Dict, out_dir: str) -> str:
    png = chart(res, os.path.join(out_dir, "performance.png"))
    path = os.path.join(out_dir, "results.md")
    with open(path, "w") as f:
        f.write(markdown(res, "en", "performance.png" if png else None))
    return path


def write_docs(res: Dict, root: str) -> List[str]:
    """docs/en/performance.md, docs/zh/performance.md and the chart docs/en/performance.png."""
    written = []
    png = os.path.join(root, "docs", "en", "performance.png")
    os.makedirs(os.path.dirname(png), exist_ok=True)
    have_png = chart(res, png) is not None
    if have_png:
        written.append(png)
    for lang, rel in (("en", "performance.png"), ("zh", "../en/performance.png")):
        path = os.path.join(root, "docs", lang, "performance.md")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(markdown(res, lang, rel if have_png else None))
        written.append(path)
    return written


def machine_busy(res: Dict) -> float:
    """Share of the machine's CPUs other processes used during the run (the load average before
    it where the run did not record that)."""
    return res.get("other_cpu_share", res.get("load_before", [0])[0] / max(1, res["machine"]["logical_cpus"]))


def summary(res: Dict) -> str:
    """Plain-text summary for the terminal: what each ratio compares, the goals with what this
    run measured, and the machine-load warning."""
    T, t = TEXT["en"], res["threads"]
    plain = lambda v: v.replace("–", "n/a").replace("×", "x").replace("≥", ">=").replace("≤", "<=")  # noqa: E731
    lines = [f"Speedup = spconv 2.3.8 time / mx_sparse time (above 1: mx_sparse is faster), against the faster "
             f"correct spconv configuration (1 thread, or {t} threads with the scatter fix); mx_sparse runs "
             f"{t} threads. fwd: forward; train: forward+backward; f64: the same in float64; maps: neighbor-map "
             f"building. n/a: not measured.",
             "", f"{'workload':24s} {'fwd':>7s} {'train':>7s} {'f64':>7s} {'maps':>7s}"]
    for k, w in res["workloads"].items():
        lines.append(f"{k:24s} " + " ".join(f"{plain(fx(speedup(res, w[s]) if s in w else None)):>7s}"
                                            for s in ("forward", "train", "train_f64", "maps")))
    lines += ["", f"{T['targets']}:"]
    for r in targets(res):
        met = "not measured" if r["ok"] is None else ("met" if r["ok"] else "NOT met")
        lines.append(f"  {plain(T['t_' + r['key']])}: goal {plain(r['target'])}, measured {plain(r['value'])} ({met})")
    lines.append(f"run time {res.get('runtime_s', 0) / 60:.1f} min")
    if machine_busy(res) > 0.1:
        lines.append(f"WARNING: other processes used {100 * machine_busy(res):.0f} % of the CPUs during this run; "
                     f"the numbers are provisional (re-run on an idle machine).")
    return "\n".join(lines)
