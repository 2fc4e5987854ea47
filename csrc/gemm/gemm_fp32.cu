// fp32 SIMT GEMM: three-level tiling (block BM x BN x BK, warps of 4 x 8 threads,
// a TM x TN register tile per thread: 8 x 4, 8 x 8, 8 x 16 or 16 x 8), k-major shared tiles,
// a two-stage pipeline.
// Two kernels: v1 (below, the small 64x64x16 tile only) and v2 (the long, large and medium
// tiles; BK 16 or 32, see its comment and the tile table above launch_simt_layout).
//
// Both tiles live k-major in shared memory (As[k][m], Bs[k][n]): a thread reads its
// TM rows and TN columns of one k as TM/4 + TN/4 float4 (LDS.128, one wavefront: a warp
// touches 64 B of A and 128 B of B per k). Layouts are handled while staging, never
// by a copy in memory:
//   operand stored k-major (A^T [K, M], B [K, N]): 16-byte cp.async straight into
//     the tile;
//   operand stored k-contiguous (A [M, K], B^T [N, K]): 16-byte LDG (L2 only) into
//     registers for tile kt+1 while tile kt is computed, then transposed into the
//     tile with 4-byte STS; a warp reads whole sectors per LDG, and the tile's rows
//     are laid out (v1: XOR swizzle, v2: a gap every 8 k rows) so those STS are
//     conflict-free. Measured NN 4096^3 (H100, % of cuBLAS): 4-byte cp.async
//     transposes 69%; LDG of 32 rows x 16 B per warp 78%; 8 rows x 64 B 88%; v2 91%.
// The register prefetch plus cp.async into the other buffer is the pipeline: one
// __syncthreads per k-tile. The unpipelined twin (v2, benchmark only) loads, waits,
// then computes. The +4-float pad keeps rows 16-byte aligned.
#include <type_traits>

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
  static_assert(Stages == 2, "register-staged double buffer");
  static constexpr int A_STRIDE = BM + 4, B_STRIDE = BN + 4;  // floats
  static constexpr int A_STAGE = BK * A_STRIDE, B_STAGE = BK * B_STRIDE;
  static constexpr size_t kSmemBytes = size_t(kStages) * (A_STAGE + B_STAGE) * sizeof(float);
};

// Stages a BK x BE slice of one operand into a k-major shared tile dst[k][e].
//   kKMajor: the operand is stored [K, E] (e contiguous, E % 4 == 0 on this path).
//   else:    stored [E, K] (k contiguous, K % 4 == 0 on this path).
template <bool kKMajor, int BK, int BE, int Stride, int kThreads>
struct TileStager;

