// Tensor-core GEMM for fp16/bf16 (Ampere-style, also the fastest non-wgmma path
// on Hopper): cp.async multi-stage pipeline into XOR-swizzled shared tiles,
// ldmatrix fragments (with .trans for the layouts whose contiguous dimension is
// not k), mma.sync m16n8k16 with fp32 accumulators.
//
// The four layouts differ only in how tiles are staged and read:
//   A [M,K] (k contiguous) -> smem [BM][BK], ldmatrix;   A^T stored [K,M] -> smem [BK][BM], ldmatrix.trans
//   B [K,N] (n contiguous) -> smem [BK][BN], ldmatrix.trans; B^T stored [N,K] -> smem [BN][BK], ldmatrix
// No transposed copy is ever made.
#pragma once

#include "cuda_llm_ops/mma.cuh"
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {

template <typename T, bool kTransA, bool kTransB, int BM_, int BN_, int BK_, int WarpsM, int WarpsN, int Stages>
struct MmaF16Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int kWarpsM = WarpsM, kWarpsN = WarpsN;
  static constexpr int kStages = Stages;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  static constexpr int MT = WM / 16;  // m16 tiles per warp
  static constexpr int NT = WN / 8;   // n8 tiles per warp
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16x16");
  // Shared tiles, in 16-byte chunks (8 elements) per row.
  static constexpr int A_ROWS = kTransA ? BK : BM;
  static constexpr int A_CHUNKS = (kTransA ? BM : BK) / 8;
  static constexpr int B_ROWS = kTransB ? BN : BK;
  static constexpr int B_CHUNKS = (kTransB ? BK : BN) / 8;
  static constexpr int A_STAGE = A_ROWS * A_CHUNKS * 8;  // elements
  static constexpr int B_STAGE = B_ROWS * B_CHUNKS * 8;
  static_assert((A_ROWS * A_CHUNKS) % kThreads == 0 && (B_ROWS * B_CHUNKS) % kThreads == 0,
                "every thread copies the same number of chunks");
  static constexpr size_t kSmemBytes = size_t(kStages) * (A_STAGE + B_STAGE) * sizeof(T);
};

