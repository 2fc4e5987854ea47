// Hopper fp16/bf16 GEMM: TMA loads into 128-byte-swizzled shared tiles, wgmma
// m64nNk16 from shared-memory descriptors, fp32 accumulators in registers.
//
// Warp-specialised, one CTA per SM: warpgroup 0 is the producer (one thread issues
// the TMA copies of each k-tile into a ring of kStages stages, register budget
// lowered with setmaxnreg), warpgroups 1 and 2 are consumers (64 rows of the
// 128 x BN tile each, one m64nBNk16 wgmma per k16 step, registers raised). Per
// stage two mbarriers: `full` (1 arrival with the stage's byte count; the TMA
// completes the transactions) and `empty` (one arrival per consumer thread once
// its wgmmas reading the stage have retired). Consumers keep one wgmma group in
// flight: after issuing k-tile kt they wait for group kt-1 and release its stage.
//
// Layouts (no transposed copy, the wgmma transpose bits pick the major-ness):
//   A [M,K] (K-major):  TMA box {64 k, 128 m}              -> smem [128 m][64 k], trans-a 0
//   A^T [K,M] (M-major): 2 boxes {64 m, 64 k}              -> smem [2][64 k][64 m], trans-a 1
//   B [K,N] (N-major):  BN/64 boxes {64 n, 64 k}           -> smem [BN/64][64 k][64 n], trans-b 1
//   B^T [N,K] (K-major): box {64 k, BN n}                  -> smem [BN n][64 k], trans-b 0
// Every row is 128 bytes (64 elements) and every atom of 8 rows 1024-byte aligned:
// the 128-byte swizzle of TMA and of the wgmma descriptors coincide.
// Edges: TMA zero-fills out-of-bounds elements (K tails add zeros), the epilogue
// masks rows/columns past M, N.
#pragma once

#include "cuda_llm_ops/tma.cuh"
#include "cuda_llm_ops/wgmma.cuh"
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {

template <int BN_, int Stages_>
struct WgmmaConfig {
  static constexpr int BM = 128, BN = BN_, BK = 64, kStages = Stages_;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kAccum = BN / 2;  // fp32 accumulators per consumer thread (64 x BN per warpgroup)
  static constexpr uint32_t kABytes = BM * BK * 2, kBBytes = BN * BK * 2;
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  static constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + 1024;  // + alignment slack
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(BN == 128 || BN == 256, "wgmma tile width");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// Encodes a 2-D row-major tensor map (dim0 contiguous) with the 128-byte swizzle
// (gemm_wgmma_sm90.cu; the driver entry point is looked up once).
cudaError_t encode_tensor_map_2d(CUtensorMap* map, DType dtype, const void* base, uint64_t dim0, uint64_t dim1,
                                 uint64_t row_stride_bytes, uint32_t box0, uint32_t box1);

template <typename T, bool kTransA, bool kTransB, int BN, int Stages>
__global__ void __launch_bounds__(WgmmaConfig<BN, Stages>::kThreads, 1)
gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const GemmKernelArgs args) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = WgmmaConfig<BN, Stages>;
  constexpr int BM = Cfg::BM, BK = Cfg::BK;
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[Stages];
  __shared__ __align__(8) uint64_t empty_bar[Stages];
  // 128-byte swizzle atoms must start on 1024-byte boundaries.
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* smem_a = smem;
  unsigned char* smem_b = smem + Stages * Cfg::kABytes;

  const int M = args.M, N = args.N, K = args.K;
  const int warpgroup = threadIdx.x / 128;
  const int wg_tid = threadIdx.x % 128;
  const BlockCoord blk = grouped_block(blockIdx.x, div_ceil(M, BM), div_ceil(N, BN));
  const int m0 = blk.bm * BM, n0 = blk.bn * BN;
  const int ktiles = div_ceil(K, BK);

  if (threadIdx.x == 0) {
    tma::prefetch_tensor_map(&map_a);
    tma::prefetch_tensor_map(&map_b);
#pragma unroll
    for (int s = 0; s < Stages; ++s) {
      tma::mbarrier_init(&full_bar[s], 1);
      tma::mbarrier_init(&empty_bar[s], Cfg::kConsumers * 128);
    }
    tma::mbarrier_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    wgmma::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (wg_tid == 0) {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % Stages;
        // Stage s last held k-tile kt - Stages: wait for its release (phase (kt/Stages - 1) of empty).
        if (kt >= Stages) tma::mbarrier_wait(&empty_bar[s], ((kt / Stages) - 1) & 1);
        // 64-wide m/n chunks entirely past M / N are not loaded (their stale smem only
        // feeds output rows / columns the epilogue masks); the byte count follows.
        const int a_chunks = kTransA ? min(BM / 64, div_ceil(M - m0, 64)) : BM / 64;
        const int b_chunks = kTransB ? BN / 64 : min(BN / 64, div_ceil(N - n0, 64));
        tma::mbarrier_arrive_expect_tx(&full_bar[s], (a_chunks + b_chunks) * 8192u);
        const int k0 = kt * BK;
        unsigned char* sa = smem_a + s * Cfg::kABytes;
        unsigned char* sb = smem_b + s * Cfg::kBBytes;
        if constexpr (!kTransA) {
          tma::load_2d(sa, &map_a, k0, m0, &full_bar[s]);
        } else {
          for (int c = 0; c < a_chunks; ++c) tma::load_2d(sa + c * 8192, &map_a, m0 + 64 * c, k0, &full_bar[s]);
        }
        if constexpr (kTransB) {
          tma::load_2d(sb, &map_b, k0, n0, &full_bar[s]);
        } else {
          for (int c = 0; c < b_chunks; ++c) tma::load_2d(sb + c * 8192, &map_b, n0 + 64 * c, k0, &full_bar[s]);
        }
      }
    }
  } else {
    wgmma::setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int cw = warpgroup - 1;  // rows cw*64 .. cw*64+63 of the tile
    float acc[Cfg::kAccum];
#pragma unroll
    for (int i = 0; i < Cfg::kAccum; ++i) acc[i] = 0.f;

    const uint32_t a_base = smem_u32addr(smem_a) + cw * 8192;  // 64 rows x 128 B, or m-chunk cw (64 k x 128 B)
    const uint32_t b_base = smem_u32addr(smem_b);
    for (int kt = 0; kt < ktiles; ++kt) {
      const int s = kt % Stages;
      tma::mbarrier_wait(&full_bar[s], (kt / Stages) & 1);
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const uint32_t a_addr = a_base + s * Cfg::kABytes + (kTransA ? kk * 2048 : kk * 32);
        const uint32_t b_addr = b_base + s * Cfg::kBBytes + (kTransB ? kk * 32 : kk * 2048);
        const uint64_t da = wgmma::make_desc_sw128(a_addr, kTransA ? 8192 : 16, 1024);
        const uint64_t db = wgmma::make_desc_sw128(b_addr, kTransB ? 16 : 8192, 1024);
        if constexpr (BN == 256) {
          wgmma::wgmma_m64n256k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
        } else {
          wgmma::wgmma_m64n128k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
        }
      }
      wgmma::commit_group();
      if (kt > 0) {
        wgmma::wait_group<1>();  // the group of k-tile kt-1 has retired: its stage is free
        tma::mbarrier_arrive(&empty_bar[(kt - 1) % Stages]);
      }
    }
    wgmma::wait_group<0>();

    // Epilogue straight from the accumulators (masked pair stores, alpha/beta/c).
    const int warp = wg_tid / 32, lane = wg_tid % 32;
    const int row0 = m0 + cw * 64 + warp * 16 + lane / 4;
    const int col0 = n0 + 2 * (lane % 4);
    auto epilogue = [&](auto out_tag) {
      using TOut = decltype(out_tag);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        store_pair<TOut>(args, row0, col0 + 8 * j, args.alpha * acc[4 * j], args.alpha * acc[4 * j + 1]);
        store_pair<TOut>(args, row0 + 8, col0 + 8 * j, args.alpha * acc[4 * j + 2], args.alpha * acc[4 * j + 3]);
      }
    };
    if (args.out_f32) {
      epilogue(float{});
    } else {
      epilogue(T{});
    }
  }
