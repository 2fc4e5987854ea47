// fp32 SIMT GEMM: three-level tiling (block BM x BN x BK, warps of 4 x 8 threads,
// an 8 x TN register tile per thread), k-major shared tiles, a two-stage pipeline
// (or its one-stage unpipelined twin).
//
// Both tiles live k-major in shared memory (As[k][m], Bs[k][n]): a thread reads its
// 8 rows and TN columns of one k as 2 + TN/4 float4 (LDS.128, one wavefront: a warp
// touches 64 B of A and 128 B of B per k). Layouts are handled while staging, never
// by a copy in memory:
//   operand stored k-major (A^T [K, M], B [K, N]): 16-byte cp.async straight into
//     the tile;
//   operand stored k-contiguous (A [M, K], B^T [N, K]): 16-byte LDG (L2 only) into
//     registers for tile kt+1 while tile kt is computed, then transposed into the
//     tile with 4-byte STS after the compute; a warp reads 8 rows x 64 B per LDG and
//     the k >= 8 half of the tile is XOR-swizzled so those STS are conflict-free.
//     Measured NN 4096^3 (H100, % of cuBLAS): 4-byte cp.async transposes 69%;
//     LDG of 32 rows x 16 B per warp 78%; 8 rows x 64 B 88% (TN, no transpose: 91%).
// The register prefetch plus cp.async into the other buffer is the pipeline: one
// __syncthreads per k-tile. The unpipelined twin loads, waits, then computes.
// The +4-float pad keeps rows 16-byte aligned; the access patterns above are
// conflict-free without it.
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {
namespace {

template <int BM_, int BN_, int BK_, int TN_, int Stages>
struct SimtConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TN = TN_, kStages = Stages;
  static constexpr int NG = TN / 4;                   // float4 column groups per thread
  static constexpr int kThreads = (BM / 8) * (BN / TN);
  static constexpr int TPN = BN / TN;                 // threads along n
  static constexpr int kWarpsN = TPN / 8;             // a warp is 4 (m) x 8 (n) threads
  static_assert(TN == 4 || TN == 8, "thread tile 8x8 or 8x4");
  static_assert(TPN % 8 == 0 && (BM / 8) % 4 == 0, "warp shape 4x8 threads");
  static_assert(Stages == 1 || Stages == 2, "register-staged double buffer");
  static constexpr int A_STRIDE = BM + 4, B_STRIDE = BN + 4;  // floats
  static constexpr int A_STAGE = BK * A_STRIDE, B_STAGE = BK * B_STRIDE;
  static constexpr size_t kSmemBytes = size_t(kStages) * (A_STAGE + B_STAGE) * sizeof(float);
};

// Stages a BK x BE slice of one operand into a k-major shared tile dst[k][e].
//   kKMajor: the operand is stored [K, E] (e contiguous, E % 4 == 0 on this path).
//   else:    stored [E, K] (k contiguous, K % 4 == 0 on this path).
template <bool kKMajor, int BK, int BE, int Stride, int kThreads, bool kLdgL1>
struct TileStager;

template <int BK, int BE, int Stride, int kThreads, bool kLdgL1>
struct TileStager<true, BK, BE, Stride, kThreads, kLdgL1> {
  static constexpr int kChunksE = BE / 4;  // 16-byte chunks per k row
  static constexpr int kRowsPerPass = kThreads / kChunksE;
  static constexpr int kPasses = BK * kChunksE / kThreads;
  static_assert(kThreads % kChunksE == 0 && kPasses >= 1 && BK % kRowsPerPass == 0, "k-major copy split");
  const float* src;  // element (k = krow, e = e0 + chunk * 4) of k-tile 0
  long long ld;
  int krow, soff, K;
  bool e_ok;

  CLO_DEVICE TileStager(const float* base, long long ld_, int e0, int E, int K_, int tid) : ld(ld_), K(K_) {
    krow = tid / kChunksE;
    const int ch = tid % kChunksE;
    e_ok = e0 + ch * 4 < E;
    src = base + krow * ld + e0 + ch * 4;
    soff = krow * Stride + ch * 4;
  }
  CLO_DEVICE void fetch(float* dst, int kt) {
    const int k0 = kt * BK;
    const float* g = src + k0 * ld;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const bool valid = e_ok && k0 + krow + p * kRowsPerPass < K;
      cp_async_16(dst + soff + p * kRowsPerPass * Stride, valid ? g + p * kRowsPerPass * ld : src, valid);
    }
  }
  CLO_DEVICE void store(float*) {}
};

template <int BK, int BE, int Stride, int kThreads, bool kLdgL1>
struct TileStager<false, BK, BE, Stride, kThreads, kLdgL1> {
  // A warp reads 8 rows x 64 B (BK 16) or 16 rows x 32 B (BK 8) per LDG: whole
  // sectors, 8-16 lines per instruction (32 rows x 16 B measured 78% of cuBLAS).
  static constexpr int kLanesPerRow = BK / 4;           // one 16-byte chunk each
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  static constexpr int kRows = BE / kRowsPerPass;       // rows per thread
  static_assert((BK == 8 || BK == 16) && kRowsPerPass % 16 == 0, "k-contiguous copy: one chunk per lane");
  static_assert(BE % kRowsPerPass == 0 && kRows >= 1 && (Stride - 4) % 8 == 0 && Stride % 8 == 4,
                "k-contiguous copy split / bank mapping");
  const float* src;  // row e0 + row, chunk `chunk` of k-tile 0
  long long ld;
  int row, chunk, K, sts_off;
  bool row_ok[kRows];
  float4 reg[kRows];