template <typename T, bool kTransA, bool kTransB, int BM, int BN, int BK_, int WarpsM, int WarpsN, int Stages>
__global__ void __launch_bounds__(WarpsM * WarpsN * 32)
gemm_mma_f16_kernel(const GemmKernelArgs args) {
  using Cfg = MmaF16Config<T, kTransA, kTransB, BM, BN, BK_, WarpsM, WarpsN, Stages>;
  constexpr int BK = Cfg::BK, MT = Cfg::MT, NT = Cfg::NT, kThreads = Cfg::kThreads;
  constexpr int A_CHUNKS = Cfg::A_CHUNKS, B_CHUNKS = Cfg::B_CHUNKS;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem_a = reinterpret_cast<T*>(smem_raw);
  T* smem_b = smem_a + Stages * Cfg::A_STAGE;

  const T* A = static_cast<const T*>(args.a);
  const T* B = static_cast<const T*>(args.b);
  const int M = args.M, N = args.N, K = args.K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WarpsN, warp_n = warp % WarpsN;
  const BlockCoord blk = grouped_block(blockIdx.x, div_ceil(M, BM), div_ceil(N, BN));
  const int m0 = blk.bm * BM, n0 = blk.bn * BN;
  const int ktiles = div_ceil(K, BK);

  // Global -> shared, 16 bytes per cp.async; chunks past an edge are zero-filled
  // (the kernel runs only when the contiguous extents are multiples of 8, so a
  // chunk is entirely inside or entirely outside).
  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * BK;
    T* sa = smem_a + stage * Cfg::A_STAGE;
    T* sb = smem_b + stage * Cfg::B_STAGE;
#pragma unroll
    for (int p = 0; p < Cfg::A_ROWS * A_CHUNKS / kThreads; ++p) {
      const int i = tid + p * kThreads;
      const int row = i / A_CHUNKS, ch = i % A_CHUNKS;
      int gm, gk;
      if constexpr (kTransA) { gk = k0 + row; gm = m0 + ch * 8; } else { gm = m0 + row; gk = k0 + ch * 8; }
      const bool valid = gm < M && gk < K;
      const T* src = kTransA ? A + (long long)gk * args.lda + gm : A + (long long)gm * args.lda + gk;
      cp_async_16(sa + row * A_CHUNKS * 8 + swizzle_chunk<A_CHUNKS>(row, ch) * 8, valid ? src : A, valid);
    }
#pragma unroll
    for (int p = 0; p < Cfg::B_ROWS * B_CHUNKS / kThreads; ++p) {
      const int i = tid + p * kThreads;
      const int row = i / B_CHUNKS, ch = i % B_CHUNKS;
      int gn, gk;
      if constexpr (kTransB) { gn = n0 + row; gk = k0 + ch * 8; } else { gk = k0 + row; gn = n0 + ch * 8; }
      const bool valid = gn < N && gk < K;
      const T* src = kTransB ? B + (long long)gn * args.ldb + gk : B + (long long)gk * args.ldb + gn;
      cp_async_16(sb + row * B_CHUNKS * 8 + swizzle_chunk<B_CHUNKS>(row, ch) * 8, valid ? src : B, valid);
    }
  };

  // Fragments of one k16 step of the warp's tile.
  auto load_frags = [&](int stage, int kk, uint32_t (&af)[MT][4], uint32_t (&bf)[NT][2]) {
    const T* sa = smem_a + stage * Cfg::A_STAGE;
    const T* sb = smem_b + stage * Cfg::B_STAGE;
    const int kb = kk * 16;
    const int j = lane >> 3, r = lane & 7;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int wm = warp_m * Cfg::WM + mt * 16;
      if constexpr (!kTransA) {
        const int row = wm + (lane & 15), ch = kb / 8 + (lane >> 4);
        ldmatrix_x4(af[mt], sa + row * A_CHUNKS * 8 + swizzle_chunk<A_CHUNKS>(row, ch) * 8);
      } else {
        const int row = kb + r + (j >> 1) * 8, ch = wm / 8 + (j & 1);
        ldmatrix_x4_trans(af[mt], sa + row * A_CHUNKS * 8 + swizzle_chunk<A_CHUNKS>(row, ch) * 8);
      }
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      const int wn = warp_n * Cfg::WN + np * 16;
      uint32_t q[4];
      if constexpr (kTransB) {
        const int row = wn + r + (j >> 1) * 8, ch = kb / 8 + (j & 1);
        ldmatrix_x4(q, sb + row * B_CHUNKS * 8 + swizzle_chunk<B_CHUNKS>(row, ch) * 8);
      } else {
        const int row = kb + r + (j & 1) * 8, ch = wn / 8 + (j >> 1);
        ldmatrix_x4_trans(q, sb + row * B_CHUNKS * 8 + swizzle_chunk<B_CHUNKS>(row, ch) * 8);
      }
      bf[2 * np][0] = q[0];
      bf[2 * np][1] = q[1];
      bf[2 * np + 1][0] = q[2];
      bf[2 * np + 1][1] = q[3];
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;

  // Fragments double-buffered across the k16 steps of a stage: the ldmatrix of
  // step kk+1 is issued before the mma of step kk.
  auto compute_stage = [&](int stage) {
    uint32_t af[2][MT][4], bf[2][NT][2];
    load_frags(stage, 0, af[0], bf[0]);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      if (kk + 1 < BK / 16) load_frags(stage, kk + 1, af[(kk + 1) & 1], bf[(kk + 1) & 1]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(acc[mt][nt], af[kk & 1][mt], bf[kk & 1][nt]);
    }
  };

  if constexpr (Stages > 1) {
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < ktiles) load_tile(s, s);
      cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<Stages - 2>();  // tile kt has landed
      __syncthreads();               // ...for every thread; and stage (kt-1) is free again
      const int next = kt + Stages - 1;
      if (next < ktiles) load_tile(next % Stages, next);
      cp_async_commit();
      compute_stage(kt % Stages);
    }
    cp_async_wait<0>();
  } else {
    // The unpipelined twin: the copy of tile kt+1 starts only after tile kt is consumed.
    for (int kt = 0; kt < ktiles; ++kt) {
      load_tile(0, kt);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
      compute_stage(0);
      __syncthreads();
    }
  }

  // Epilogue: D = alpha * acc + beta * C, straight from the accumulator fragments.
  const int g = lane >> 2, t = lane & 3;
  auto epilogue = [&](auto out_tag) {
    using TOut = decltype(out_tag);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int row = m0 + warp_m * Cfg::WM + mt * 16 + g;
        const int col = n0 + warp_n * Cfg::WN + nt * 8 + 2 * t;
        const float* c = acc[mt][nt];
        store_pair<TOut>(args, row, col, args.alpha * c[0], args.alpha * c[1]);
        store_pair<TOut>(args, row + 8, col, args.alpha * c[2], args.alpha * c[3]);
      }
    }
  };
  if (args.out_f32) {
    epilogue(float{});
  } else {
    epilogue(T{});
  }
}