template <int BK, int BE, int Stride, int kThreads>
struct TileStager<true, BK, BE, Stride, kThreads> {
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

template <int BK, int BE, int Stride, int kThreads>
struct TileStager<false, BK, BE, Stride, kThreads> {
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
  // sector is read once: they bypass L1 (ld.global.cg; through L1 measured the same).
  CLO_DEVICE static float4 load16(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
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

// alpha * acc (+ beta * C) -> D for the thread's TM x TN outputs: rows m0 + h * BM/MG + tm * 4 + i,
// columns n0 + g * BN/NG + tn * 4 + e (16-byte stores when aligned and inside N).
template <int BM, int BN, int TM, int TN>
CLO_DEVICE void store_acc_tile(const GemmKernelArgs& args, const float (&acc)[TM][TN], int m0, int n0, int tm, int tn) {
  constexpr int MG = TM / 4, NG = TN / 4;
  const int M = args.M, N = args.N;
  float* D = static_cast<float*>(args.d);
  const float* C = static_cast<const float*>(args.c);
  const bool vec4 = args.ldd % 4 == 0 && (!args.has_c || args.ldc % 4 == 0) &&
                    reinterpret_cast<uintptr_t>(D) % 16 == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + (i / 4) * (BM / MG) + tm * 4 + (i % 4);
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


// MinBlocks = 2: two 256-thread blocks per SM (<= 128 registers).
template <bool kTransA, bool kTransB, int BM, int BN, int BK_, int TN, int Stages, int MinBlocks>
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
  TileStager<kTransA, BK, BM, Cfg::A_STRIDE, kThreads> stage_a(static_cast<const float*>(args.a), args.lda, m0, M,
                                                                K, tid);
  TileStager<!kTransB, BK, BN, Cfg::B_STRIDE, kThreads> stage_b(static_cast<const float*>(args.b), args.ldb, n0, N,
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

  {
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
  }

  store_acc_tile<BM, BN, 8, TN>(args, acc, m0, n0, tm, tn);
}

// ---- v2: BK 16 or 32, gap-padded k rows, hoisted staging addresses, split transposes ----
//
// Row k of a shared tile starts at k * Stride + G * (k / 8) floats (Stride = 4 mod 8, G =
// 128 / BK): a 16-byte gap (BK 32) or 32-byte gap (BK 16) after every 8 k rows instead of
// the XOR swizzle. The transposing STS of a warp (BK/4 lanes per row, each writing k =
// 4c + j of its row) then hits 32 distinct banks: rows k and k + 8i are 4k + G*i apart mod
// 32 (enumerated, see NOTES.md), and the compute reads stay whole float4 at a compile-time
// offset from the stage base (no per-k column select). Staging addresses are 64-bit
// pointers advanced by a constant per k-tile (no per-tile multiplies), the bounds checks are
// counters, and the transposing copy of tile kt+1 is split in two halves, each loaded and
// stored around a part of tile kt's compute (schedule in the kernel), so BK 32 holds no more
// staging registers than BK 16 did. Measured (NOTES.md, fp32 v2): NN 4096^3 87.8% -> 91.1%
// of cuBLAS, 1024^3 (medium tile, BK 32) 90.0% -> 102.6%.
template <int BK, int Stride>
struct GapRows {
  static_assert(BK == 16 || BK == 32, "gap rows: BK 16 or 32");
  static_assert(Stride % 8 == 4, "gap rows: bank mapping needs Stride = 4 (mod 8)");
  static constexpr int kGap = 128 / BK;                      // floats after every 8 k rows
  static constexpr int kStage = BK * Stride + kGap * (BK / 8);  // floats per stage (16-byte multiple)
  CLO_HOST_DEVICE static constexpr int row(int k) { return k * Stride + kGap * (k >> 3); }
};

template <bool kKMajor, int BK, int BE, int Stride, int kThreads>
struct TileStagerV2;

// Stored [K, E] (e contiguous): 16-byte cp.async straight into the tile, all of tile kt+1
// issued at the start of tile kt (part 0); nothing to do at the halves.
template <int BK, int BE, int Stride, int kThreads>
struct TileStagerV2<true, BK, BE, Stride, kThreads> {
  using Rows = GapRows<BK, Stride>;
  static constexpr int kChunksE = BE / 4;
  static constexpr int kRowsPerPass = kThreads / kChunksE;
  static constexpr int kPasses = BK * kChunksE / kThreads;
  // row() is additive over krow + p * kRowsPerPass (krow < kRowsPerPass) when a pass covers
  // whole groups of 8 k rows or a divisor of 8 (TN's 128x256 alt_b tile at BK 32: 4 rows of 256 a pass).
  static_assert(kThreads % kChunksE == 0 && kPasses >= 1 && (kRowsPerPass % 8 == 0 || 8 % kRowsPerPass == 0),
                "k-major copy split");
  const float* src;     // element (k0 + krow, e0 + ch * 4) of the current k-tile
  long long pass_step;  // kRowsPerPass rows
  long long tile_step;  // BK rows
  int k_rem;            // K - k0 - krow: pass p is inside K when k_rem > p * kRowsPerPass
  uint32_t sdst;        // shared address of (krow, ch * 4) in stage 0
  bool e_ok;

  CLO_DEVICE TileStagerV2(const float* base, long long ld, int e0, int E, int K, int tid, const float* smem) {
    const int krow = tid / kChunksE, ch = tid % kChunksE;
    e_ok = e0 + ch * 4 < E;
    src = base + krow * ld + e0 + ch * 4;
    pass_step = kRowsPerPass * ld;
    tile_step = BK * ld;
    k_rem = K - krow;
    sdst = smem_u32addr(smem + Rows::row(krow) + ch * 4);  // row() is additive here (static_assert above)
  }
  CLO_DEVICE void issue(int stage_off, int part) {
    if (part != 0) return;
    const float* g = src;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const bool valid = e_ok && k_rem > p * kRowsPerPass;
      const int src_bytes = valid ? 16 : 0;
      const uint32_t dst = sdst + 4u * (stage_off + Rows::row(p * kRowsPerPass));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(g), "r"(src_bytes));
      g += pass_step;
    }
  }
  CLO_DEVICE void finish(int, int) {}
  CLO_DEVICE void advance() {
    src += tile_step;
    k_rem -= BK;
  }
};

// Stored [E, K] (k contiguous): each lane LDGs one 16-byte k chunk of a row (a warp reads
// 32 / (BK/4) rows x 4*BK bytes: 4 rows x 128 B at BK 32), kept in registers, then written
// transposed with 4-byte STS (conflict-free through the row gaps).
template <int BK, int BE, int Stride, int kThreads>
struct TileStagerV2<false, BK, BE, Stride, kThreads> {
  using Rows = GapRows<BK, Stride>;
  static constexpr int kLanesPerRow = BK / 4;
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  static constexpr int kRows = BE / kRowsPerPass;  // passes (rows per thread)
  static constexpr int kParts = kRows >= 2 ? 2 : 1;
  static constexpr int kRowsPerPart = kRows / kParts;
  static_assert(BE % kRowsPerPass == 0 && kRows % kParts == 0 && kRowsPerPass % 32 == 0,
                "k-contiguous copy split (whole warps per pass, pass rows keep the bank)");
  const float* src;     // row e0 + row, chunk `chunk` of the current k-tile
  long long pass_step;  // kRowsPerPass rows
  int k_rem;            // K - k0 - chunk * 4 (K % 4 == 0 here: the chunk is inside K when > 0)
  unsigned row_ok;      // bit r: row + r * kRowsPerPass < E - e0
  float* sdst;          // stage 0 element (k = chunk * 4, e = row)
  float4 reg[kRowsPerPart];

