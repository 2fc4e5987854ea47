// Hopper (sm_90) bulk tensor copies (TMA) and the shared-memory mbarriers they
// complete on. Maps are encoded on the host (encode_tiled_16bit, at the end) and
// passed as __grid_constant__ kernel parameters.
//
// Every function compiles to nothing below sm_90, so a header that includes this
// one still builds for sm_80; callers guard their sm_90 code paths themselves.
#pragma once

#include <cuda.h>  // CUtensorMap (type only; nothing is linked from libcuda)
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::tma {

// mbarrier with `count` expected arrivals per phase.
CLO_DEVICE void mbarrier_init(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32addr(bar)), "r"(count));
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
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32addr(bar)), "r"(bytes)
               : "memory");
#endif
}

CLO_DEVICE void mbarrier_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32addr(bar)) : "memory");
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
      : "r"(smem_u32addr(bar)), "r"(parity)
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

// mbarrier_wait for a thread that waits long, e.g. a producer for a stage the consumers
// release one softmax later: each poll suspends the thread in the barrier until the phase
// completes (or kSuspendNs pass) instead of returning at once. Spinning with plain polls
// (~10 ns each) took ~9% of the issue slots of the scheduler the producer's warp shares
// with consumer warps (flash_attention_fwd_sm90, ncu source counters, attention/NOTES.md
// v9). Traps once a wait has lasted ~4 s (%globaltimer).
CLO_DEVICE void mbarrier_wait_suspended(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr uint32_t kSuspendNs = 1000000;
  auto poll = [&] {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32addr(bar)), "r"(parity), "r"(kSuspendNs)
        : "memory");
    return done != 0;
  };
  if (poll()) return;
  const uint32_t t0 = global_timer_lo_ns();
  while (!poll()) {
    if (global_timer_lo_ns() - t0 > 4000000000u) __trap();
  }
#endif
}

// mbarrier_wait without the trap, for warps after setmaxnreg.inc: a trap anywhere on
// their path makes ptxas allocate it under the kernel's entry register cap (a
// flash_attention_fwd_sm90 consumer spilled 212 bytes at 168 registers with it, none at
// 240 without). A warp that does trap must watch these waits: one that hangs here keeps
// it waiting too (attention/NOTES.md v3).
CLO_DEVICE void mbarrier_wait_untrapped(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

// 2-D tile load global -> shared (box and swizzle as encoded in the tensor map);
// out-of-bounds elements are zero-filled and still count towards the bytes the
// mbarrier expects. Coordinates are in elements, innermost first.
CLO_DEVICE void load_2d(void* smem_dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(smem_u32addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32addr(bar))
      : "memory");
#endif
}

// load_2d into the same shared-memory offset of every CTA of the cluster whose bit is
// set in `cta_mask`; each destination's mbarrier at `bar`'s offset receives the bytes.
CLO_DEVICE void load_2d_multicast(void* smem_dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar,
                                  uint16_t cta_mask) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n"
      ::"r"(smem_u32addr(smem_dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32addr(bar)),
      "h"(cta_mask)
      : "memory");
#endif
}

// 3-D / 4-D / 5-D tile loads (as load_2d).
CLO_DEVICE void load_3d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_u32addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32addr(bar))
      : "memory");
#endif
}

CLO_DEVICE void load_4d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2, int c3, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(smem_u32addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32addr(bar))
      : "memory");
#endif
}

CLO_DEVICE void load_5d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2, int c3, int c4,
                        uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5, %6}], [%7];\n" ::"r"(smem_u32addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32addr(bar))
      : "memory");
#endif
}

// 2-D tile store shared -> global (box and swizzle of the map; elements outside the
// tensor are not written), in the issuing thread's bulk async-group.
CLO_DEVICE void store_2d(const CUtensorMap* map, int c0, int c1, const void* smem_src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32addr(smem_src))
               : "memory");
#endif
}

// 4-D tile store (as store_2d).
CLO_DEVICE void store_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3, const void* smem_src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32addr(smem_src))
               : "memory");
#endif
}

// Closes the issuing thread's current bulk async-group (the stores since the last commit).
CLO_DEVICE void store_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of the thread's committed store groups still read shared memory
// (their source may then be overwritten; the global writes may still be in flight).
template <int N>
CLO_DEVICE void store_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}

// Waits until all of the thread's committed store groups have completed.
CLO_DEVICE void store_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy
// (TMA) reads of them; each writing thread executes it before the barrier that precedes
// the store.
CLO_DEVICE void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Asks for `bytes` (a multiple of 16, 16-byte aligned) at `src` to be brought into L2, with
// no destination and nothing to wait on: data a later phase of the kernel reads.
CLO_DEVICE void prefetch_l2(const void* src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#endif
}

CLO_DEVICE void prefetch_tensor_map(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// ---- host side -------------------------------------------------------------
// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda), looked
// up once per process; nullptr where the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      p = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// The L2 promotion (the bytes L2 fetches around a box row that misses) of maps over
// operands streamed once from DRAM (decode K/V, the skinny GEMM tile's weights): 128 B on
// Hopper HBM3e parts (device_is_hopper_hbm3e: the H200's 3.2-GHz memory), 256 B elsewhere. Measured on
// the decode K/V streams (csrc/decode/NOTES.md, "L2 promotion on the H200"): on the H200
// 128 B (or none) lifts most grids 2-10% (paged B=64/4K/MHA 994 -> 948 us, contiguous
// 1009 -> 921, D = 64 B=64/2K/MHA 256 -> 243); on the H100 (HBM3, 2.6 GHz) the lower
// settings lost 1-3% at large grids (NOTES.md v6 and v39). Dev knob CLO_TMA_L2_PROMOTION
// (0 none, 1 64 B, 2 128 B, 3 256 B) overrides it.
inline CUtensorMapL2promotion stream_l2_promotion() {
  static bool dev_mode = std::getenv("CLO_TMA_L2_PROMOTION") != nullptr;
  const int fallback = device_is_hopper_hbm3e() ? 2 : 3;
  const int v = dev_knob("CLO_TMA_L2_PROMOTION", dev_mode, fallback);
  return static_cast<CUtensorMapL2promotion>(v >= 0 && v <= 3 ? v : fallback);
}

// A tiled, zero-filling map of `rank` (2..5) dims of `type` elements, `swizzle`, L2
// `promotion` (256 B, or stream_l2_promotion() for streams): dims and box innermost
// first, strides[i] the byte stride of dim i + 1 (each a multiple of 16 below 2^40).
// cudaErrorNotSupported without the driver entry point, cudaErrorInvalidValue when the
// driver rejects it.
inline cudaError_t encode_tiled(CUtensorMap* map, CUtensorMapDataType type, const void* base, int rank,
                                const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
  auto encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  if (rank < 2 || rank > 5) return cudaErrorInvalidValue;
  cuuint64_t d[5], st[4];
  cuuint32_t bx[5], es[5];
  for (int i = 0; i < rank; ++i) {
    d[i] = dims[i];
    bx[i] = box[i];
    es[i] = 1;
    if (i + 1 < rank) st[i] = strides[i];
  }
  const CUresult r = encode(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), d, st, bx, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promotion,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
// encode_tiled over 16-bit elements: bf16 when `bf16`, else fp16.
inline cudaError_t encode_tiled_16bit(CUtensorMap* map, bool bf16, const void* base, int rank, const uint64_t* dims,
                                      const uint64_t* strides, const uint32_t* box,
                                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
  return encode_tiled(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base, rank,
                      dims, strides, box, swizzle, promotion);
}

}  // namespace cuda_llm_ops::tma