  CLO_DEVICE TileStager(const float* base, long long ld_, int e0, int E, int K_, int tid) : ld(ld_), K(K_) {
    row = tid / kLanesPerRow;
    chunk = tid % kLanesPerRow;
#pragma unroll
    for (int r = 0; r < kRows; ++r) row_ok[r] = e0 + row + r * kRowsPerPass < E;
    src = base + (e0 + row) * ld + chunk * 4;
    sts_off = chunk * 4 * Stride + swizzled_col(chunk * 4, row);
  }
  // Column of element e at k in the shared tile. With Stride = 4 (mod 8), k and k+8
  // rows start 16 banks apart, so chunks c and c+2 of 8 rows would collide in the
  // transposing STS; XOR 8 on the column for k >= 8 separates them. Whole float4
  // groups move, so the compute reads stay 16-byte vectors in one wavefront.
  CLO_DEVICE static int swizzled_col(int k, int e) { return e ^ (((k >> 3) & 1) << 3); }
  // 16-byte loads of the next tile into registers (zeros outside the matrix). Each
  // sector is read once, so by default they bypass L1 (ld.global.cg); kLdgL1 reads
  // through L1 (ld.global.nc), the benchmark's alt_b.
  CLO_DEVICE static float4 load16(const float* p) {
    if constexpr (kLdgL1) {
      return __ldg(reinterpret_cast<const float4*>(p));
    } else {
      return __ldcg(reinterpret_cast<const float4*>(p));
    }
  }
  CLO_DEVICE void fetch(float*, int kt) {
    const int k0 = kt * BK;
    const bool k_ok = k0 + chunk * 4 < K;  // K % 4 == 0 on this path
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const bool valid = row_ok[r] && k_ok;
      reg[r] = valid ? load16(src + r * kRowsPerPass * ld + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  // Transposed into dst[k][e]: conflict-free 4-byte STS (see swizzled_col).
  CLO_DEVICE void store(float* dst) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float* d = dst + sts_off + r * kRowsPerPass;  // kRowsPerPass % 16 == 0: the XOR commutes
      d[0 * Stride] = reg[r].x;
      d[1 * Stride] = reg[r].y;
      d[2 * Stride] = reg[r].z;
      d[3 * Stride] = reg[r].w;
    }
  }
};

