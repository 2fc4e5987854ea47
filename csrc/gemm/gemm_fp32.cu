// fp32 SIMT GEMM: three-level tiling (block BM x BN x BK, warps of 4 x 8 threads,
// an 8x8 register tile per thread), cp.async copies into padded k-major shared
// tiles, a multi-stage pipeline (or its one-stage unpipelined twin).
//
// Both tiles live k-major in shared memory (As[k][m], Bs[k][n]): a thread then
// reads its 8 rows and 8 columns of one k as 2 + 2 float4 (the classic layout;
// measured 92% of cuBLAS where A came k-major, 78% with an m-major A tile read
// along k). Layouts are handled while staging, never by a copy in memory:
//   A^T stored [K, M], B stored [K, N]: rows already k-major, 16-byte cp.async;
//   A stored [M, K], B^T stored [N, K]: transposed while staging, one 4-byte
//   cp.async per element (lanes run along k, so the global reads stay coalesced).
// The +4-float pad keeps rows 16-byte aligned and spreads the transposing writes.
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {
namespace {

template <int BM_, int BN_, int BK_, int Stages>
struct SimtConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, kStages = Stages;
  static constexpr int kThreads = (BM / 8) * (BN / 8);
  static constexpr int TPN = BN / 8;       // threads along n
  static constexpr int kWarpsN = TPN / 8;  // a warp is 4 (m) x 8 (n) threads
  static_assert(TPN % 8 == 0 && (BM / 8) % 4 == 0, "warp shape 4x8 threads");
  static constexpr int A_STRIDE = BM + 4, B_STRIDE = BN + 4;  // floats
  static constexpr int A_STAGE = BK * A_STRIDE, B_STAGE = BK * B_STRIDE;
  static_assert((BK * BM) % kThreads == 0 && (BK * BN) % kThreads == 0 && (BK * BM / 4) % kThreads == 0 &&
                    (BK * BN / 4) % kThreads == 0, "copy split");
  static constexpr size_t kSmemBytes = size_t(kStages) * (A_STAGE + B_STAGE) * sizeof(float);
};

// Copies a BK x BE tile of a matrix into k-major shared rows `dst[k][e]`.
// kKMajor: the matrix is stored [K, E] (e contiguous): 16-byte copies.
// otherwise: stored [E, K] (k contiguous): transposed by 4-byte copies.
template <bool kKMajor, int BK, int BE, int Stride, int kThreads>
CLO_DEVICE void stage_tile_kmajor(float* dst, const float* src, long long ld, int e0, int k0, int E, int K, int tid) {
  if constexpr (kKMajor) {
    constexpr int kChunks = BE / 4;
#pragma unroll
    for (int p = 0; p < BK * kChunks / kThreads; ++p) {
      const int i = tid + p * kThreads;
      const int k = i / kChunks, ch = i % kChunks;
      const int gk = k0 + k, ge = e0 + ch * 4;
      const bool valid = gk < K && ge < E;  // E % 4 == 0 on this path: a chunk is all in or all out
      cp_async_16(dst + k * Stride + ch * 4, valid ? src + gk * ld + ge : src, valid);
    }
  } else {
#pragma unroll
    for (int p = 0; p < BK * BE / kThreads; ++p) {
      const int i = tid + p * kThreads;
      const int k = i % BK, e = i / BK;
      const int gk = k0 + k, ge = e0 + e;
      const bool valid = gk < K && ge < E;
      cp_async_4(dst + k * Stride + e, valid ? src + ge * ld + gk : src, valid);
    }
  }
}

// MinBlocks = 2: two 256-thread blocks per SM (<= 128 registers).
template <bool kTransA, bool kTransB, int BM, int BN, int BK_, int Stages, int MinBlocks>
__global__ void __launch_bounds__((BM / 8) * (BN / 8), MinBlocks)
gemm_simt_fp32_kernel(const GemmKernelArgs args) {
  using Cfg = SimtConfig<BM, BN, BK_, Stages>;
  constexpr int BK = Cfg::BK, kThreads = Cfg::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* smem_a = reinterpret_cast<float*>(smem_raw);
  float* smem_b = smem_a + Stages * Cfg::A_STAGE;
  const float* A = static_cast<const float*>(args.a);
  const float* B = static_cast<const float*>(args.b);
  const int M = args.M, N = args.N, K = args.K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // A warp is 4 x 8 threads: its A reads touch 4 float4 (64 bytes) and its B reads
  // 8 float4 (128 bytes): one wavefront each.
  const int tm = (warp / Cfg::kWarpsN) * 4 + (lane >> 3);
  const int tn = (warp % Cfg::kWarpsN) * 8 + (lane & 7);
  const BlockCoord blk = grouped_block(blockIdx.x, div_ceil(M, BM), div_ceil(N, BN));
  const int m0 = blk.bm * BM, n0 = blk.bn * BN;
  const int ktiles = div_ceil(K, BK);

  auto load_tile = [&](int stage, int kt) {
    stage_tile_kmajor<kTransA, BK, BM, Cfg::A_STRIDE, kThreads>(smem_a + stage * Cfg::A_STAGE, A, args.lda, m0,
                                                                kt * BK, M, K, tid);
    stage_tile_kmajor<!kTransB, BK, BN, Cfg::B_STRIDE, kThreads>(smem_b + stage * Cfg::B_STAGE, B, args.ldb, n0,
                                                                 kt * BK, N, K, tid);
  };

  // The thread's rows: two groups of 4 (BM/2 apart); columns likewise.
  auto m_of = [&](int i) { return (i / 4) * (BM / 2) + tm * 4 + (i % 4); };
  auto n_of = [&](int j) { return (j / 4) * (BN / 2) + tn * 4 + (j % 4); };

  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  auto compute_stage = [&](int stage) {
    const float* sa = smem_a + stage * Cfg::A_STAGE + tm * 4;
    const float* sb = smem_b + stage * Cfg::B_STAGE + tn * 4;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[8], b[8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 va = *reinterpret_cast<const float4*>(sa + k * Cfg::A_STRIDE + h * (BM / 2));
        a[h * 4 + 0] = va.x; a[h * 4 + 1] = va.y; a[h * 4 + 2] = va.z; a[h * 4 + 3] = va.w;
        const float4 vb = *reinterpret_cast<const float4*>(sb + k * Cfg::B_STRIDE + h * (BN / 2));
        b[h * 4 + 0] = vb.x; b[h * 4 + 1] = vb.y; b[h * 4 + 2] = vb.z; b[h * 4 + 3] = vb.w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  };

  if constexpr (Stages > 1) {
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < ktiles) load_tile(s, s);
      cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<Stages - 2>();
      __syncthreads();
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

  float* D = static_cast<float*>(args.d);
  const float* C = static_cast<const float*>(args.c);
  const bool vec4 = args.ldd % 4 == 0 && (!args.has_c || args.ldc % 4 == 0) &&
                    reinterpret_cast<uintptr_t>(D) % 16 == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + m_of(i);
    if (row >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = n0 + h * (BN / 2) + tn * 4;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = args.alpha * acc[i][h * 4 + e];
      if (vec4 && col + 3 < N) {
        if (args.has_c) {
          const float4 c = *reinterpret_cast<const float4*>(C + row * args.ldc + col);
          v[0] += args.beta * c.x; v[1] += args.beta * c.y; v[2] += args.beta * c.z; v[3] += args.beta * c.w;
        }
        *reinterpret_cast<float4*>(D + row * args.ldd + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (col + e >= N) continue;
          float x = v[e];
          if (args.has_c) x += args.beta * C[row * args.ldc + col + e];
          D[row * args.ldd + col + e] = x;
        }
      }
    }
  }
}

template <bool kTransA, bool kTransB, int BM, int BN, int BK, int Stages, int MinBlocks>
cudaError_t launch_simt(const GemmProblem& p, cudaStream_t stream) {
  using Cfg = SimtConfig<BM, BN, BK, Stages>;
  auto kernel = gemm_simt_fp32_kernel<kTransA, kTransB, BM, BN, BK, Stages, MinBlocks>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, BM) * div_ceil(p.N, BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(make_kernel_args(p));
  return cudaGetLastError();
}

// Large: 128x128x16, 256 threads, 3 stages (51 KB: two blocks per SM).
// Small: 64x64x16, 64 threads, 3 stages, for problems that give too few large tiles.
// Benchmark-only alternatives (NN): alt_a = large at one block per SM (no register cap),
// alt_b = 128x128x8 with 4 stages.
template <bool kTransA, bool kTransB>
cudaError_t launch_simt_layout(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  // Transposing B while staging keeps 8 more copy addresses live: at <= 128 registers
  // that spills, so those layouts run one block per SM (measured as fast as two).
  constexpr int kLargeMinBlocks = kTransB ? 1 : 2;
  if (variant == GemmVariant::kAuto) {
    const long long large_blocks = (long long)div_ceil(p.M, 128) * div_ceil(p.N, 128);
    variant = large_blocks >= device_sm_count() ? GemmVariant::kPipelined : GemmVariant::kSmallTile;
  }
  switch (variant) {
    case GemmVariant::kPipelined: return launch_simt<kTransA, kTransB, 128, 128, 16, 3, kLargeMinBlocks>(p, stream);
    case GemmVariant::kSmallTile: return launch_simt<kTransA, kTransB, 64, 64, 16, 3, 1>(p, stream);
    case GemmVariant::kUnpipelined:
      if constexpr (!kTransA && !kTransB) return launch_simt<false, false, 128, 128, 16, 1, 2>(p, stream);
      return cudaErrorInvalidValue;
    case GemmVariant::kAltA:
      if constexpr (!kTransA && !kTransB) return launch_simt<false, false, 128, 128, 16, 3, 1>(p, stream);
      return cudaErrorInvalidValue;
    case GemmVariant::kAltB:
      if constexpr (!kTransA && !kTransB) return launch_simt<false, false, 128, 128, 8, 4, 2>(p, stream);
      return cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_gemm_fp32(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  if (!gemm_vectorizable(p)) return cudaErrorInvalidValue;
  if (p.trans_a) {
    return p.trans_b ? launch_simt_layout<true, true>(p, variant, stream)
                     : launch_simt_layout<true, false>(p, variant, stream);
  }
  return p.trans_b ? launch_simt_layout<false, true>(p, variant, stream)
                   : launch_simt_layout<false, false>(p, variant, stream);
}

}  // namespace cuda_llm_ops::gemm
