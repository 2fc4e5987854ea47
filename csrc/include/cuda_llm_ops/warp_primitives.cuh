// Warp- and block-level reductions and named barriers. The butterfly (xor) form leaves
// the result in every lane, which is what softmax and norm code wants: no broadcast after.
#pragma once

#include "common.cuh"

namespace cuda_llm_ops {

constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
CLO_DEVICE T warp_reduce_sum(T val) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) val += __shfl_xor_sync(kFullMask, val, offset);
  return val;
}

template <typename T>
CLO_DEVICE T warp_reduce_max(T val) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) val = max(val, __shfl_xor_sync(kFullMask, val, offset));
  return val;
}

template <typename T>
CLO_DEVICE T warp_reduce_min(T val) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) val = min(val, __shfl_xor_sync(kFullMask, val, offset));
  return val;
}

// Inclusive prefix sum over the warp's lanes (lane i gets lanes 0..i's sum).
template <typename T>
CLO_DEVICE T warp_inclusive_sum(T val) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const T up = __shfl_up_sync(kFullMask, val, offset);
    if (lane >= offset) val += up;
  }
  return val;
}

// Reduction over a group of `Width` consecutive lanes (Width a power of two <= 32),
// e.g. the 4 lanes that share an accumulator row in an mma.sync fragment.
template <int Width, typename T>
CLO_DEVICE T group_reduce_sum(T val) {
#pragma unroll
  for (int offset = Width / 2; offset > 0; offset >>= 1) val += __shfl_xor_sync(kFullMask, val, offset);
  return val;
}

template <int Width, typename T>
CLO_DEVICE T group_reduce_max(T val) {
#pragma unroll
  for (int offset = Width / 2; offset > 0; offset >>= 1) val = max(val, __shfl_xor_sync(kFullMask, val, offset));
  return val;
}

// Block reductions: every thread gets the result. `smem` needs BlockSize/32
// elements. The trailing barrier lets the caller reuse `smem` right away.
template <typename T, int BlockSize>
CLO_DEVICE T block_reduce_sum(T val, T* smem) {
  static_assert(BlockSize % 32 == 0 && BlockSize <= 1024, "block size must be a multiple of 32");
  constexpr int kWarps = BlockSize / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  val = warp_reduce_sum(val);
  if (lane == 0) smem[warp] = val;
  __syncthreads();
  T total = lane < kWarps ? smem[lane] : T(0);
  total = warp_reduce_sum(total);
  __syncthreads();
  return total;
}

template <typename T, int BlockSize>
CLO_DEVICE T block_reduce_max(T val, T* smem, T identity) {
  static_assert(BlockSize % 32 == 0 && BlockSize <= 1024, "block size must be a multiple of 32");
  constexpr int kWarps = BlockSize / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  val = warp_reduce_max(val);
  if (lane == 0) smem[warp] = val;
  __syncthreads();
  T total = lane < kWarps ? smem[lane] : identity;
  total = warp_reduce_max(total);
  __syncthreads();
  return total;
}

// Named barrier `id` (1..15; 0 is __syncthreads') of `threads` threads (a multiple of
// 32): sync waits for all of them, arrive only counts the calling warp in. Lets part of a
// block (a producer warp, say) hand work to the rest without waiting for it.
CLO_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
CLO_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// __syncthreads_or over the `threads` threads of named barrier `id` (whole warps).
CLO_DEVICE bool named_barrier_or(int id, int threads, bool pred) {
  int out;
  asm volatile(
      "{\n"
      "  .reg .pred p, q;\n"
      "  setp.ne.s32 p, %1, 0;\n"
      "  barrier.red.or.pred q, %2, %3, p;\n"
      "  selp.s32 %0, 1, 0, q;\n"
      "}\n"
      : "=r"(out)
      : "r"(static_cast<int>(pred)), "r"(id), "r"(threads)
      : "memory");
  return out != 0;
}

}  // namespace cuda_llm_ops