  CLO_DEVICE TileStagerV2(const float* base, long long ld, int e0, int E, int K, int tid, float* smem) {
    const int row = tid / kLanesPerRow, chunk = tid % kLanesPerRow;
    row_ok = 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r) row_ok |= (e0 + row + r * kRowsPerPass < E ? 1u : 0u) << r;
    src = base + (e0 + row) * ld + chunk * 4;
    pass_step = kRowsPerPass * ld;
    k_rem = K - chunk * 4;
    sdst = smem + Rows::row(chunk * 4) + row;  // chunk * 4 + j (j < 4) stays in one group of 8
  }
  // 16-byte ld.global.cg (L2 only: each sector is read once), zeros when !valid. A volatile
  // asm so the front end cannot sink it to its STS (a plain load was moved there, exposing
  // the L2 latency); ptxas placement is handled by the loop's schedule (see the kernel).
  CLO_DEVICE static float4 load16(const float* p, bool valid) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
        " @p ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "+f"(v.x), "+f"(v.y), "+f"(v.z), "+f"(v.w)
        : "l"(p), "r"(static_cast<int>(valid)));
    return v;
  }
  CLO_DEVICE void issue(int, int part) {
    if (part >= kParts) return;
    const bool k_ok = k_rem > 0;
    const float* g = src + (part * kRowsPerPart) * pass_step;
#pragma unroll
    for (int r = 0; r < kRowsPerPart; ++r) {
      const bool valid = k_ok && ((row_ok >> (part * kRowsPerPart + r)) & 1u);
      reg[r] = load16(g, valid);
      g += pass_step;
    }
  }
  CLO_DEVICE void finish(int stage_off, int part) {
    if (part >= kParts) return;
#pragma unroll
    for (int r = 0; r < kRowsPerPart; ++r) {
      float* d = sdst + stage_off + (part * kRowsPerPart + r) * kRowsPerPass;
      d[0 * Stride] = reg[r].x;
      d[1 * Stride] = reg[r].y;
      d[2 * Stride] = reg[r].z;
      d[3 * Stride] = reg[r].w;
    }
  }
  CLO_DEVICE void advance() {
    src += BK;
    k_rem -= BK;
  }
};

