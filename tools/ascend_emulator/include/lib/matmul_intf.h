// Emulator version of CANN's lib/matmul_intf.h (Matmul high-level API).
#pragma once
#include "kernel_operator.h"
#include "ascend_sim/matmul.h"