template <typename Cfg, typename Kernel>
inline cudaError_t launch_mma_kernel(Kernel kernel, const GemmProblem& p, cudaStream_t stream) {
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, Cfg::BM) * div_ceil(p.N, Cfg::BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(make_kernel_args(p));
  return cudaGetLastError();
}

// Tile configurations (the CUTLASS sm80 defaults are the model):
//  medium 128x128x64, 4 warps of 64x64, 3 stages (96 KB smem, two blocks per SM): the default
//         ("pipelined"), measured 2-4% faster than large on the H100 at 2048-4096;
//  twin   the same with one stage: the unpipelined baseline (NN only);
//  large  128x256x64, 8 warps of 64x64, 3 stages (144 KB, one block per SM) and its
//         one-stage twin: benchmark comparison (NN only);
//  small  64x64x32, 4 warps of 32x32, 4 stages, for problems that give too few medium tiles.
template <typename T, bool kTransA, bool kTransB>
using MmaF16Medium = MmaF16Config<T, kTransA, kTransB, 128, 128, 64, 2, 2, 3>;
template <typename T, bool kTransA, bool kTransB>
using MmaF16MediumUnpipelined = MmaF16Config<T, kTransA, kTransB, 128, 128, 64, 2, 2, 1>;
template <typename T, bool kTransA, bool kTransB>
using MmaF16Large = MmaF16Config<T, kTransA, kTransB, 128, 256, 64, 2, 4, 3>;
template <typename T, bool kTransA, bool kTransB>
using MmaF16LargeUnpipelined = MmaF16Config<T, kTransA, kTransB, 128, 256, 64, 2, 4, 1>;
template <typename T, bool kTransA, bool kTransB>
using MmaF16Small = MmaF16Config<T, kTransA, kTransB, 64, 64, 32, 2, 2, 4>;

template <typename T, typename Cfg, bool kTransA, bool kTransB>
inline cudaError_t launch_mma_cfg(const GemmProblem& p, cudaStream_t stream) {
  auto kernel = gemm_mma_f16_kernel<T, kTransA, kTransB, Cfg::BM, Cfg::BN, Cfg::BK, Cfg::kWarpsM, Cfg::kWarpsN,
                                    Cfg::kStages>;
  return launch_mma_kernel<Cfg>(kernel, p, stream);
}

template <typename T, bool kTransA, bool kTransB>
inline cudaError_t launch_mma_f16_layout(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  if (variant == GemmVariant::kAuto) {
    // Medium tiles once they give a wave of blocks; small tiles below that.
    const long long medium_blocks = (long long)div_ceil(p.M, 128) * div_ceil(p.N, 128);
    variant = medium_blocks >= device_sm_count() ? GemmVariant::kPipelined : GemmVariant::kSmallTile;
  }
  constexpr bool kNN = !kTransA && !kTransB;
  switch (variant) {
    case GemmVariant::kPipelined:
      return launch_mma_cfg<T, MmaF16Medium<T, kTransA, kTransB>, kTransA, kTransB>(p, stream);
    case GemmVariant::kSmallTile:
      return launch_mma_cfg<T, MmaF16Small<T, kTransA, kTransB>, kTransA, kTransB>(p, stream);
    case GemmVariant::kUnpipelined:
      if constexpr (kNN) return launch_mma_cfg<T, MmaF16MediumUnpipelined<T, false, false>, false, false>(p, stream);
      return cudaErrorInvalidValue;
    case GemmVariant::kAltA:
      if constexpr (kNN) return launch_mma_cfg<T, MmaF16Large<T, false, false>, false, false>(p, stream);
      return cudaErrorInvalidValue;
    case GemmVariant::kAltB:
      if constexpr (kNN) return launch_mma_cfg<T, MmaF16LargeUnpipelined<T, false, false>, false, false>(p, stream);
      return cudaErrorInvalidValue;
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename T>
inline cudaError_t launch_mma_f16(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  if (!gemm_vectorizable(p)) return cudaErrorInvalidValue;
  if (p.trans_a) {
    return p.trans_b ? launch_mma_f16_layout<T, true, true>(p, variant, stream)
                     : launch_mma_f16_layout<T, true, false>(p, variant, stream);
  }
  return p.trans_b ? launch_mma_f16_layout<T, false, true>(p, variant, stream)
                   : launch_mma_f16_layout<T, false, false>(p, variant, stream);
}

}  // namespace cuda_llm_ops::gemm