// MinBlocks = 2: two 256-thread blocks per SM (<= 128 registers).
template <bool kTransA, bool kTransB, int BM, int BN, int BK_, int TN, int Stages, int MinBlocks, bool kLdgL1>
__global__ void __launch_bounds__((BM / 8) * (BN / TN), MinBlocks)
gemm_simt_fp32_kernel(const GemmKernelArgs args) {
  using Cfg = SimtConfig<BM, BN, BK_, TN, Stages>;
  constexpr int BK = Cfg::BK, kThreads = Cfg::kThreads, NG = Cfg::NG;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* smem_a = reinterpret_cast<float*>(smem_raw);
  float* smem_b = smem_a + Stages * Cfg::A_STAGE;
  const int M = args.M, N = args.N, K = args.K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int tm = (warp / Cfg::kWarpsN) * 4 + (lane >> 3);
  const int tn = (warp % Cfg::kWarpsN) * 8 + (lane & 7);
  const BlockCoord blk = grouped_block(blockIdx.x, div_ceil(M, BM), div_ceil(N, BN));
  const int m0 = blk.bm * BM, n0 = blk.bn * BN;
  const int ktiles = div_ceil(K, BK);

  // A is k-major in memory when stored [K, M] (trans_a); B when stored [K, N] (!trans_b).
  TileStager<kTransA, BK, BM, Cfg::A_STRIDE, kThreads, kLdgL1> stage_a(static_cast<const float*>(args.a), args.lda, m0, M,
                                                                K, tid);
  TileStager<!kTransB, BK, BN, Cfg::B_STRIDE, kThreads, kLdgL1> stage_b(static_cast<const float*>(args.b), args.ldb, n0, N,
                                                                 K, tid);

  float acc[8][TN];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  // Tiles staged by the transposing copy have their columns XOR 8 for k >= 8.
  constexpr bool kSwizA = !kTransA, kSwizB = kTransB;
  const int a_col0 = tm * 4, b_col0 = tn * 4;
  auto compute_stage = [&](int stage) {
    const float* sa_lo = smem_a + stage * Cfg::A_STAGE + a_col0;
    const float* sa_hi = smem_a + stage * Cfg::A_STAGE + (kSwizA ? (a_col0 ^ 8) : a_col0);
    const float* sb_lo = smem_b + stage * Cfg::B_STAGE + b_col0;
    const float* sb_hi = smem_b + stage * Cfg::B_STAGE + (kSwizB ? (b_col0 ^ 8) : b_col0);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float* sa = k < 8 ? sa_lo : sa_hi;
      const float* sb = k < 8 ? sb_lo : sb_hi;
      float a[8], b[TN];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 va = *reinterpret_cast<const float4*>(sa + k * Cfg::A_STRIDE + h * (BM / 2));
        a[h * 4 + 0] = va.x; a[h * 4 + 1] = va.y; a[h * 4 + 2] = va.z; a[h * 4 + 3] = va.w;
      }
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        const float4 vb = *reinterpret_cast<const float4*>(sb + k * Cfg::B_STRIDE + g * (BN / NG));
        b[g * 4 + 0] = vb.x; b[g * 4 + 1] = vb.y; b[g * 4 + 2] = vb.z; b[g * 4 + 3] = vb.w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  };

  if constexpr (Stages == 2) {
    stage_a.fetch(smem_a, 0);
    stage_b.fetch(smem_b, 0);
    cp_async_commit();
    stage_a.store(smem_a);
    stage_b.store(smem_b);
    cp_async_wait<0>();
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
      const int cur = kt & 1, nxt = cur ^ 1;
      const bool more = kt + 1 < ktiles;
      // Tile kt+1 is in flight (registers / cp.async into the other buffer, last read
      // before the previous barrier) while tile kt is computed.
      if (more) {
        stage_a.fetch(smem_a + nxt * Cfg::A_STAGE, kt + 1);
        stage_b.fetch(smem_b + nxt * Cfg::B_STAGE, kt + 1);
      }
      cp_async_commit();
      compute_stage(cur);
      if (more) {
        stage_a.store(smem_a + nxt * Cfg::A_STAGE);
        stage_b.store(smem_b + nxt * Cfg::B_STAGE);
      }
      cp_async_wait<0>();
      __syncthreads();
    }
  } else {
    // The unpipelined twin: the loads of tile kt start only after tile kt-1 is consumed.
    for (int kt = 0; kt < ktiles; ++kt) {
      stage_a.fetch(smem_a, kt);
      stage_b.fetch(smem_b, kt);
      cp_async_commit();
      stage_a.store(smem_a);
      stage_b.store(smem_b);
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
    const int row = m0 + (i / 4) * (BM / 2) + tm * 4 + (i % 4);
    if (row >= M) continue;
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      const int col = n0 + g * (BN / NG) + tn * 4;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = args.alpha * acc[i][g * 4 + e];
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

template <bool kTransA, bool kTransB, int BM, int BN, int BK, int TN, int Stages, int MinBlocks, bool kLdgL1 = false>
cudaError_t launch_simt(const GemmProblem& p, cudaStream_t stream) {
  using Cfg = SimtConfig<BM, BN, BK, TN, Stages>;
  auto kernel = gemm_simt_fp32_kernel<kTransA, kTransB, BM, BN, BK, TN, Stages, MinBlocks, kLdgL1>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, BM) * div_ceil(p.N, BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(make_kernel_args(p));
  return cudaGetLastError();
}

// Large:  128x128x16, 256 threads (8x8 each), 2 stages, two blocks per SM.
// Medium: 128x64x16, 256 threads (8x4 each), 2 stages: twice the tiles of the large one
//         (1024^2 gives 64 large tiles for 132 SMs, 128 medium ones).
// Small:  64x64x16, 64 threads (8x8 each), 2 stages, for fewer tiles still.
// Benchmark variants: alt_a = the medium tile (every layout), alt_b = the large tile with the
// transposing loads through L1 (NN).
template <bool kTransA, bool kTransB>
cudaError_t launch_simt_layout(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  if (variant == GemmVariant::kAuto) {
    const int sms = device_sm_count();
    const long long large_blocks = (long long)div_ceil(p.M, 128) * div_ceil(p.N, 128);
    const long long medium_blocks = (long long)div_ceil(p.M, 128) * div_ceil(p.N, 64);
    variant = large_blocks >= sms       ? GemmVariant::kPipelined
              : medium_blocks * 4 >= sms * 3 ? GemmVariant::kAltA
                                        : GemmVariant::kSmallTile;
  }
  switch (variant) {
    case GemmVariant::kPipelined: return launch_simt<kTransA, kTransB, 128, 128, 16, 8, 2, 2>(p, stream);
    case GemmVariant::kAltA: return launch_simt<kTransA, kTransB, 128, 64, 16, 4, 2, 2>(p, stream);
    case GemmVariant::kSmallTile: return launch_simt<kTransA, kTransB, 64, 64, 16, 8, 2, 1>(p, stream);
    case GemmVariant::kUnpipelined:
      if constexpr (!kTransA && !kTransB) return launch_simt<false, false, 128, 128, 16, 8, 1, 2>(p, stream);
      return cudaErrorInvalidValue;
    case GemmVariant::kAltB:
      if constexpr (!kTransA && !kTransB) return launch_simt<false, false, 128, 128, 16, 8, 2, 2, true>(p, stream);
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