template <int BM_, int BN_, int BK_, int TM_, int TN_>
struct SimtConfigV2 {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TN = TN_, TM = TM_;
  static constexpr int MG = TM / 4, NG = TN / 4;
  static constexpr int kThreads = (BM / TM) * (BN / TN);
  static constexpr int kWarpsN = (BN / TN) / 8;
  static_assert(TM == 8 ? (TN == 4 || TN == 8 || TN == 16) : (TM == 16 && TN == 8), "thread tile 8x4, 8x8, 8x16 or 16x8");
  static_assert((BN / TN) % 8 == 0 && (BM / TM) % 4 == 0, "warp shape 4x8 threads");
  static constexpr int A_STRIDE = BM + 4, B_STRIDE = BN + 4;
  using RowsA = GapRows<BK, A_STRIDE>;
  using RowsB = GapRows<BK, B_STRIDE>;
  static constexpr int A_STAGE = RowsA::kStage, B_STAGE = RowsB::kStage;
  static constexpr size_t kSmemBytes = size_t(2) * (A_STAGE + B_STAGE) * sizeof(float);
};

// kPipelined = false is the unpipelined twin (the benchmark's comparison): tile kt is
// loaded, waited for and only then computed, in one stage.
template <bool kTransA, bool kTransB, int BM, int BN, int BK, int TM, int TN, int MinBlocks, bool kPipelined>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MinBlocks)
gemm_simt_fp32_v2_kernel(const GemmKernelArgs args) {
  using Cfg = SimtConfigV2<BM, BN, BK, TM, TN>;
  constexpr int MG = Cfg::MG;
  constexpr int kThreads = Cfg::kThreads, NG = Cfg::NG;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* smem_a = reinterpret_cast<float*>(smem_raw);
  float* smem_b = smem_a + 2 * Cfg::A_STAGE;
  const int M = args.M, N = args.N, K = args.K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int tm = (warp / Cfg::kWarpsN) * 4 + (lane >> 3);
  const int tn = (warp % Cfg::kWarpsN) * 8 + (lane & 7);
  const BlockCoord blk = grouped_block(blockIdx.x, div_ceil(M, BM), div_ceil(N, BN));
  const int m0 = blk.bm * BM, n0 = blk.bn * BN;
  const int ktiles = div_ceil(K, BK);

  TileStagerV2<kTransA, BK, BM, Cfg::A_STRIDE, kThreads> stage_a(static_cast<const float*>(args.a), args.lda, m0, M, K,
                                                                tid, smem_a);
  TileStagerV2<!kTransB, BK, BN, Cfg::B_STRIDE, kThreads> stage_b(static_cast<const float*>(args.b), args.ldb, n0, N, K,
                                                                 tid, smem_b);

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  const float* frag_a = smem_a + tm * 4;
  const float* frag_b = smem_b + tn * 4;
  // k rows [K0, K0 + BK/4) of the stage at float offsets (a_off, b_off); row offsets are immediates.
  auto compute = [&](int a_off, int b_off, auto quarter) {
    constexpr int K0 = decltype(quarter)::value * (BK / 4);
#pragma unroll
    for (int k = K0; k < K0 + BK / 4; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int h = 0; h < MG; ++h) {
        const float4 va = *reinterpret_cast<const float4*>(frag_a + a_off + Cfg::RowsA::row(k) + h * (BM / MG));
        a[h * 4 + 0] = va.x; a[h * 4 + 1] = va.y; a[h * 4 + 2] = va.z; a[h * 4 + 3] = va.w;
      }
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        const float4 vb = *reinterpret_cast<const float4*>(frag_b + b_off + Cfg::RowsB::row(k) + g * (BN / NG));
        b[g * 4 + 0] = vb.x; b[g * 4 + 1] = vb.y; b[g * 4 + 2] = vb.z; b[g * 4 + 3] = vb.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  };
  // Staging of tile kt+1 around the quarters of tile kt's compute (SASS checked for each
  // layout: where the loads land, no spills). The k-major operands' cp.async copies all go
  // at quarter 0. One transposed operand (NN, TT): its first half is loaded before quarter
  // 0 and stored after quarter 1, the second loaded before quarter 2 and stored after
  // quarter 3. Both transposed (NT): the four halves take one quarter each (A0, B0, A1,
  // B1: at most 8 staging registers live), and A0 is loaded before the barrier that ends
  // tile kt-1: issued after the barrier, ptxas sank it down to its STS (L2 latency
  // exposed), and a load cannot cross a barrier. (Preloading in NN/TT too made them spill.)
  constexpr bool kTA = !kTransA, kTB = kTransB, kBoth = kTA && kTB;
  auto issue = [&](int a_off, int b_off, auto quarter) {
    constexpr int q = decltype(quarter)::value;
    if constexpr (kBoth) {
      if constexpr (q == 1) stage_b.issue(b_off, 0);
      if constexpr (q == 2) stage_a.issue(a_off, 1);
      if constexpr (q == 3) stage_b.issue(b_off, 1);
    } else if constexpr (q % 2 == 0) {
      stage_a.issue(a_off, q / 2);
      stage_b.issue(b_off, q / 2);
    }
  };
  auto finish = [&](int a_off, int b_off, auto quarter) {
    constexpr int q = decltype(quarter)::value;
    if constexpr (kBoth) {
      if constexpr (q % 2 == 0) stage_a.finish(a_off, q / 2);
      else stage_b.finish(b_off, q / 2);
    } else if constexpr (q % 2 == 1) {
      stage_a.finish(a_off, q / 2);
      stage_b.finish(b_off, q / 2);
    }
  };
  // NT: first half of the next tile's A, into registers (see above).
  auto preload = [&]() {
    if constexpr (kBoth) stage_a.issue(0, 0);
  };
  using Q0 = std::integral_constant<int, 0>;
  using Q1 = std::integral_constant<int, 1>;
  using Q2 = std::integral_constant<int, 2>;
  using Q3 = std::integral_constant<int, 3>;

  // The next k-tile into stage 0, whole (the prologue; every tile in the twin).
  auto stage_whole_tile = [&]() {
    stage_a.issue(0, 0);
    stage_b.issue(0, 0);
    cp_async_commit();
    stage_a.finish(0, 0);
    stage_b.finish(0, 0);
    stage_a.issue(0, 1);
    stage_b.issue(0, 1);
    stage_a.finish(0, 1);
    stage_b.finish(0, 1);
    stage_a.advance();
    stage_b.advance();
  };
  if constexpr (!kPipelined) {
    for (int kt = 0; kt < ktiles; ++kt) {
      stage_whole_tile();
      cp_async_wait<0>();
      __syncthreads();
      compute(0, 0, Q0{});
      compute(0, 0, Q1{});
      compute(0, 0, Q2{});
      compute(0, 0, Q3{});
      __syncthreads();
    }
    store_acc_tile<BM, BN, TM, TN>(args, acc, m0, n0, tm, tn);
    return;
  }

  // Tile 0 into stage 0 (NT: then the first half of tile 1's A).
  stage_whole_tile();
  if (ktiles > 1) preload();
  cp_async_wait<0>();
  __syncthreads();

  int a_cur = 0, b_cur = 0;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int a_nxt = Cfg::A_STAGE - a_cur, b_nxt = Cfg::B_STAGE - b_cur;
    // Tile kt+1 goes into the other stage (last read before the previous barrier) while
    // tile kt is computed. The staging sits in uniform branches on `more`: besides
    // skipping the copies past the last tile, the block boundaries limit how far the
    // scheduler moves the loads.
    const bool more = kt + 1 < ktiles;
    if (more) issue(a_nxt, b_nxt, Q0{});
    cp_async_commit();
    compute(a_cur, b_cur, Q0{});
    if (more) {
      finish(a_nxt, b_nxt, Q0{});
      issue(a_nxt, b_nxt, Q1{});
    }
    compute(a_cur, b_cur, Q1{});
    if (more) {
      finish(a_nxt, b_nxt, Q1{});
      issue(a_nxt, b_nxt, Q2{});
    }
    compute(a_cur, b_cur, Q2{});
    if (more) {
      finish(a_nxt, b_nxt, Q2{});
      issue(a_nxt, b_nxt, Q3{});
    }
    compute(a_cur, b_cur, Q3{});
    if (more) finish(a_nxt, b_nxt, Q3{});
    stage_a.advance();
    stage_b.advance();
    if (kt + 2 < ktiles) preload();
    cp_async_wait<0>();
    __syncthreads();
    a_cur = a_nxt;
    b_cur = b_nxt;
  }
  store_acc_tile<BM, BN, TM, TN>(args, acc, m0, n0, tm, tn);
}

