// Matmul high-level API (lib/matmul_intf.h), executed synchronously on behalf of the calling
// AIV (the emulated AIC). Math (§5.2): C[m][n] (op)= sum_k A[m][k]*B[k][n] (+ bias[n]),
// fp16/bf16/fp32 inputs accumulate in fp32, int8 in int32; the result is rounded (RNE) to
// the C type. GM ND strides: A (m,k) at m*Ka+k, A^T stored [K][M] at k*M+m; B (k,n) at
// k*N+n, B^T stored [N][K] at n*Kb+k; C (m,n) at m*N+n.
// IterateAll<false> is deferred until WaitIterateAll(); touching its C (or writing its A/B)
// before that is rule E21.
#pragma once
#include <vector>
#include "ascend_sim/tpipe.h"
#include "ascend_sim/data_copy.h"
#include "ascend_sim/numeric.h"
#include "kernel_tiling/kernel_tiling.h"

namespace AscendC {

enum class CubeFormat { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };
enum class LayoutMode { NONE = 0, BSNGD, SBNGD, BNGS1S2, NORMAL };

template <TPosition POS, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false, LayoutMode LAYOUT = LayoutMode::NONE,
          bool IBSHARE = false>
struct MatmulType {
    constexpr static TPosition pos = POS;
    constexpr static CubeFormat format = FORMAT;
    using T = TYPE;
    constexpr static bool isTrans = ISTRANS;
    constexpr static LayoutMode layout = LAYOUT;
    constexpr static bool ibShare = IBSHARE;
};

struct MatmulConfig { int kind = 0; bool intrinsicsCheck = false; };
inline constexpr MatmulConfig CFG_NORM{0, false};
inline constexpr MatmulConfig CFG_MDL{1, false};
inline constexpr MatmulConfig CFG_IBSHARE_NORM{2, false};
constexpr MatmulConfig GetNormalConfig(bool intrinsicsLimit = false) { return MatmulConfig{0, intrinsicsLimit}; }
constexpr MatmulConfig GetMDLConfig(bool intrinsicsLimit = false) { return MatmulConfig{1, intrinsicsLimit}; }
constexpr MatmulConfig GetIBShareNormConfig(bool intrinsicsLimit = false) { return MatmulConfig{2, intrinsicsLimit}; }

template <auto a = nullptr, auto b = nullptr, auto c = nullptr>
struct MatmulCallBackFunc {};

namespace simdetail {

struct MatmulRows { uintptr_t base; uint64_t rows, pitchBytes, rowBytes; };

// [rows][K] panel in the accumulation type of the operand element (r, k) =
// p[trans ? k * pitch + r : r * pitch + k]: each element is converted once, not once per
// multiply-add (fp16/bf16/fp32 -> float, int8 -> int32).
template <typename AccT, typename SrcT>
inline std::vector<AccT> matmulPanel(const SrcT* p, int64_t rows, int64_t K, bool trans, int64_t pitch) {
    std::vector<AccT> out(static_cast<size_t>(rows * K));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < K; ++k) {
            const SrcT v = trans ? p[k * pitch + r] : p[r * pitch + k];
            if constexpr (std::is_same<AccT, int32_t>::value) out[r * K + k] = static_cast<int32_t>(v);
            else out[r * K + k] = static_cast<float>(v);
        }
    return out;
}

inline void gmRowsAccess(const MatmulRows& r, AscendSim::GmAccess kind, const char* api) {
    for (uint64_t i = 0; i < r.rows; ++i)
        AscendSim::gmCheckAccess(reinterpret_cast<const void*>(r.base + i * r.pitchBytes), r.rowBytes, kind, api);
}
inline void addPending(const MatmulRows& r, bool isOutput, int id) {
    auto& c = AscendSim::ctx();
    for (uint64_t i = 0; i < r.rows; ++i)
        c.pending.push_back({r.base + i * r.pitchBytes, r.base + i * r.pitchBytes + r.rowBytes, isOutput, id});
}

template <class A, class B, class C, class BIAS>
inline void checkMatmulTypes() {
    using SA = typename A::T; using SB = typename B::T; using SC = typename C::T; using SBias = typename BIAS::T;
    using namespace AscendSim;
    static_assert(std::is_same<SA, SB>::value, "A and B element types must match on A2");
    bool ok = false;
    if (isOneOf<SA, half, bfloat16_t>()) ok = isOneOf<SC, float, half, bfloat16_t>() && isOneOf<SBias, float, half, bfloat16_t>();
    if (std::is_same<SA, float>::value) ok = isOneOf<SC, float, half, bfloat16_t>() && isOneOf<SBias, float, half>();
    if (std::is_same<SA, int8_t>::value) ok = isOneOf<SC, int32_t, half>() && isOneOf<SBias, int32_t, half>();
    if (!ok) violation("I32", "Matmul", fmt("dtype combination A=%s C=%s bias=%s is not in the A2 table", typeName<SA>(),
                                            typeName<SC>(), typeName<SBias>()));
    if (A::pos != TPosition::GM || B::pos != TPosition::GM || C::pos != TPosition::GM || BIAS::pos != TPosition::GM)
        unsupported("Matmul", "only GM positions for A/B/C/bias are emulated");
    if ((A::format != CubeFormat::ND && A::format != CubeFormat::VECTOR) || B::format != CubeFormat::ND ||
        (C::format != CubeFormat::ND && C::format != CubeFormat::ND_ALIGN))
        unsupported("Matmul", "only ND formats are emulated");
}

}  // namespace simdetail

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto& MM_CFG = CFG_NORM,
          class MM_CB = MatmulCallBackFunc<>>
