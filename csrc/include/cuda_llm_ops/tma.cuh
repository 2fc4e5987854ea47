// Hopper (sm_90) bulk tensor copies (TMA) and the shared-memory mbarriers they
// complete on. Device code only; the CUtensorMap is encoded on the host (see
// csrc/gemm/gemm_wgmma_sm90.cu) and passed as a __grid_constant__ parameter.
//
// Every function compiles to nothing below sm_90, so a header that includes this
// one still builds for sm_80; callers guard their sm_90 code paths themselves.
#pragma once

#include <cuda.h>  // CUtensorMap (type only; nothing is linked from libcuda)

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::tma {

CLO_DEVICE uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// mbarrier with `count` expected arrivals per phase.
CLO_DEVICE void mbarrier_init(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
#endif
}

// Makes initialised mbarriers visible to the async proxy (the TMA unit) and the other threads
// (followed by a __syncthreads in the caller).
CLO_DEVICE void mbarrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival that also announces `bytes` of transactions (the TMA copies of this phase).
CLO_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#endif
}

CLO_DEVICE void mbarrier_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

CLO_DEVICE bool mbarrier_try_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
#else
  return true;
#endif
}

// Waits until the phase with `parity` has completed. A phase that never completes
// (a wrong expect-tx byte count, a lost arrival) traps after ~2^26 polls, turning a
// hang into a launch error the host sees.
CLO_DEVICE void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t polls = 0;
  while (!mbarrier_try_wait(bar, parity)) {
    if (++polls == (1u << 26)) __trap();
  }
}

// 2-D tile load global -> shared (box and swizzle as encoded in the tensor map);
// out-of-bounds elements are zero-filled and still count towards the bytes the
// mbarrier expects. Coordinates are in elements, innermost first.
CLO_DEVICE void load_2d(void* smem_dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(smem_addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
#endif
}

CLO_DEVICE void prefetch_tensor_map(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

}  // namespace cuda_llm_ops::tma
