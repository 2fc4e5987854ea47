// Launchers of the lightning (linear) attention decode kernels. Plain
// parameters only (no torch), so the .cu files compile without torch headers.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::lightning {

// Largest d (key dim) and e (value dim) the decode kernel supports: one thread
// block keeps a [d, 32] slice of the state in registers.
constexpr int kMaxHeadDim = 128;
// State columns (of e) one thread block owns: the grid is batch * heads * ceil(e / kChunkCols)
// blocks, at most INT_MAX.
constexpr int kChunkCols = 32;

// For each head (b, h) and each of the n tokens t in order:
//   kv  <- exp(-slope[h]) * kv + k_t^T v_t      (kv: [d, e] fp32)
//   o_t <- q_t kv                              (o_t: [e])
// q, k: [batch, heads, n, d], v and out: [batch, heads, n, e], all contiguous in
// `dtype` (float32, float16 or bfloat16); kv and new_kv: [batch, heads, d, e]
// contiguous fp32; slope: [heads] fp32. new_kv may be kv (in-place update: each
// element is read before it is written, by the same thread); it must not
// overlap kv otherwise, and out must not overlap any input.
// Returns cudaErrorInvalidValue for sizes out of range, else the launch status.
cudaError_t launch_lightning_attention_decode(const void* q, const void* k, const void* v, const float* kv,
                                              const float* slope, void* out, float* new_kv, int64_t batch,
                                              int64_t heads, int64_t n, int d, int e, DType dtype,
                                              cudaStream_t stream);

}  // namespace cuda_llm_ops::lightning
