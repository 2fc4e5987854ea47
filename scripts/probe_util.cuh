// Shared by the standalone dev probes (scripts/*_probe.cu): a CUDA-call check that exits
// with the call and its error, the %globaltimer clock the probes stamp with, random fp16
// inputs and the median of a sample.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

// Random fp16 in [-scale, scale) from a hash of the index (real data, never a constant).
__global__ void fill_random(__half* p, int64_t n, uint32_t seed, float scale = 1.f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) * 40503u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2half(scale * (float(x & 0xffff) / 32768.f - 1.f));
  }
}

inline double median_of(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0.0 : x[x.size() / 2];
}

// us per launch of `launch(buffer)`, L2-cold by rotating `buffers` inputs (each bigger than the
// L2): two warm-up rounds, then `loops` loops of `launches` launches between events; the median.
template <class Launch>
float time_rotated(Launch launch, int buffers, int launches = 16, int loops = 7) {
  for (int i = 0; i < 2 * buffers; ++i) launch(i % buffers);
  CK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int l = 0; l < loops; ++l) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < launches; ++i) launch(i % buffers);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.0 / launches);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return static_cast<float>(median_of(t));
}
