// In-process entry to the mx_sparse AscendC kernels running in the CPU emulator (tools/ascend_emulator).
//
// One extern "C" function per accelerator primitive (raw host pointers, sizes, geometry), each doing
// what the NPU binding's aclnn call does on the device: the kernel's limits check
// (op_host/<op>_limits.h, shared with the binding), the op's host tiling function
// (op_host/<op>_tiling.cpp, the code the CANN glue runs), the workspace the glue asks for, and the
// launch of the kernel source itself -- here through ICPU_RUN_KF on GmAlloc'd copies of the operands,
// with the emulator's strict Atlas A2 rules (ASCEND_SIM_STRICT=1). Built as a shared library by
// mx_sparse/runtime/ascend.py with tools/ascend_emulator/cpu_debug_build.sh --shared and loaded with ctypes.
//
// Errors: every function returns 0, or MXS_EMU_INVALID (a limit or argument the kernel does not
// support: Python raises ValueError) / MXS_EMU_FAILED (e.g. a tiling function refused the shape:
// RuntimeError), with the message in mxs_emu_last_error(). A violated emulator rule is not an
// error code: the emulator prints the rule and ends the process with exit code 86, as in its CLI.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tikicpulib.h"
#include "conv_out_keys/op_host/conv_out_keys_limits.h"
#include "conv_out_keys/op_host/conv_out_keys_tiling.h"
#include "gather_mm/op_host/gather_mm_limits.h"
#include "gather_mm/op_host/gather_mm_tiling.h"
#include "gather_mm_backprop_filter/op_host/gather_mm_backprop_filter_limits.h"
#include "gather_mm_backprop_filter/op_host/gather_mm_backprop_filter_tiling.h"
#include "subm_map/op_host/subm_map_limits.h"
#include "subm_map/op_host/subm_map_tiling.h"
#include "unique_sorted_keys/op_host/unique_sorted_keys_limits.h"
#include "unique_sorted_keys/op_host/unique_sorted_keys_tiling.h"

