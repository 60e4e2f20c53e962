// mx_sparse stand-in: the SIMT headers include this closed tikicpulib header; our kernels use no
// SIMT API, so it declares nothing.
#pragma once
