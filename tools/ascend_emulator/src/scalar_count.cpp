// Scalar-unit work of a kernel: basic blocks executed by the kernel's own code, per core.
//
// On the NPU every branch, loop iteration and index computation of a kernel runs on the AI
// Core's scalar unit, while an API call (DataCopy, a vector op, ...) is a few instructions that
// issue work to another pipe. On the emulator the API calls are ordinary C++ with loops of
// their own, so counting all executed code would charge the emulator's element loops to the
// kernel.
//
// cpu_debug_build.sh compiles kernel translation units with -fsanitize-coverage=trace-pc (GCC
// calls __sanitizer_cov_trace_pc() at the start of every basic block) to assembly, and deletes
// the calls of blocks whose first instruction comes from a file that is not the kernel's own
// (the inlined emulator headers, the C++ library). What is left is one call per executed block
// of kernel source; the launch binds each core thread's counter while the kernel body runs.
#include "ascend_sim/runtime.h"

namespace {
thread_local uint64_t* t_counter = nullptr;
}  // namespace

extern "C" void __sanitizer_cov_trace_pc() {
    if (t_counter) ++*t_counter;
}

namespace AscendSim {

void scalarCountBind(uint64_t* counter) { t_counter = counter; }

}  // namespace AscendSim