class Matmul {
public:
    using SrcT = typename A_TYPE::T;
    using DstT = typename C_TYPE::T;
    using BiasT = typename BIAS_TYPE::T;
    using AccT = typename std::conditional<std::is_same<SrcT, int8_t>::value, int32_t, float>::type;

    void Init(const TCubeTiling* tiling, TPipe* tpipe = nullptr) {
        (void)tpipe;
        auto& c = AscendSim::ctx();
        if (!c.mix) AscendSim::violation("H29", "Matmul::Init", "the Matmul API needs a mix (AIC+AIV) launch: AscendC::SetKernelMode(KernelMode::MIX_MODE)");
        simdetail::checkMatmulTypes<A_TYPE, B_TYPE, C_TYPE, BIAS_TYPE>();
        if (tiling == nullptr) AscendSim::violation("I32", "Matmul::Init", "null TCubeTiling");
        tiling_ = *tiling;
        orgM_ = tiling_.M; orgN_ = tiling_.N; orgKa_ = tiling_.Ka; orgKb_ = tiling_.Kb;
        sM_ = tiling_.singleCoreM; sN_ = tiling_.singleCoreN; sK_ = tiling_.singleCoreK;
        id_ = ++c.matmulObjects;
        inited_ = true;
    }
    void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK, 0); }
    void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0) {
        (void)orgKc;
        checkInit("Matmul::SetOrgShape");
        if (orgM <= 0 || orgN <= 0 || orgKa <= 0 || orgKb <= 0)
            AscendSim::violation("I32", "Matmul::SetOrgShape", AscendSim::fmt("org shape %d,%d,%d,%d must be > 0", orgM, orgN, orgKa, orgKb));
        orgM_ = orgM; orgN_ = orgN; orgKa_ = orgKa; orgKb_ = orgKb;
    }
    void SetSingleShape(int singleM, int singleN, int singleK) {
        checkInit("Matmul::SetSingleShape");
        if (singleM <= 0 || singleN <= 0 || singleK <= 0)
            AscendSim::violation("I32", "Matmul::SetSingleShape", AscendSim::fmt("single shape %d,%d,%d must be > 0", singleM, singleN, singleK));
        sM_ = singleM; sN_ = singleN; sK_ = singleK;
    }
    void SetTail(int tailM = -1, int tailN = -1, int tailK = -1) {
        if (tailM > 0) sM_ = tailM;
        if (tailN > 0) sN_ = tailN;
        if (tailK > 0) sK_ = tailK;
    }
    void SetTensorA(const GlobalTensor<SrcT>& gm, bool isTransposeA = false) {
        checkInit("Matmul::SetTensorA");
        if (isTransposeA && !A_TYPE::isTrans)
            AscendSim::violation("I32", "Matmul::SetTensorA", "isTransposeA=true needs MatmulType<..., ISTRANS=true> for A");
        a_ = gm.simGm; transA_ = isTransposeA;
    }
    void SetTensorB(const GlobalTensor<SrcT>& gm, bool isTransposeB = false) {
        checkInit("Matmul::SetTensorB");
        if (isTransposeB && !B_TYPE::isTrans)
            AscendSim::violation("I32", "Matmul::SetTensorB", "isTransposeB=true needs MatmulType<..., ISTRANS=true> for B");
        b_ = gm.simGm; transB_ = isTransposeB;
    }
    void SetBias(const GlobalTensor<BiasT>& gm) { checkInit("Matmul::SetBias"); bias_ = gm.simGm; }
    void DisableBias() { bias_ = nullptr; }
    void ClearBias() { bias_ = nullptr; }

    template <bool sync = true>
    void IterateAll(const GlobalTensor<DstT>& gm, uint8_t enAtomic = 0, bool enSequentialWrite = false, bool waitIterateAll = false,
                    bool fakeMsg = false) {
        (void)waitIterateAll; (void)fakeMsg;
        const char* api = sync ? "Matmul::IterateAll" : "Matmul::IterateAll<false>";
        checkInit(api);
        if (enSequentialWrite) AscendSim::unsupported(api, "enSequentialWrite=true");
        if (enAtomic > 3) AscendSim::violation("I32", api, AscendSim::fmt("enAtomic=%u outside 0..3", enAtomic));
        if (job_.active) AscendSim::violation("E21", api, "a previous IterateAll<false> of this Matmul object was not waited");
        if (a_ == nullptr || b_ == nullptr) AscendSim::violation("I32", api, "SetTensorA/SetTensorB not called");
        if (sM_ <= 0 || sN_ <= 0 || sK_ <= 0) AscendSim::violation("I32", api, "single shape not set (> 0 required)");
        Job j;
        j.active = true; j.a = a_; j.b = b_; j.bias = bias_; j.c = gm.simGm; j.transA = transA_; j.transB = transB_;
        j.M = sM_; j.N = sN_; j.K = sK_; j.orgM = orgM_; j.orgN = orgN_; j.orgKa = orgKa_; j.orgKb = orgKb_; j.atomic = enAtomic;
        // Bounds (B9) and race logging at issue time.
        auto ra = rowsA(j), rb = rowsB(j), rc = rowsC(j);
        simdetail::gmRowsAccess(ra, AscendSim::GmAccess::Read, api);
        simdetail::gmRowsAccess(rb, AscendSim::GmAccess::Read, api);
        if (j.bias) AscendSim::gmCheckAccess(j.bias, sizeof(BiasT) * j.N, AscendSim::GmAccess::Read, api);
        simdetail::gmRowsAccess(rc, enAtomic ? AscendSim::GmAccess::AtomicWrite : AscendSim::GmAccess::Write, api);
        auto& s = AscendSim::stats();
        s.cubeFlops += 2ull * j.M * j.N * j.K;
        s.matmulCalls++;
        s.matmulGmBytes += (uint64_t)j.M * j.K * sizeof(SrcT) + (uint64_t)j.K * j.N * sizeof(typename B_TYPE::T) +
                           (uint64_t)j.M * j.N * sizeof(DstT) * (enAtomic ? 2 : 1);
        if (sync) {
            compute(j);
            return;
        }
        job_ = j;
        simdetail::addPending(ra, false, id_);
        simdetail::addPending(rb, false, id_);
        if (j.bias) simdetail::addPending({reinterpret_cast<uintptr_t>(j.bias), 1, 0, sizeof(BiasT) * j.N}, false, id_);
        simdetail::addPending(rc, true, id_);
        AscendSim::ctx().pendingNeedsWait = true;
    }
    void WaitIterateAll() {
        checkInit("Matmul::WaitIterateAll");
        if (!job_.active) return;
        auto& c = AscendSim::ctx();
        std::vector<AscendSim::PendingRegion> keep;
        for (auto& r : c.pending) if (r.mmId != id_) keep.push_back(r);
        c.pending.swap(keep);
        if (c.pending.empty()) c.pendingNeedsWait = false;
        compute(job_);
        job_.active = false;
    }
    void End() {
        if (job_.active) WaitIterateAll();
    }

