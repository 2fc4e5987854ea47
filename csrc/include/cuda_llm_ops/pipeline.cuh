// Asynchronous global->shared copies (cp.async, sm_80+) for multi-stage
// pipelines. The zero-fill forms let edge tiles load "out of bounds" rows as
// zeros without a branch around the copy and without touching the memory.
#pragma once

#include "common.cuh"

namespace cuda_llm_ops {

// 16-byte copy; when `valid` is false the destination is filled with zeros and
// the source is not read (src-size operand 0).
CLO_DEVICE void cp_async_16(void* smem_dst, const void* gmem_src, bool valid = true) {
  const uint32_t dst = smem_u32addr(smem_dst);
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes));
}

// 16-byte copy that stays in L1 as well (.ca): for data re-read by the block.
CLO_DEVICE void cp_async_16_ca(void* smem_dst, const void* gmem_src, bool valid = true) {
  const uint32_t dst = smem_u32addr(smem_dst);
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes));
}

// 4-byte copy for layouts that cannot be read 16 bytes at a time.
CLO_DEVICE void cp_async_4(void* smem_dst, const void* gmem_src, bool valid = true) {
  const uint32_t dst = smem_u32addr(smem_dst);
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes));
}

CLO_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most N committed groups are still in flight.
template <int N>
CLO_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

CLO_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

// 16-byte cp.async (L2 only) with an L2 prefetch-size hint: a miss fetches the
// whole 128/256-byte line, so the key/value rows (128-512 bytes each, scattered
// over the cache) become full-line DRAM reads. Zero-fills when !valid.
template <int kPrefetchBytes>
CLO_DEVICE void cp_async_16_prefetch(void* smem_dst, const void* gmem_src, bool valid) {
  const uint32_t dst = smem_u32addr(smem_dst);
  const int src_bytes = valid ? 16 : 0;
  if constexpr (kPrefetchBytes >= 256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes));
  } else {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes));
  }
}

CLO_DEVICE void prefetch_l2(const void* ptr) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(ptr)); }

}  // namespace cuda_llm_ops
