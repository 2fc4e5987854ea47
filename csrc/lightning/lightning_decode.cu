// Lightning (linear) attention decode: for each head and each of the n tokens
// in order, kv <- exp(-slope) * kv + k_t^T v_t, then o_t <- q_t kv.
//
// The op is memory-bound: the fp32 state [d, e] of every head is read once and
// written once; q, k, v and o are a few hundred bytes per head. So the design
// is about bytes in flight, not arithmetic:
// - a block owns a [d, 32] column slice of one head's state (the e dimension is
//   split over blocks), so b = 1, h = 64, e = 96 still gives 192 blocks for
//   132 SMs, and larger batches give thousands;
// - 256 threads per block; each thread owns Vec consecutive columns of ~d/32
//   rows (Vec = 4: 8 threads across the slice, 32 row groups) and keeps them in
//   registers for the whole launch: the state is loaded with 16-byte vector
//   loads (a warp reads four full 128-byte rows), updated for all n tokens,
//   and stored once with 16-byte stores; the loads are issued before anything
//   else so their latency overlaps the staging of q/k/v;
// - o_t = q_t kv needs a sum over d only: over a thread's rows in registers,
//   then over the row groups of a warp with shuffles, then over the 8 warps in
//   shared memory;
// - in-place update (new_kv == kv) is safe because every state element is read
//   and later written by the same thread, and blocks own disjoint slices. kv and
//   new_kv therefore carry no __restrict__.
#include "lightning/lightning.h"

#include <climits>
#include <cstdint>

#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"

namespace cuda_llm_ops::lightning {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTokenChunk = 8;   // tokens whose q/k/v sit in shared memory at once

template <int Vec>
CLO_DEVICE void load_state(const float* p, float (&x)[Vec]) {
  if constexpr (Vec == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    x[0] = t.x; x[1] = t.y; x[2] = t.z; x[3] = t.w;
  } else if constexpr (Vec == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    x[0] = t.x; x[1] = t.y;
  } else {
    x[0] = *p;
  }
}

template <int Vec>
CLO_DEVICE void store_state(float* p, const float (&x)[Vec]) {
  if constexpr (Vec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  } else if constexpr (Vec == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(x[0], x[1]);
  } else {
    *p = x[0];
  }
}

// One block per (batch, head, 32-column slice of e). Vec: state columns per
// thread (4 when e % 4 == 0 and the state is 16-byte aligned, else 2 or 1).
// kDecode: n == 1 known at compile time. The general token loop needs 64
// registers (4 blocks of 256 threads per SM); the n = 1 body fits 40 with no
// spills for Vec = 4 on sm_90a (8 bytes on sm_80), so 6 blocks per SM keep 50% more state loads in flight
// (v1, 4 blocks for n = 1 too: 82% of copy bandwidth at b = 16).
template <typename T, int Vec, bool kDecode>
__global__ void __launch_bounds__(kThreads, kDecode ? 6 : 4)
lightning_attention_decode_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                  const float* kv, const float* __restrict__ slope, T* __restrict__ out,
                                  float* new_kv, int heads, int n_tokens, int d, int e, int num_chunks) {
  const int n = kDecode ? 1 : n_tokens;
  constexpr int kColThreads = kChunkCols / Vec;      // threads across the slice's columns
  constexpr int kRowGroups = kThreads / kColThreads;  // threads across d
  constexpr int kRows = kMaxHeadDim / kRowGroups;     // rows per thread when d = 128
  static_assert(kRows * kRowGroups == kMaxHeadDim, "row groups must tile the largest d");

  // q and k are zero-padded to 128 rows so the row loop needs no bounds test;
  // zero k and zero state keep padded rows at zero, zero q drops them from o.
  __shared__ float s_q[kTokenChunk][kMaxHeadDim];
  __shared__ float s_k[kTokenChunk][kMaxHeadDim];
  __shared__ float s_v[kTokenChunk][kChunkCols];
  __shared__ float s_part[kTokenChunk][kWarps][kChunkCols];  // per-warp partial o

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int chunk = static_cast<int>(blockIdx.x % num_chunks);
  const int64_t bh = blockIdx.x / num_chunks;
  const int head = static_cast<int>(bh % heads);
  const int col_thread = tid % kColThreads;
  const int row_group = tid / kColThreads;
  const int chunk_col0 = chunk * kChunkCols;
  const int col0 = chunk_col0 + col_thread * Vec;
  const bool col_ok = col0 < e;  // e % Vec == 0: the whole vector is in range or out

  // The state loads go first: everything below overlaps their latency.
  // One 64-bit base per thread and 32-bit row offsets (d * e <= 16384) keep
  // the address registers down: 64-bit row pointers would cost 2 registers each.
  const float* kv_src = kv + bh * d * e + col0;
  float state[kRows][Vec];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int r = row_group + i * kRowGroups;
    if (col_ok && r < d) {
      load_state<Vec>(kv_src + r * e, state[i]);
    } else {
#pragma unroll
      for (int j = 0; j < Vec; ++j) state[i][j] = 0.f;
    }
  }
  const float decay = expf(-slope[head]);

  const int64_t qk_base = bh * n * d;
  const int64_t vo_base = bh * n * e;
  for (int t0 = 0; t0 < n; t0 += kTokenChunk) {
    const int nt = min(kTokenChunk, n - t0);
    if (t0 > 0) __syncthreads();  // the previous chunk's output pass has read s_part
#pragma unroll 1
    for (int idx = tid; idx < nt * kMaxHeadDim; idx += kThreads) {
      const int tt = idx / kMaxHeadDim, r = idx % kMaxHeadDim;
      const int64_t off = qk_base + static_cast<int64_t>(t0 + tt) * d + r;
      s_q[tt][r] = r < d ? to_float(q[off]) : 0.f;
      s_k[tt][r] = r < d ? to_float(k[off]) : 0.f;
    }
#pragma unroll 1
    for (int idx = tid; idx < nt * kChunkCols; idx += kThreads) {
      const int tt = idx / kChunkCols, c = idx % kChunkCols;
      const int col = chunk_col0 + c;
      s_v[tt][c] = col < e ? to_float(v[vo_base + static_cast<int64_t>(t0 + tt) * e + col]) : 0.f;
    }
    __syncthreads();

#pragma unroll 1
    for (int tt = 0; tt < nt; ++tt) {
      float vv[Vec], part[Vec];
#pragma unroll
      for (int j = 0; j < Vec; ++j) {
        vv[j] = s_v[tt][col_thread * Vec + j];
        part[j] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = row_group + i * kRowGroups;
        const float kr = s_k[tt][r], qr = s_q[tt][r];
#pragma unroll
        for (int j = 0; j < Vec; ++j) {
          state[i][j] = fmaf(decay, state[i][j], kr * vv[j]);
          part[j] = fmaf(qr, state[i][j], part[j]);
        }
      }
      // Lanes kColThreads apart hold the same columns for other rows.
#pragma unroll
      for (int offset = kColThreads; offset < 32; offset <<= 1) {
#pragma unroll
        for (int j = 0; j < Vec; ++j) part[j] += __shfl_xor_sync(kFullMask, part[j], offset);
      }
      if (lane < kColThreads) {
#pragma unroll
        for (int j = 0; j < Vec; ++j) s_part[tt][warp][col_thread * Vec + j] = part[j];
      }
    }

    if (t0 + nt == n) {  // last token done: write the state back before the o pass
      float* kv_dst = new_kv + bh * d * e + col0;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = row_group + i * kRowGroups;
        if (col_ok && r < d) store_state<Vec>(kv_dst + r * e, state[i]);
      }
    }
    __syncthreads();
    for (int idx = tid; idx < nt * kChunkCols; idx += kThreads) {
      const int tt = idx / kChunkCols, c = idx % kChunkCols;
      const int col = chunk_col0 + c;
      if (col < e) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += s_part[tt][w][c];
        out[vo_base + static_cast<int64_t>(t0 + tt) * e + col] = from_float<T>(sum);
      }
    }
  }
}

