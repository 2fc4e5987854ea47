// Shared by the standalone dev probes (scripts/*_probe.cu): a CUDA-call check that exits
// with the call and its error, and the %globaltimer clock the probes stamp with.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// The probes build with csrc/include on the include path (scripts/build_*_probe.sh).
#include "cuda_llm_ops/common.cuh"

__device__ __forceinline__ unsigned long long global_ns() { return cuda_llm_ops::global_timer_ns(); }
