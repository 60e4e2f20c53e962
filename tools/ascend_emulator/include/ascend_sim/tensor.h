// LocalTensor (a view into the current core's UB) and GlobalTensor (a view into GM).
// Views may alias freely (§2.4); every access is bounds-checked against the view (B8/B10),
// GM accesses also against the GmAlloc registry (B9).
#pragma once
#include "ascend_sim/runtime.h"

namespace AscendC {

template <typename T>
class LocalTensor {
public:
    using PrimType = T;
    // Emulator state (public so that API implementations can read it; kernels should not).
    uint32_t simAddr = 0;     // byte offset in UB
    uint32_t simBytes = 0;    // bytes visible through this view
    TPosition simPos = TPosition::VECCALC;
    int32_t simBufId = -1;    // TPipe buffer handle (queue ownership checks)
    const void* simOwner = nullptr;  // owning TQue/TBuf

    LocalTensor() = default;

    T* simPtr() const { return reinterpret_cast<T*>(AscendSim::ubBase() + simAddr); }
    uint32_t GetSize() const { return simBytes / sizeof(T); }
    uint32_t GetLength() const { return simBytes; }
    uint64_t GetPhyAddr() const { return simAddr; }
    uint64_t GetPhyAddr(uint32_t off) const { return simAddr + off * sizeof(T); }
    TPosition GetPosition() const { return simPos; }

    LocalTensor operator[](uint32_t off) const {
        if (static_cast<uint64_t>(off) * sizeof(T) > simBytes)
            AscendSim::violation("B10", "LocalTensor::operator[]",
                AscendSim::fmt("offset %u elements exceeds view of %u elements", off, GetSize()));
        LocalTensor r = *this;
        r.simAddr = simAddr + off * sizeof(T);
        r.simBytes = simBytes - off * sizeof(T);
        return r;
    }
    T GetValue(uint32_t i) const {
        if (i >= GetSize())
            AscendSim::violation("B10", "LocalTensor::GetValue",
                AscendSim::fmt("index %u outside view of %u %s elements", i, GetSize(), AscendSim::typeName<T>()));
        AscendSim::stats().scalarUbGet++;
        AscendSim::hzScalarTouch(simAddr + i * sizeof(T), sizeof(T));
        T v; std::memcpy(&v, AscendSim::ubBase() + simAddr + i * sizeof(T), sizeof(T)); return v;
    }
    void SetValue(uint32_t i, AscendSim::NoDeduce<T> v) const {
        if (i >= GetSize())
            AscendSim::violation("B10", "LocalTensor::SetValue",
                AscendSim::fmt("index %u outside view of %u %s elements", i, GetSize(), AscendSim::typeName<T>()));
        AscendSim::stats().scalarUbSet++;
        AscendSim::hzScalarTouch(simAddr + i * sizeof(T), sizeof(T));
        std::memcpy(AscendSim::ubBase() + simAddr + i * sizeof(T), &v, sizeof(T));
    }
    template <typename U>
    LocalTensor<U> ReinterpretCast() const {
        LocalTensor<U> r;
        r.simAddr = simAddr; r.simBytes = simBytes; r.simPos = simPos; r.simBufId = simBufId; r.simOwner = simOwner;
        return r;
    }
    void SetSize(uint32_t n) {
        if (static_cast<uint64_t>(n) * sizeof(T) > simBytes)
            AscendSim::violation("B10", "LocalTensor::SetSize", AscendSim::fmt("size %u larger than view", n));
        simBytes = n * sizeof(T);
    }
};

template <typename T>
class GlobalTensor {
public:
    using PrimType = T;
    T* simGm = nullptr;
    uint64_t simSize = 0;   // elements; 0 = unknown

    GlobalTensor() = default;
    void SetGlobalBuffer(__gm__ T* p, uint64_t size) { simGm = p; simSize = size; }
    void SetGlobalBuffer(__gm__ T* p) { simGm = p; simSize = 0; }
    GlobalTensor operator[](uint64_t off) const {
        if (simSize != 0 && off > simSize)
            AscendSim::violation("B10", "GlobalTensor::operator[]",
                AscendSim::fmt("offset %llu exceeds GlobalTensor size %llu", (unsigned long long)off, (unsigned long long)simSize));
        GlobalTensor r; r.simGm = simGm + off; r.simSize = simSize ? simSize - off : 0;
        return r;
    }
    uint64_t GetSize() const { return simSize; }
    __gm__ T* GetPhyAddr() const { return simGm; }
    __gm__ T* GetPhyAddr(uint64_t off) const { return simGm + off; }
    T GetValue(uint64_t off) const {
        check(off, "GlobalTensor::GetValue", AscendSim::GmAccess::Read);
        AscendSim::stats().scalarGmGet++;
        T v; std::memcpy(&v, simGm + off, sizeof(T)); return v;
    }
    void SetValue(uint64_t off, AscendSim::NoDeduce<T> v) const {
        check(off, "GlobalTensor::SetValue", AscendSim::GmAccess::Write);
        AscendSim::stats().scalarGmSet++;
        std::memcpy(simGm + off, &v, sizeof(T));
    }
    // No ReinterpretCast: the real GlobalTensor has none (tools/ascend_real_api probe api_accept);
    // a second view of GM is a second SetGlobalBuffer on the cast address.
private:
    void check(uint64_t off, const char* api, AscendSim::GmAccess kind) const {
        if (simSize != 0 && off >= simSize)
            AscendSim::violation("B10", api, AscendSim::fmt("offset %llu outside GlobalTensor of %llu elements",
                (unsigned long long)off, (unsigned long long)simSize));
        AscendSim::gmCheckAccess(simGm + off, sizeof(T), kind, api);
    }
};

}  // namespace AscendC