inline bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

cudaError_t launch_lightning_attention_decode(const void* q, const void* k, const void* v, const float* kv,
                                              const float* slope, void* out, float* new_kv, int64_t batch,
                                              int64_t heads, int64_t n, int d, int e, DType dtype,
                                              cudaStream_t stream) {
  if (batch < 1 || heads < 1 || heads > INT_MAX || n < 1 || n > INT_MAX || d < 1 || d > kMaxHeadDim || e < 1 ||
      e > kMaxHeadDim) {
    return cudaErrorInvalidValue;
  }
  const int num_chunks = div_ceil(e, kChunkCols);
  const int64_t blocks = batch * heads * num_chunks;
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  int vec = 1;
  if (e % 4 == 0 && aligned_to(kv, 16) && aligned_to(new_kv, 16)) {
    vec = 4;
  } else if (e % 2 == 0 && aligned_to(kv, 8) && aligned_to(new_kv, 8)) {
    vec = 2;
  }
  return dispatch_float_dtype(dtype, [&]<typename T>() -> cudaError_t {
    auto launch = [&]<int Vec>() -> cudaError_t {
      auto kernel = n == 1 ? lightning_attention_decode_kernel<T, Vec, true>
                           : lightning_attention_decode_kernel<T, Vec, false>;
      kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), kv, slope,
          static_cast<T*>(out), new_kv, static_cast<int>(heads), static_cast<int>(n), d, e, num_chunks);
      return cudaGetLastError();
    };
    switch (vec) {
      case 4: return launch.template operator()<4>();
      case 2: return launch.template operator()<2>();
      default: return launch.template operator()<1>();
    }
  });
}

}  // namespace cuda_llm_ops::lightning