template <bool kTransA, bool kTransB, int BM, int BN, int BK, int TM, int TN, int MinBlocks, bool kPipelined = true>
cudaError_t launch_simt_v2(const GemmProblem& p, cudaStream_t stream) {
  using Cfg = SimtConfigV2<BM, BN, BK, TM, TN>;
  auto kernel = gemm_simt_fp32_v2_kernel<kTransA, kTransB, BM, BN, BK, TM, TN, MinBlocks, kPipelined>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, BM) * div_ceil(p.N, BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(make_kernel_args(p));
  return cudaGetLastError();
}

template <bool kTransA, bool kTransB, int BM, int BN, int BK, int TN, int Stages, int MinBlocks>
cudaError_t launch_simt(const GemmProblem& p, cudaStream_t stream) {
  using Cfg = SimtConfig<BM, BN, BK, TN, Stages>;
  auto kernel = gemm_simt_fp32_kernel<kTransA, kTransB, BM, BN, BK, TN, Stages, MinBlocks>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, BM) * div_ceil(p.N, BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(make_kernel_args(p));
  return cudaGetLastError();
}

// Tiles (all 256 threads but the small one; two blocks per SM but the long one):
//   long   256 wide on the operand transposed while staging, BK 16, one block per SM: NN
//          256x128 with 16x8 per thread, TT 128x256 with 8x16 (6 LDS.128 per 128 FFMA
//          instead of 4 per 64: 92.3-92.4% FFMA in the loop against 89.4-89.7%). It has half the
//          blocks, each alone on its SM, so a part-empty last wave costs a whole tile time,
//          where the large tile's last blocks run two to an SM or alone and faster. NN and TT
//          take it on Hopper (where it was measured) where its blocks' useful work fills 15/16
//          of whole waves (H100, % of cuBLAS, large / long, run 4: NN 2048^3 (one wave) 91.2 /
//          95.4, 4096^3 90.4 / 94.9; TT 2048^3 98.2 / 100.4, 4096^3 98.6 / 100.5; NN 3072^3,
//          ~3/4 filled: 92.4 / 81.7); TN and NT stay on the large tile (4096^3, 128x256 at BK 32:
//          97.9 / 95.9 and 91.6 / 90.8; NOTES.md "fp32 v3");
//   large  128x128, 8x8 per thread, v2 kernel; BK 16 when exactly one operand is
//          transposed while staging (NN, TT), BK 32 otherwise (TN, NT): measured per layout
//          (H100, 4096^3, % of cuBLAS): NN 91.1 / 89.7, TT 94.6 / 89.5, TN 97.7 / 100.6,
//          NT 78.6 (BK 16 spills) / 89.8 (BK 16 / BK 32);
//   medium 128x64, 8x4 per thread, v2 kernel, BK 32 (1024^3 NN 102.6% vs 91.1% at BK 16):
//          twice the tiles of the large one (1024^2: 64 large tiles for 132 SMs, 128 medium);
//   small  64x64x16, 64 threads (8x8 each), v1 kernel, for fewer tiles still.
// Benchmark variants: pipelined = the large tile, alt_a = the medium tile, alt_b = the long
// tile (TN and NT: 128x256 at BK 32), unpipelined = the large tile's one-stage twin, small_tile.
enum class TileSize { kLong, kLarge, kMedium, kSmall };