#endif
}

template <typename T, bool kTransA, bool kTransB, int BN, int Stages>
inline cudaError_t launch_wgmma_cfg(const GemmProblem& p, cudaStream_t stream) {
  using Cfg = WgmmaConfig<BN, Stages>;
  CUtensorMap map_a, map_b;
  // Tensor maps over the stored matrices: dim0 is the contiguous one.
  cudaError_t err = kTransA
      ? encode_tensor_map_2d(&map_a, p.in_dtype, p.a, p.M, p.K, p.lda * 2, 64, 64)
      : encode_tensor_map_2d(&map_a, p.in_dtype, p.a, p.K, p.M, p.lda * 2, 64, Cfg::BM);
  if (err != cudaSuccess) return err;
  err = kTransB ? encode_tensor_map_2d(&map_b, p.in_dtype, p.b, p.K, p.N, p.ldb * 2, 64, Cfg::BN)
                : encode_tensor_map_2d(&map_b, p.in_dtype, p.b, p.N, p.K, p.ldb * 2, 64, 64);
  if (err != cudaSuccess) return err;
  auto kernel = gemm_wgmma_sm90_kernel<T, kTransA, kTransB, BN, Stages>;
  err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, Cfg::BM) * div_ceil(p.N, Cfg::BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(map_a, map_b,
                                                                                    make_kernel_args(p));
  return cudaGetLastError();
}

// Tiles: "wgmma" 128x256x64 x 4 stages (192 KB), "wgmma_n128" 128x128x64 x 6 stages
// (192 KB) for problems with less than a wave of wide tiles.
template <typename T, bool kTransA, bool kTransB>
inline cudaError_t launch_wgmma_layout(const GemmProblem& p, int bn, cudaStream_t stream) {
  return bn == 256 ? launch_wgmma_cfg<T, kTransA, kTransB, 256, 4>(p, stream)
                   : launch_wgmma_cfg<T, kTransA, kTransB, 128, 6>(p, stream);
}

template <typename T>
inline cudaError_t launch_wgmma_typed(const GemmProblem& p, int bn, cudaStream_t stream) {
  if (p.trans_a) {
    return p.trans_b ? launch_wgmma_layout<T, true, true>(p, bn, stream)
                     : launch_wgmma_layout<T, true, false>(p, bn, stream);
  }
  return p.trans_b ? launch_wgmma_layout<T, false, true>(p, bn, stream)
                   : launch_wgmma_layout<T, false, false>(p, bn, stream);
}

// Per-dtype instantiations (gemm_wgmma_sm90_f16.cu / _bf16.cu).
cudaError_t launch_gemm_wgmma_f16(const GemmProblem& p, int bn, cudaStream_t stream);
cudaError_t launch_gemm_wgmma_bf16(const GemmProblem& p, int bn, cudaStream_t stream);

}  // namespace cuda_llm_ops::gemm