private:
    struct Job {
        bool active = false;
        const SrcT* a = nullptr; const SrcT* b = nullptr; const BiasT* bias = nullptr; DstT* c = nullptr;
        bool transA = false, transB = false;
        int64_t M = 0, N = 0, K = 0, orgM = 0, orgN = 0, orgKa = 0, orgKb = 0;
        uint8_t atomic = 0;
    };
    simdetail::MatmulRows rowsA(const Job& j) const {
        uintptr_t base = reinterpret_cast<uintptr_t>(j.a);
        if (!j.transA) return {base, (uint64_t)j.M, j.orgKa * sizeof(SrcT), j.K * sizeof(SrcT)};
        return {base, (uint64_t)j.K, j.orgM * sizeof(SrcT), j.M * sizeof(SrcT)};
    }
    simdetail::MatmulRows rowsB(const Job& j) const {
        uintptr_t base = reinterpret_cast<uintptr_t>(j.b);
        if (!j.transB) return {base, (uint64_t)j.K, j.orgN * sizeof(SrcT), j.N * sizeof(SrcT)};
        return {base, (uint64_t)j.N, j.orgKb * sizeof(SrcT), j.K * sizeof(SrcT)};
    }
    simdetail::MatmulRows rowsC(const Job& j) const {
        return {reinterpret_cast<uintptr_t>(j.c), (uint64_t)j.M, j.orgN * sizeof(DstT), j.N * sizeof(DstT)};
    }
    void compute(const Job& j) {
        const auto a = simdetail::matmulPanel<AccT>(j.a, j.M, j.K, j.transA, j.transA ? j.orgM : j.orgKa);
        const auto bt = simdetail::matmulPanel<AccT>(j.b, j.N, j.K, !j.transB, j.transB ? j.orgKb : j.orgN);
        if (j.atomic) AscendSim::atomicLock();
        for (int64_t m = 0; m < j.M; ++m) {
            for (int64_t n = 0; n < j.N; ++n) {
                const AccT* ar = a.data() + m * j.K;
                const AccT* br = bt.data() + n * j.K;
                AccT acc = 0;
                for (int64_t k = 0; k < j.K; ++k) acc += ar[k] * br[k];
                if (j.bias) acc += static_cast<AccT>(static_cast<float>(j.bias[n]));
                DstT r = AscendSim::fromLD<DstT>(static_cast<AscendSim::LD>(acc));
                DstT* cp = j.c + m * j.orgN + n;
                if (j.atomic) r = simdetail::atomicCombine<DstT>(*cp, r, j.atomic);
                *cp = r;
            }
        }
        if (j.atomic) AscendSim::atomicUnlock();
    }
    void checkInit(const char* api) const {
        if (!inited_) AscendSim::violation("I32", api, "Matmul object used before REGIST_MATMUL_OBJ / Init");
    }

    TCubeTiling tiling_{};
    bool inited_ = false;
    int id_ = 0;
    int64_t orgM_ = 0, orgN_ = 0, orgKa_ = 0, orgKb_ = 0, sM_ = 0, sN_ = 0, sK_ = 0;
    const SrcT* a_ = nullptr; const SrcT* b_ = nullptr; const BiasT* bias_ = nullptr;
    bool transA_ = false, transB_ = false;
    Job job_;
};