inline TileSize auto_tile(const GemmProblem& p) {
  const long long sms = device_sm_count();
  const long long large_blocks = (long long)div_ceil(p.M, 128) * div_ceil(p.N, 128);
  const long long medium_blocks = (long long)div_ceil(p.M, 128) * div_ceil(p.N, 64);
  if (device_cc_major() == 9 && p.trans_a == p.trans_b) {
    const int bm = p.trans_a ? 128 : 256, bn = 384 - bm;  // the long tile: NN 256x128, TT 128x256
    const long long blocks = (long long)div_ceil(p.M, bm) * div_ceil(p.N, bn);
    const long long slots = div_ceil(blocks, sms) * sms;  // whole waves of one block per SM
    if ((long long)p.M * p.N * 16 >= slots * bm * bn * 15) return TileSize::kLong;
  }
  return large_blocks >= sms ? TileSize::kLarge : medium_blocks * 4 >= sms * 3 ? TileSize::kMedium : TileSize::kSmall;
}

template <bool kTransA, bool kTransB>
cudaError_t launch_simt_layout(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  // NN and TT transpose exactly one operand while staging (A stored [M, K] / B stored
  // [N, K]): BK 16; TN (neither) and NT (both): BK 32.
  constexpr int kLargeBK = kTransA == kTransB ? 16 : 32;
  if (variant == GemmVariant::kAuto) {
    const TileSize t = auto_tile(p);
    variant = t == TileSize::kLong     ? GemmVariant::kAltB
              : t == TileSize::kLarge  ? GemmVariant::kPipelined
              : t == TileSize::kMedium ? GemmVariant::kAltA
                                       : GemmVariant::kSmallTile;
  }
  switch (variant) {
    case GemmVariant::kPipelined: return launch_simt_v2<kTransA, kTransB, 128, 128, kLargeBK, 8, 8, 2>(p, stream);
    case GemmVariant::kAltA: return launch_simt_v2<kTransA, kTransB, 128, 64, 32, 8, 4, 2>(p, stream);
    case GemmVariant::kSmallTile: return launch_simt<kTransA, kTransB, 64, 64, 16, 8, 2, 1>(p, stream);
    case GemmVariant::kAltB:
      if constexpr (!kTransA && !kTransB) return launch_simt_v2<false, false, 256, 128, 16, 16, 8, 1>(p, stream);
      else return launch_simt_v2<kTransA, kTransB, 128, 256, kLargeBK, 8, 16, 1>(p, stream);
    case GemmVariant::kUnpipelined:
      return launch_simt_v2<kTransA, kTransB, 128, 128, kLargeBK, 8, 8, 2, false>(p, stream);
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