extern "C" __global__ __aicore__ void subm_map(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void conv_out_keys(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void unique_sorted_keys(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void gather_mm(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void gather_mm_backprop_filter(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);

namespace {

constexpr int kOk = 0, kInvalid = 1, kFailed = 2;

// Launch counters, in the order of mxs_emu_kernel_name.
enum Kernel { SUBM_MAP, CONV_OUT_KEYS, UNIQUE_SORTED_KEYS, GATHER_MM, GATHER_MM_BACKPROP_FILTER, NUM_KERNELS };
const char* const kKernelNames[NUM_KERNELS] = {"SubmMap", "ConvOutKeys", "UniqueSortedKeys", "GatherMm",
                                               "GatherMmBackpropFilter"};
std::atomic<int64_t> g_launches[NUM_KERNELS];

// The emulator keeps the launch mode, tiling key and launch state in globals: one launch at a time.
std::mutex g_launchMutex;
thread_local std::string t_lastError;

// Strict A2 rules: a warning (D16 leftovers, a tolerated GM over-read) is a violation too. Set once
// when the library is loaded (the emulator reads it with getenv at every warning).
const bool g_strict = setenv("ASCEND_SIM_STRICT", "1", 1) == 0;

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

const char* TilingStatusName(int32_t st) {
    switch (st) {
        case mxs_ascend::TILING_BAD_SHAPE: return "shape not supported";
        case mxs_ascend::TILING_BAD_PLATFORM: return "platform not supported";
        case mxs_ascend::TILING_CHANNELS_TOO_WIDE: return "channel row does not fit the unified buffer";
        case mxs_ascend::TILING_BAD_DTYPE: return "dtype not supported";
        default: return "unknown status";
    }
}

void CheckTiling(const char* op, int32_t status) {
    if (status != mxs_ascend::TILING_OK)
        throw Failure(std::string(op) + " host tiling refused the launch (status " + std::to_string(status) + ": " +
                      TilingStatusName(status) + ")");
}

mxs_ascend::AscendPlatform Platform() {
    return {AscendSim::GetCoreNumAic(), AscendSim::GetCoreNumAiv(), AscendSim::GetUbSize()};
}

// A GM allocation of the emulator (bounds-checked, poisoned) that frees itself. At least 32 bytes, so
// that an empty tensor still has an address, as on the device.
class Gm {
public:
    explicit Gm(size_t bytes) : bytes_(bytes), p_(static_cast<uint8_t*>(AscendC::GmAlloc(bytes > 32 ? bytes : 32))) {}
    Gm(const void* src, size_t bytes) : Gm(bytes) {
        if (bytes) std::memcpy(p_, src, bytes);
    }
    ~Gm() { AscendC::GmFree(p_); }
    Gm(const Gm&) = delete;
    Gm& operator=(const Gm&) = delete;
    uint8_t* get() const { return p_; }
    void copyTo(void* dst, size_t bytes) const {
        if (bytes) std::memcpy(dst, p_, bytes);
    }

private:
    size_t bytes_;
    uint8_t* p_;
};

template <typename T>
std::unique_ptr<Gm> TilingGm(const T& t) {
    return std::unique_ptr<Gm>(new Gm(&t, sizeof(t)));
}

// Every launch of the library goes through here: strict rules, the lock, the counter.
template <typename Launch>
void Run(Kernel k, AscendC::KernelMode mode, uint64_t tilingKey, const Launch& launch) {
    std::lock_guard<std::mutex> lk(g_launchMutex);
    AscendC::SetKernelMode(mode);
    ICPU_SET_TILING_KEY(tilingKey);
    launch();
    g_launches[k].fetch_add(1);
}

template <typename Body>
int Guard(const Body& body) {
    try {
        body();
        return kOk;
    } catch (const std::invalid_argument& e) {
        t_lastError = e.what();
        return kInvalid;
    } catch (const std::exception& e) {
        t_lastError = e.what();
        return kFailed;
    }
}

// Map entries select rows of the features: outside [-1, rows) the kernel would read outside its GM
// operand. The NPU does not check this; the emulator would end the process on the bounds rule, so it
// refuses such a map with an error instead.
void CheckMapRows(const int32_t* nbr, int64_t entries, int64_t rows) {
    for (int64_t i = 0; i < entries; ++i)
        if (nbr[i] < -1 || nbr[i] >= rows)
            throw std::invalid_argument("nbr: entries must be -1 or a row of features in [0, " + std::to_string(rows) +
                                        "), got " + std::to_string(nbr[i]) + " at flat position " + std::to_string(i));
}

}  // namespace

// The library is compiled with -fvisibility=hidden (cpu_debug_build.sh --shared): only these are exported.
#pragma GCC visibility push(default)
extern "C" {

const char* mxs_emu_last_error() { return t_lastError.c_str(); }
int32_t mxs_emu_strict() { return g_strict ? 1 : 0; }

int32_t mxs_emu_num_kernels() { return NUM_KERNELS; }
const char* mxs_emu_kernel_name(int32_t k) { return k >= 0 && k < NUM_KERNELS ? kKernelNames[k] : nullptr; }
int64_t mxs_emu_launches(int32_t k) { return k >= 0 && k < NUM_KERNELS ? g_launches[k].load() : -1; }

// out[s, k] = p where ckeys[p] == qkeys[s] + deltas[k], else -1 (aclnnSubmMap).
// qkeys int64 [m]; ckeys int64 [n] ascending, unique; deltas int64 [kvol]; out int32 [m, kvol].
int mxs_emu_sorted_key_lookup(const int64_t* qkeys, int64_t m, const int64_t* ckeys, int64_t n, const int64_t* deltas,
                              int64_t kvol, int64_t group, int64_t keyBound, int32_t* out) {
    return Guard([&] {
        mxs_ascend::CheckSubmMapLimits(kvol, group);
        if (m == 0) return;
        // as the CANN glue: the deltas come precomputed, the tiling needs K and the last-axis group
        mxs_ascend::SubmMapShape s;
        s.numVoxels = m;
        s.numCand = n;
        s.ndim = 2;
        s.kernel[0] = kvol / group;
        s.kernel[1] = group;
        s.paddedShape[0] = s.paddedShape[1] = 1;
        s.keyBound = keyBound;
        SubmMapTilingData t;
        CheckTiling("SubmMap", mxs_ascend::SubmMapTiling(s, Platform(), t));
        if (t.usedAiv == 0) throw Failure("SubmMap host tiling chose no cores");
        Gm gQ(qkeys, m * 8), gC(ckeys, n * 8), gD(deltas, kvol * 8), gOut(m * kvol * 4), ws(32);
        auto gT = TilingGm(t);
        Run(SUBM_MAP, KernelMode::AIV_MODE, 0, [&] {
            ICPU_RUN_KF(subm_map, t.usedAiv, gQ.get(), gC.get(), gD.get(), gOut.get(), ws.get(), gT->get());
        });
        gOut.copyTo(out, m * kvol * 4);
    });
}

// keys int64 [J * n], slot-major: the output-grid key of the voxel input row n reaches through the
// kernel offset of slot j, INT64_MAX if none (aclnnConvOutKeys; J = prod of conv_rules.h
// conv_out_slots, the kernel volume at stride 1). indices int32 [n, 1 + ndim].
int mxs_emu_conv_out_keys(const int32_t* indices, int64_t n, int32_t ndim, const int64_t* spatial, int64_t batchSize,
                          const int64_t* kernel, const int64_t* stride, const int64_t* padding,
                          const int64_t* dilation, int64_t* keys) {
    return Guard([&] {
        if (ndim < 1 || ndim > kCokMaxDims)
            throw std::invalid_argument("spatial_shape: the Ascend strided-conv map supports 1 to " +
                                        std::to_string(kCokMaxDims) + " spatial axes, got " + std::to_string(ndim));
        mxs_ascend::CheckConvOutKeysLimits(n, ndim, spatial, batchSize, kernel, stride, padding, dilation);
        if (n == 0) return;
        mxs_ascend::ConvOutKeysShape s;
        s.numVoxels = n;
        s.batchSize = batchSize;
        s.ndim = ndim;
        for (int d = 0; d < ndim; ++d) {
            s.spatial[d] = spatial[d];
            s.kernel[d] = kernel[d];
            s.stride[d] = stride[d];
            s.padding[d] = padding[d];
            s.dilation[d] = dilation[d];
        }
        ConvOutKeysTilingData t;
        CheckTiling("ConvOutKeys", mxs_ascend::ConvOutKeysTiling(s, Platform(), t));
        if (t.usedAiv == 0) throw Failure("ConvOutKeys host tiling chose no cores");
        const size_t outBytes = (size_t)n * t.slotVol * 8;
        Gm gIdx(indices, (size_t)n * (ndim + 1) * 4), gKeys(outBytes), ws(32);
        auto gT = TilingGm(t);
        Run(CONV_OUT_KEYS, KernelMode::AIV_MODE, 0,
            [&] { ICPU_RUN_KF(conv_out_keys, t.usedAiv, gIdx.get(), gKeys.get(), ws.get(), gT->get()); });
        gKeys.copyTo(keys, outBytes);
    });
}

// ukeys int64 [c]: the first *count distinct non-sentinel keys of the sorted keys [c], ascending
// (aclnnUniqueSortedKeys). The tail, undefined on the NPU, is filled with INT64_MAX here.
int mxs_emu_unique_sorted_keys(const int64_t* keys, int64_t c, int64_t* ukeys, int32_t* count) {
    return Guard([&] {
        mxs_ascend::CheckUniqueSortedKeysLimits(c);
        *count = 0;
        if (c == 0) return;
        UniqueSortedKeysTilingData t;
        CheckTiling("UniqueSortedKeys", mxs_ascend::UniqueSortedKeysTiling(c, Platform(), t));
        if (t.usedAiv == 0) throw Failure("UniqueSortedKeys host tiling chose no cores");
        Gm gKeys(keys, c * 8), gOut(c * 8), gCount(32), ws(mxs_ascend::UniqueSortedKeysWorkspaceBytes(t));
        auto gT = TilingGm(t);
        Run(UNIQUE_SORTED_KEYS, KernelMode::AIV_MODE, 0, [&] {
            ICPU_RUN_KF(unique_sorted_keys, t.usedAiv, gKeys.get(), gOut.get(), gCount.get(), ws.get(), gT->get());
        });
        int32_t got = 0;
        gCount.copyTo(&got, 4);
        if (got < 0 || got > c)
            throw Failure("UniqueSortedKeys wrote count " + std::to_string(got) + " outside [0, " + std::to_string(c) +
                          "]");
        gOut.copyTo(ukeys, (size_t)got * 8);
        std::fill(ukeys + got, ukeys + c, INT64_MAX);
        *count = got;
    });
}

// out [m, cout] = sum_k features[nbr[m, k]] @ W_k (aclnnGatherMm, one group; weightLayout =
// its weight_layout attribute, gather_mm/op_host/gather_mm_weight_layout.h): W_k = weight[k] of a
// [kvol, cin, cout] weight (0), or weight[k]^T / weight[kvol-1-k]^T of a [kvol, cout, cin] one read
// transposed (1 / 2). features [n, cin], weight of `dtype`, nbr int32 [m, kvol].
int mxs_emu_gather_mm(const void* features, int64_t n, int64_t cin, const void* weight, int64_t cout,
                      const int32_t* nbr, int64_t m, int64_t kvol, int64_t weightLayout, const char* dtype,
                      void* out) {
    return Guard([&] {
        const int32_t key = mxs_ascend::KernelDtypeKey("features", dtype);
        mxs_ascend::CheckGatherMmLimits(cin, cout);
        mxs_ascend::CheckGatherMmWeightLayout(weightLayout);
        if (m == 0) return;
        CheckMapRows(nbr, m * kvol, n);
        const size_t esz = mxs_ascend::DTypeSize(key);
        mxs_ascend::GatherMmShape s{m, n, kvol, cin, cout, key, (int32_t)weightLayout};
        GatherMmTilingData t;
        CheckTiling("GatherMm", mxs_ascend::GatherMmTiling(s, Platform(), t));
        if (t.usedAiv == 0) throw Failure("GatherMm host tiling chose no cores");
        Gm gF(features, n * cin * esz), gW(weight, kvol * cin * cout * esz), gN(nbr, m * kvol * 4),
            gOut(m * cout * esz), ws(mxs_ascend::GatherMmWorkspaceBytes(t));
        auto gT = TilingGm(t);
        Run(GATHER_MM, KernelMode::MIX_MODE, t.tilingKey, [&] {
            ICPU_RUN_KF(gather_mm, t.blockDim, gF.get(), gW.get(), gN.get(), gOut.get(), ws.get(), gT->get());
        });
        gOut.copyTo(out, m * cout * esz);
    });
}

// dw [kvol, cin, cout] = sum_m features[nbr[m, k]]^T (x) grad[m] (aclnnGatherMmBackpropFilter, one
// group). features [n, cin], grad [m, cout] of `dtype`, nbr int32 [m, kvol]. m == 0: zeros.
int mxs_emu_gather_mm_backprop_filter(const void* features, int64_t n, int64_t cin, const void* grad, int64_t cout,
                                      const int32_t* nbr, int64_t m, int64_t kvol, const char* dtype, void* dw) {
    return Guard([&] {
        const int32_t key = mxs_ascend::KernelDtypeKey("features", dtype);
        mxs_ascend::CheckGatherMmBpfLimits(cin, cout);
        const size_t esz = mxs_ascend::DTypeSize(key);
        const size_t dwBytes = kvol * cin * cout * esz;
        if (m == 0) {
            std::memset(dw, 0, dwBytes);  // no launch: the binding zero-fills
            return;
        }
        CheckMapRows(nbr, m * kvol, n);
        mxs_ascend::GatherMmBpfShape s{m, n, kvol, cin, cout, key};
        GatherMmBpfTilingData t;
        CheckTiling("GatherMmBackpropFilter", mxs_ascend::GatherMmBpfTiling(s, Platform(), t));
        if (t.usedAiv == 0) throw Failure("GatherMmBackpropFilter host tiling chose no cores");
        Gm gF(features, n * cin * esz), gG(grad, m * cout * esz), gN(nbr, m * kvol * 4), gDw(dwBytes),
            ws(mxs_ascend::GatherMmBpfWorkspaceBytes(t));
        auto gT = TilingGm(t);
        Run(GATHER_MM_BACKPROP_FILTER, KernelMode::MIX_MODE, t.dtypeKey, [&] {
            ICPU_RUN_KF(gather_mm_backprop_filter, t.blockDim, gF.get(), gG.get(), gN.get(), gDw.get(), ws.get(),
                        gT->get());
        });
        gDw.copyTo(dw, dwBytes);
    });
}

}  // extern "C"
#pragma GCC visibility pop