namespace simdetail {
inline void registPairs(int&) {}
template <class MM, class... Rest>
inline void registPairs(int& n, MM& mm, const TCubeTiling* tiling, Rest&&... rest) {
    ++n;
    if (n > 4) AscendSim::violation("A5", "REGIST_MATMUL_OBJ", "more than 4 Matmul objects");
    if (tiling) mm.Init(tiling);
    registPairs(n, rest...);
}
template <class... Args>
inline void registMatmul(TPipe* pipe, GM_ADDR workspace, Args&&... args) {
    auto& c = AscendSim::ctx();
    if (!c.mix) AscendSim::violation("H29", "REGIST_MATMUL_OBJ", "Matmul objects need a mix launch (AscendC::SetKernelMode(KernelMode::MIX_MODE))");
    if (c.matmulRegistered) AscendSim::violation("A5", "REGIST_MATMUL_OBJ", "called more than once");
    if (pipe && !pipe->simBlocks.empty())
        AscendSim::violation("A5", "REGIST_MATMUL_OBJ", "must be called before any TPipe::InitBuffer");
    c.matmulRegistered = true;
    if (workspace) c.sysWorkspace = workspace;
    int n = 0;
    registPairs(n, args...);
}
}  // namespace simdetail

}  // namespace AscendC

#define REGIST_MATMUL_OBJ(tpipe, workspace, ...) ::AscendC::simdetail::registMatmul(tpipe, workspace, __VA_ARGS__)

// DSDK spells the types matmul::MatmulType / matmul::Matmul.
namespace matmul {
using AscendC::CubeFormat;
using AscendC::LayoutMode;
using AscendC::Matmul;
using AscendC::MatmulConfig;
using AscendC::MatmulType;
using AscendC::CFG_NORM;
using AscendC::CFG_MDL;
using AscendC::GetNormalConfig;
using AscendC::GetMDLConfig;
using AscendC::GetIBShareNormConfig;
using AscendC::MatmulCallBackFunc;
}  // namespace matmul
