// Skinny GEMM for decode shapes (M <= 16 rows of activations):
//   D[M, N] = alpha * A[M, K] @ op(B) + beta * C,  B stored [N, K] (trans_b, nn.Linear's
//   weight) or [K, N].
// Such a product is bound by reading B once: 100 MB of fp16 weights at 4096x12288 against
// 1.6 GFLOP at M = 16. The tile kernels spend most of their time on tiles of A that are
// mostly padding and on too few blocks (a 64-wide tile gives N/64 blocks); these kernels
// instead give every warp a strip of B, stream it with 16-byte loads that bypass L1 (A,
// reused by every warp, stays there), split K across the warps of a block (partials summed
// in shared memory) and, where the strips give too few blocks, across blocks (fp32 partials,
// int32 for int8, in a workspace the binding allocates, summed by gemm_skinny_reduce_kernel).
//
// Five kernels, by element type and B's layout:
//   16-bit, B [N, K]: mma.sync m16n8k16 with B as the 16-row operand and A^T as the
//     8-column one (M <= 8: one n8 tile, M <= 16: two). A lane's 16-byte load of a B row
//     holds 8 consecutive k; the lane feeds them to two k16 mmas in a fixed order, and
//     reads A's row with the same order, so the dot products are unchanged (the sum over
//     k does not care which k sits in which mma slot).
//   16-bit, B [K, N]: mma.sync with A as the 16-row operand (rows >= M zero). A lane loads
//     8 consecutive columns of 4 k rows and pairs the k rows with byte permutes, so mma j
//     of 8 covers columns 8s + j of its slot s; the lane then owns 16 consecutive output
//     columns.
//   Both 16-bit mappings also come fed from a per-warp cp.async ring in shared memory (the
//     default for B [N, K] and for B [K, N] with A of <= 8 rows): copies stay in flight while
//     the warp computes, instead of each batch of loads being waited on before its mmas.
//   fp32 (CUDA cores, no TF32, as the fp32 GEMM): B [N, K] lanes stride k in float4, a warp
//     holds 8 or 4 rows of B, then reduces across lanes; B [K, N] lanes own four columns (a
//     16-byte load per k row) and read A from a per-warp transposed copy in shared memory.
//   int8 -> int32, B [K, N]: mma.sync m16n8k32 with A as the 16-row operand. A lane loads 16
//     consecutive columns of 8 k rows and transposes 4x4 bytes at a time (prmt), so mma j of
//     16 covers columns 16g + j; exact int32 sums (split partials too). Register batches only: a
//     cp.async-ring twin measured 7-40% slower (NOTES.md "Stop 124"). B [N, K] at M <= 16 runs
//     on the Hopper family's skinny tile or mma.sync (gemm_int8.cu), not here.
// Figures, the sweep behind the defaults and what was tried: NOTES.md "Skinny".
#include <algorithm>
#include <cstdlib>

#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {
namespace {

constexpr int kSkinnyWarps = 8;
constexpr int kSkinnyThreads = 32 * kSkinnyWarps;
constexpr int kSkinnyMaxSplits = 16;

// How the K of one output strip is shared: `k_splits` blocks (blockIdx.y) take contiguous
// ranges of it and, inside a block, `k_warps` warps every k_warps-th unit of the range.
// With k_splits > 1 the blocks write partial sums (fp32; int32 for int8) to `partial`
// ([k_splits][M][N]) and gemm_skinny_reduce_kernel adds them up.
struct SkinnySplit {
  int k_warps;
  int k_splits;
  void* partial;
};
struct KSlice {
  int first, last, stride;
};
CLO_DEVICE KSlice k_slice(int units, int kw, SkinnySplit split) {
  const int per = div_ceil(units, split.k_splits);
  const int begin = min(static_cast<int>(blockIdx.y) * per, units);
  return {begin + kw, min(begin + per, units), split.k_warps};
}

// A warp's place in its block: lane (g = lane / 4, t = lane % 4 index the mma fragments),
// strip (8 / k_warps strips of `strip_cols` output columns) and k-warp, and the block's
// columns (cols of them from n0).
struct SkinnyWarp {
  int warp, lane, g, t, strip, kw, cols, n0;
};
CLO_DEVICE SkinnyWarp skinny_warp(SkinnySplit split, int strip_cols) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, cols = strip_cols * (kSkinnyWarps / split.k_warps);
  return {warp, lane, lane / 4, lane % 4, warp / split.k_warps, warp % split.k_warps, cols,
          static_cast<int>(blockIdx.x) * cols};
}

// D's value from a sum: int32 sums (int8) are exact and take no alpha (nor C: the int8
// launchers refuse it), float ones are scaled by alpha.
template <typename TOut, typename TAcc>
CLO_DEVICE void store_sum(const GemmKernelArgs& args, int row, int col, TAcc s) {
  if constexpr (std::is_same_v<TAcc, int32_t>) {
    store_one<TOut>(args, row, col, s);
  } else {
    store_one<TOut>(args, row, col, args.alpha * s);
  }
}

// Padded partials (kPadded): a row of `cols` sums takes one more word every 32 columns and
// its stride is 4 modulo 32 words, so lanes (g, t) storing columns 32t + j of rows g (the
// int8 kernel's fragment order) hit 32 distinct banks.
CLO_DEVICE constexpr int padded_part_stride(int cols) { return cols + cols / 32 + (36 - (cols / 32) % 32) % 32; }

// part: [k_warps][kRows][cols] (row stride padded_part_stride(cols) with kPadded), the partial
// sums of the block's warps. Every thread sums over the k-warps; consecutive threads take
// consecutive columns (coalesced stores).
template <typename TOut, int kRows, typename TAcc = float, bool kPadded = false>
CLO_DEVICE void skinny_epilogue(const GemmKernelArgs& args, const TAcc* part, SkinnySplit split, int cols, int n0) {
  const int stride = kPadded ? padded_part_stride(cols) : cols;
  for (int idx = threadIdx.x; idx < kRows * cols; idx += kSkinnyThreads) {
    const int m = idx / cols, ln = idx - m * cols;
    if (m >= args.M || n0 + ln >= args.N) continue;
    TAcc s = 0;
    for (int w = 0; w < split.k_warps; ++w) s += part[(w * kRows + m) * stride + ln + (kPadded ? ln / 32 : 0)];
    if (split.k_splits == 1) {
      store_sum<TOut>(args, m, n0 + ln, s);
    } else {
      static_cast<TAcc*>(split.partial)[(static_cast<long long>(blockIdx.y) * args.M + m) * args.N + n0 + ln] = s;
    }
  }
}

// Sums the k-splits' partials and applies alpha, beta and C.
template <typename TOut, typename TAcc = float>
__global__ void __launch_bounds__(kSkinnyThreads) gemm_skinny_reduce_kernel(const GemmKernelArgs args,
                                                                            const void* partial_raw, int k_splits) {
  pdl_wait_primary();
  const TAcc* partial = static_cast<const TAcc*>(partial_raw);
  const long long mn = static_cast<long long>(args.M) * args.N;
  for (long long i = blockIdx.x * static_cast<long long>(kSkinnyThreads) + threadIdx.x; i < mn;
       i += static_cast<long long>(gridDim.x) * kSkinnyThreads) {
    TAcc s = 0;
    for (int y = 0; y < k_splits; ++y) s += partial[y * mn + i];
    store_sum<TOut>(args, static_cast<int>(i / args.N), static_cast<int>(i % args.N), s);
  }
}

// ---- the two 16-bit mappings, shared by the register-batch and cp.async-ring kernels ------
// B [N, K]: nk_mma_window (mma.cuh), B's rows as the 16-row operand.

// The lane's rows of A: 8i + g for B [N, K] (the n8 operand, i < kMTiles), g and g + 8 for
// B [K, N] (the m16 operand, the second only with kM16); loads past M or K read zeros.
template <typename T, int kMTiles>
struct NkARows {
  const T* row[kMTiles];
  bool ok[kMTiles];
  CLO_DEVICE NkARows(const GemmKernelArgs& args, int g) {
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      ok[i] = 8 * i + g < args.M;
      row[i] = static_cast<const T*>(args.a) + (8 * i + g) * args.lda;
    }
  }
  CLO_DEVICE uint4 load(int i, int k, bool k_ok) const {  // A's 8 k from k
    return ok[i] && k_ok ? __ldg(reinterpret_cast<const uint4*>(row[i] + k)) : make_uint4(0, 0, 0, 0);
  }
};
template <typename T, bool kM16>
struct KnARows {
  const T* row[2];
  bool ok[2];
  CLO_DEVICE KnARows(const GemmKernelArgs& args, int g)
      : row{static_cast<const T*>(args.a) + g * args.lda, static_cast<const T*>(args.a) + (g + 8) * args.lda},
        ok{g < args.M, kM16 && g + 8 < args.M} {}
  CLO_DEVICE uint32_t load(int h, int k, bool k_ok) const {  // A's 4 bytes from k of row g + 8h (2 k, or int8's 4)
    return ok[h] && k_ok ? __ldg(reinterpret_cast<const uint32_t*>(row[h] + k)) : 0u;
  }
};
// acc[i]: c0, c1 = (B row g, A rows 8i + 2t, +1), c2, c3 = B row g + 8; c = the strip's column of row g.
template <int kMTiles>
CLO_DEVICE void nk_store_partials(float* p, const float (&acc)[kMTiles][4], int cols, int c, int t) {
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
    const int m = 8 * i + 2 * t;
    p[m * cols + c] = acc[i][0];
    p[(m + 1) * cols + c] = acc[i][1];
    p[m * cols + c + 8] = acc[i][2];
    p[(m + 1) * cols + c + 8] = acc[i][3];
  }
}
// B [K, N]: one k16 step from the lane's 8 columns of k rows kb, kb + 1, kb + 8, kb + 9 (bv[0..3]);
// mma j pairs column 8g + j of the rows low k first.
template <typename T>
CLO_DEVICE void kn_mma_step(float (&acc)[8][4], const uint32_t (&a)[4], const uint4 (&bv)[4]) {
  const uint32_t lo[4] = {bv[0].x, bv[0].y, bv[0].z, bv[0].w};
  const uint32_t hi[4] = {bv[1].x, bv[1].y, bv[1].z, bv[1].w};
  const uint32_t lo8[4] = {bv[2].x, bv[2].y, bv[2].z, bv[2].w};
  const uint32_t hi8[4] = {bv[3].x, bv[3].y, bv[3].z, bv[3].w};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
    const uint32_t b[2] = {__byte_perm(lo[j / 2], hi[j / 2], sel), __byte_perm(lo8[j / 2], hi8[j / 2], sel)};
    mma_m16n8k16<T>(acc[j], a, b);
  }
}
// acc[j]: c0 = (row g, column c + j), c1 = (row g, column c + 8 + j), c2/c3 row g + 8.
template <bool kM16>
CLO_DEVICE void kn_store_partials(float* p, const float (&acc)[8][4], int cols, int c, int g) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    p[g * cols + c + j] = acc[j][0];
    p[g * cols + c + 8 + j] = acc[j][1];
    if constexpr (kM16) {
      p[(g + 8) * cols + c + j] = acc[j][2];
      p[(g + 8) * cols + c + 8 + j] = acc[j][3];
    }
  }
}

// ---- 16-bit, B [N, K] --------------------------------------------------------------------
// Warp: 16 rows of B x its k-warp's 32-k windows of the block's K range.
// Block: (8 / k_warps) row warps x k_warps -> 16 * 8 / k_warps output columns.
template <typename T, typename TOut, int kMTiles>
__global__ void __launch_bounds__(kSkinnyThreads) gemm_skinny_nk_mma_kernel(const GemmKernelArgs args, SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kRows = 8 * kMTiles, kUnroll = 4;
  __shared__ float part[kSkinnyWarps * 16 * kRows];
  const auto [warp, lane, g, t, rw, kw, cols, n0] = skinny_warp(split, 16);
  const int nrow = n0 + 16 * rw + g;
  const bool row_ok[2] = {nrow < args.N, nrow + 8 < args.N};
  const T* b_rows[2] = {static_cast<const T*>(args.b) + nrow * args.ldb,
                        static_cast<const T*>(args.b) + (nrow + 8) * args.ldb};
  const NkARows<T, kMTiles> ar(args, g);
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, 32), kw, split);  // 32-k windows
  float acc[kMTiles][4] = {};
  for (int w0 = ks.first; w0 < ks.last; w0 += ks.stride * kUnroll) {
    uint4 bv[kUnroll][2], av[kUnroll][kMTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int win = w0 + u * ks.stride, k = win * 32 + 8 * t;
      const bool k_ok = win < ks.last && k < K;  // K % 8 == 0: a lane's 8 k are all inside or all outside
#pragma unroll
      for (int r = 0; r < 2; ++r) bv[u][r] = k_ok && row_ok[r] ? load_streaming_16(b_rows[r] + k) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        av[u][i] = ar.load(i, k, k_ok);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) nk_mma_window<T, kMTiles>(acc, bv[u][0], bv[u][1], av[u]);
  }
  nk_store_partials<kMTiles>(part + kw * kRows * cols, acc, cols, 16 * rw + g, t);
  __syncthreads();
  skinny_epilogue<TOut, kRows>(args, part, split, cols, n0);
}

// ---- 16-bit, B [N, K], pipelined ---------------------------------------------------------
// The same mma mapping, but B reaches the registers through a per-warp ring of cp.async
// stages in shared memory (16 rows x 128 k = 4 KB a stage, kPipeStages deep), so a warp keeps
// copies in flight while it computes instead of waiting on each batch of loads; A's fragments
// are loaded one stage ahead into registers. A warp's stages are 128-k units interleaved
// over the strip's k-warps. Odd rows swap 16-byte chunk halves (chunk ^ 4) so the 8 lanes of
// a quarter-warp (rows 2q, 2q + 1, chunks 4w..4w+3) read 8 distinct bank groups.
// Three stages measured best (4 and 6: 5-40% slower, shared memory then limits the blocks per SM).
constexpr int kPipeStages = 3, kPipeStageK = 128;
constexpr int kPipeStageBytes = 16 * kPipeStageK * 2;  // per warp; the B [K, N] kernel's stage is 32 k x 64 columns
constexpr int kPipeSmemBytes = kSkinnyWarps * kPipeStages * kPipeStageBytes;

template <typename T, typename TOut, int kMTiles>
__global__ void __launch_bounds__(kSkinnyThreads) gemm_skinny_nk_mma_pipe_kernel(const GemmKernelArgs args,
                                                                               SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kRows = 8 * kMTiles;
  __shared__ float part[kSkinnyWarps * 16 * kRows];
  extern __shared__ __align__(128) unsigned char skinny_ring[];
  const auto [warp, lane, g, t, rw, kw, cols, n0] = skinny_warp(split, 16);
  const int strip = n0 + 16 * rw;
  const T* B = static_cast<const T*>(args.b);
  unsigned char* ring = skinny_ring + warp * kPipeStages * kPipeStageBytes;
  const NkARows<T, kMTiles> ar(args, g);
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, kPipeStageK), kw, split);
  const int n_stages = ks.first < ks.last ? div_ceil(ks.last - ks.first, ks.stride) : 0;
  auto issue = [&](int i) {  // stage i of this warp into its slot (zeros past the range)
    const int k0 = (ks.first + i * ks.stride) * kPipeStageK;
    unsigned char* slot = ring + (i % kPipeStages) * kPipeStageBytes;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int r = 2 * j + (lane >> 4), c = lane & 15, k = k0 + 8 * c;
      const bool ok = i < n_stages && strip + r < args.N && k < K;
      const T* src = ok ? B + (strip + r) * args.ldb + k : B;
      cp_async_16(slot + r * 256 + ((c ^ ((r & 1) << 2)) << 4), src, ok);
    }
    cp_async_commit();
  };
  auto load_a = [&](int i, uint4 (&av)[4][kMTiles]) {  // A's 8 k at each of the stage's 4 windows
    const int k0 = (ks.first + i * ks.stride) * kPipeStageK;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int k = k0 + 32 * w + 8 * t;
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) {
        av[w][m] = ar.load(m, k, i < n_stages && k < K);
      }
    }
  };
#pragma unroll
  for (int i = 0; i < kPipeStages - 1; ++i) issue(i);
  uint4 av[4][kMTiles];
  load_a(0, av);
  float acc[kMTiles][4] = {};
  for (int i = 0; i < n_stages; ++i) {
    cp_async_wait<kPipeStages - 2>();
    __syncwarp();
    issue(i + kPipeStages - 1);  // into the slot computed from in iteration i - 1
    uint4 an[4][kMTiles];
    load_a(i + 1, an);
    const unsigned char* slot = ring + (i % kPipeStages) * kPipeStageBytes;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int chunk = (4 * w + t) ^ ((g & 1) << 2);  // rows g and g + 8 share the parity
      const uint4 b0 = *reinterpret_cast<const uint4*>(slot + g * 256 + (chunk << 4));
      const uint4 b1 = *reinterpret_cast<const uint4*>(slot + (g + 8) * 256 + (chunk << 4));
      nk_mma_window<T, kMTiles>(acc, b0, b1, av[w]);
    }
#pragma unroll
    for (int w = 0; w < 4; ++w)
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) av[w][m] = an[w][m];
    __syncwarp();
  }
  cp_async_wait<0>();
  nk_store_partials<kMTiles>(part + kw * kRows * cols, acc, cols, 16 * rw + g, t);
  __syncthreads();
  skinny_epilogue<TOut, kRows>(args, part, split, cols, n0);
}

// One k step of the B [K, N] mma.sync kernels, 8 kPer deep (16-bit: k16, kPer = 2; int8: k32,
// kPer = 4), kb = the step's first k + kPer t: the lane's 16 bytes of B rows kb + i and kb +
// 4 kPer + i (i < kPer), and A's fragment (rows g and g + 8 at kb and kb + 4 kPer). A step past
// the range (>= last) reads k >= K: zeros. K is a multiple of 2 kPer, so a lane's kPer rows are
// all in or all out.
template <int kPer, typename T, bool kM16>
CLO_DEVICE void kn_step_loads(int step, int last, int t, int K, long long ldb, const T* b_col, bool col_ok,
                              const KnARows<T, kM16>& ar, uint4 (&bv)[2 * kPer], uint32_t (&av)[4]) {
  constexpr int kHalf = 4 * kPer, kStepK = 2 * kHalf;
  const int kb = (step < last ? step : div_ceil(K, kStepK)) * kStepK + kPer * t;
#pragma unroll
  for (int r = 0; r < 2 * kPer; ++r) {
    const int k = kb + r % kPer + kHalf * (r / kPer);
    bv[r] = col_ok && k < K ? load_streaming_16(b_col + static_cast<long long>(k) * ldb) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int k = kb + kHalf * (r >> 1);
    av[r] = ar.load(r & 1, k, k < K);
  }
}

// ---- 16-bit, B [K, N] --------------------------------------------------------------------
// Warp: 64 columns x its k-warp's k16 steps of the block's K range.
// Block: (8 / k_warps) column warps x k_warps -> 64 * 8 / k_warps output columns.
template <typename T, typename TOut, bool kM16>
__global__ void __launch_bounds__(kSkinnyThreads) gemm_skinny_kn_mma_kernel(const GemmKernelArgs args, SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kRows = kM16 ? 16 : 8, kUnroll = 4;
  __shared__ float part[kSkinnyWarps * 64 * kRows];
  const auto [warp, lane, g, t, cw, kw, cols, n0] = skinny_warp(split, 64);
  const int ncol = n0 + 64 * cw + 8 * g;
  const bool col_ok = ncol < args.N;  // N % 8 == 0: the lane's 8 columns are all in or all out
  const T* b_col = static_cast<const T*>(args.b) + ncol;
  const KnARows<T, kM16> ar(args, g);
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, 16), kw, split);  // k16 steps
  float acc[8][4] = {};
  for (int s0 = ks.first; s0 < ks.last; s0 += ks.stride * kUnroll) {
    uint4 bv[kUnroll][4];
    uint32_t av[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // B rows kb, kb + 1, kb + 8, kb + 9; A's k pairs at kb, kb + 8
      kn_step_loads<2>(s0 + u * ks.stride, ks.last, t, K, args.ldb, b_col, col_ok, ar, bv[u], av[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) kn_mma_step<T>(acc, av[u], bv[u]);
  }
  kn_store_partials<kM16>(part + kw * kRows * cols, acc, cols, 64 * cw + 16 * t, g);
  __syncthreads();
  skinny_epilogue<TOut, kRows>(args, part, split, cols, n0);
}

// ---- 16-bit, B [K, N], pipelined ---------------------------------------------------------
// The B [K, N] mapping fed from a per-warp cp.async ring: a stage is two k16 steps (32 rows
// of 128 bytes = 4 KB); a warp's stages are interleaved over the strip's k-warps. Chunk c of
// row r sits at c ^ (r & 6): the quarter-warp's reads (rows 2t + {0, 1, 8, 9}, t = 0..3, at
// chunks 2q, 2q + 1) then hit 8 distinct bank groups.
template <typename T, typename TOut, bool kM16>
__global__ void __launch_bounds__(kSkinnyThreads) gemm_skinny_kn_mma_pipe_kernel(const GemmKernelArgs args,
                                                                               SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kRows = kM16 ? 16 : 8, kStageSteps = 2;
  __shared__ float part[kSkinnyWarps * 64 * kRows];
  extern __shared__ __align__(128) unsigned char skinny_ring[];
  const auto [warp, lane, g, t, cw, kw, cols, n0] = skinny_warp(split, 64);
  const int strip = n0 + 64 * cw;
  const T* B = static_cast<const T*>(args.b);
  unsigned char* ring = skinny_ring + warp * kPipeStages * kPipeStageBytes;
  const KnARows<T, kM16> ar(args, g);
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, 16 * kStageSteps), kw, split);
  const int n_stages = ks.first < ks.last ? div_ceil(ks.last - ks.first, ks.stride) : 0;
  auto issue = [&](int i) {
    const int k0 = (ks.first + i * ks.stride) * 16 * kStageSteps;
    unsigned char* slot = ring + (i % kPipeStages) * kPipeStageBytes;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int r = 4 * j + lane / 8, c = lane % 8, k = k0 + r;
      const bool ok = i < n_stages && k < K && strip + 8 * c < args.N;
      const T* src = ok ? B + static_cast<long long>(k) * args.ldb + strip + 8 * c : B;
      cp_async_16(slot + r * 128 + ((c ^ (r & 6)) << 4), src, ok);
    }
    cp_async_commit();
  };
  auto load_a = [&](int i, uint32_t (&av)[kStageSteps][4]) {
    const int k0 = (ks.first + i * ks.stride) * 16 * kStageSteps;
#pragma unroll
    for (int st = 0; st < kStageSteps; ++st)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int k = k0 + 16 * st + 2 * t + 8 * (r >> 1);
        av[st][r] = ar.load(r & 1, k, i < n_stages && k < K);
      }
  };
#pragma unroll
  for (int i = 0; i < kPipeStages - 1; ++i) issue(i);
  uint32_t av[kStageSteps][4];
  load_a(0, av);
  float acc[8][4] = {};
  for (int i = 0; i < n_stages; ++i) {
    cp_async_wait<kPipeStages - 2>();
    __syncwarp();
    issue(i + kPipeStages - 1);
    uint32_t an[kStageSteps][4];
    load_a(i + 1, an);
    const unsigned char* slot = ring + (i % kPipeStages) * kPipeStageBytes;
#pragma unroll
    for (int st = 0; st < kStageSteps; ++st) {
      uint4 bv[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = 16 * st + 2 * t + (r & 1) + 8 * (r >> 1);
        bv[r] = *reinterpret_cast<const uint4*>(slot + row * 128 + ((g ^ (row & 6)) << 4));
      }
      kn_mma_step<T>(acc, av[st], bv);
    }
#pragma unroll
    for (int st = 0; st < kStageSteps; ++st)
#pragma unroll
      for (int r = 0; r < 4; ++r) av[st][r] = an[st][r];
    __syncwarp();
  }
  cp_async_wait<0>();
  kn_store_partials<kM16>(part + kw * kRows * cols, acc, cols, 64 * cw + 16 * t, g);
  __syncthreads();
  skinny_epilogue<TOut, kRows>(args, part, split, cols, n0);
}

// ---- int8, B [K, N] ---------------------------------------------------------------------
// Warp: 128 columns x its k-warp's k32 steps of the block's K range; block: (8 / k_warps)
// column warps x k_warps -> 128 * 8 / k_warps output columns. Lane (g, t) loads columns
// 16g .. 16g + 15 of the strip at k rows kb + 4t + i and kb + 16 + 4t + i (i < 4): eight 16-byte
// loads, the 8 lanes of a k row reading its 128 contiguous bytes.
constexpr int kKnStripCols = 128;  // the B [K, N] kernels that own 128 columns a warp: int8, fp32

// 4 rows (w[i]: 4 columns of k row i) -> 4 columns (c[j]: the 4 k of column j, low k first).
CLO_DEVICE void transpose_4x4_bytes(const uint32_t (&w)[4], uint32_t (&c)[4]) {
  const uint32_t x0 = __byte_perm(w[0], w[1], 0x5140), x1 = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t y0 = __byte_perm(w[2], w[3], 0x5140), y1 = __byte_perm(w[2], w[3], 0x7362);
  c[0] = __byte_perm(x0, y0, 0x5410);
  c[1] = __byte_perm(x0, y0, 0x7632);
  c[2] = __byte_perm(x1, y1, 0x5410);
  c[3] = __byte_perm(x1, y1, 0x7632);
}
CLO_DEVICE uint32_t word_of(const uint4& v, int q) { return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w; }

// One k32 step: bv[i] = the lane's 16 columns of k row kb + 4t + i (i < 4) and kb + 16 + 4t + i - 4;
// mma j of 16 takes column 16g + j as its column g (b0: k 4t.., b1: k 16 + 4t..).
CLO_DEVICE void kn_int8_step(int32_t (&acc)[16][4], const uint32_t (&a)[4], const uint4 (&bv)[8]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // columns 4q .. 4q + 3 of the lane's 16
    uint32_t lo[4], hi[4];
    const uint32_t wl[4] = {word_of(bv[0], q), word_of(bv[1], q), word_of(bv[2], q), word_of(bv[3], q)};
    const uint32_t wh[4] = {word_of(bv[4], q), word_of(bv[5], q), word_of(bv[6], q), word_of(bv[7], q)};
    transpose_4x4_bytes(wl, lo);
    transpose_4x4_bytes(wh, hi);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const uint32_t b[2] = {lo[c], hi[c]};
      mma_m16n8k32_s8(acc[4 * q + c], a, b);
    }
  }
}

// Bytes of the block's partials [k_warps][kRows][padded cols]: the most any k_warps takes.
template <int kRows>
constexpr int kn_int8_smem_bytes() {
  int most = 0;
  for (int kw = 1; kw <= kSkinnyWarps; kw *= 2) {
    most = std::max(most, kw * kRows * padded_part_stride(kKnStripCols * kSkinnyWarps / kw));
  }
  return most * static_cast<int>(sizeof(int32_t));
}

template <bool kM16>
__global__ void __launch_bounds__(kSkinnyThreads, 1) gemm_skinny_kn_int8_kernel(const GemmKernelArgs args,
                                                                              SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kRows = kM16 ? 16 : 8, kUnroll = 2;
  extern __shared__ int4 kn_int8_smem[];
  int32_t* part = reinterpret_cast<int32_t*>(kn_int8_smem);
  const auto [warp, lane, g, t, cw, kw, cols, n0] = skinny_warp(split, kKnStripCols);
  const int ncol = n0 + kKnStripCols * cw + 16 * g;
  const bool col_ok = ncol < args.N;  // N % 16 == 0: the lane's 16 columns are all in or all out
  const int8_t* b_col = static_cast<const int8_t*>(args.b) + ncol;
  const KnARows<int8_t, kM16> ar(args, g);  // 4 bytes = the fragment's 4 k of a row
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, 32), kw, split);  // k32 steps
  int32_t acc[16][4] = {};
  for (int s0 = ks.first; s0 < ks.last; s0 += ks.stride * kUnroll) {
    uint4 bv[kUnroll][8];
    uint32_t av[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // B rows kb .. kb + 3, kb + 16 .. kb + 19; A's 4-k words at kb, kb + 16
      kn_step_loads<4>(s0 + u * ks.stride, ks.last, t, K, args.ldb, b_col, col_ok, ar, bv[u], av[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) kn_int8_step(acc, av[u], bv[u]);
  }
  // acc[j]: c0 = (row g, column 32t + j of the warp's strip), c1 = (row g, column 32t + 16 + j),
  // c2/c3 row g + 8.
  const int stride = padded_part_stride(cols), c = kKnStripCols * cw + 32 * t;
  int32_t* p = part + kw * kRows * stride + c + c / 32;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    p[g * stride + j] = acc[j][0];
    p[g * stride + 16 + j] = acc[j][1];
    if constexpr (kM16) {
      p[(g + 8) * stride + j] = acc[j][2];
      p[(g + 8) * stride + 16 + j] = acc[j][3];
    }
  }
  __syncthreads();
  skinny_epilogue<int32_t, kRows, int32_t, true>(args, part, split, cols, n0);
}

// ---- fp32, B [N, K] ----------------------------------------------------------------------
// Warp: kBRows rows of B x its k-warp's steps of the block's K range; a step is 32 lanes x
// a float4 along k (each load instruction reads 512 contiguous bytes of one row). The lanes'
// partial dot products are summed with shuffles. Block: (8 / k_warps) row warps x k_warps.
template <int kRows, int kBRows>
__global__ void __launch_bounds__(kSkinnyThreads) gemm_skinny_nk_fp32_kernel(const GemmKernelArgs args, SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kVec = 4, kStepK = 32 * kVec;
  constexpr int kUnroll = kRows >= 8 ? 1 : 2;
  __shared__ float part[kSkinnyWarps * kBRows * kRows];
  const auto [warp, lane, g, t, rw, kw, cols, n0] = skinny_warp(split, kBRows);
  const int nrow = n0 + kBRows * rw;
  const float* B = static_cast<const float*>(args.b);
  const float* A = static_cast<const float*>(args.a);
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, kStepK), kw, split);
  float acc[kBRows][kRows] = {};
  for (int s0 = ks.first; s0 < ks.last; s0 += ks.stride * kUnroll) {
    uint4 bv[kUnroll][kBRows], av[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int step = s0 + u * ks.stride, k = step * kStepK + kVec * lane;
      const bool k_ok = step < ks.last && k < K;  // K % kVec == 0
#pragma unroll
      for (int r = 0; r < kBRows; ++r) {
        bv[u][r] = k_ok && nrow + r < args.N ? load_streaming_16(B + (nrow + r) * args.ldb + k) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        av[u][m] = k_ok && m < args.M ? __ldg(reinterpret_cast<const uint4*>(A + m * args.lda + k)) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        const float a[kVec] = {__uint_as_float(av[u][m].x), __uint_as_float(av[u][m].y),
                               __uint_as_float(av[u][m].z), __uint_as_float(av[u][m].w)};
#pragma unroll
        for (int r = 0; r < kBRows; ++r) {
          const float b[kVec] = {__uint_as_float(bv[u][r].x), __uint_as_float(bv[u][r].y),
                                 __uint_as_float(bv[u][r].z), __uint_as_float(bv[u][r].w)};
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[r][m] = fmaf(a[i], b[i], acc[r][m]);
        }
      }
  }
#pragma unroll
  for (int r = 0; r < kBRows; ++r)
#pragma unroll
    for (int m = 0; m < kRows; ++m)
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
  float* p = part + kw * kRows * cols;
  // Every lane holds the sums; lane (r * kRows + m) % 32 writes entry (r, m).
#pragma unroll
  for (int r = 0; r < kBRows; ++r)
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      if ((r * kRows + m) % 32 == lane) p[m * cols + kBRows * rw + r] = acc[r][m];
    }
  __syncthreads();
  skinny_epilogue<float, kRows>(args, part, split, cols, n0);
}

// ---- fp32, B [K, N] ----------------------------------------------------------------------
// Warp: 128 columns (a lane's 4: each load instruction reads 512 contiguous bytes of one k
// row) x its k-warp's units of 32 k rows. A's 32 k x kRows values of a unit are staged
// transposed in the warp's own shared memory, so a k row's A values are broadcast shared
// reads (16-byte ones from 4 rows up) instead of kRows broadcast global loads, which had
// taken as many LSU slots as the B loads. B rows stream in batches of 8 (16 bytes a lane
// each), the next batch in flight while the current one is used; the next unit's A is loaded
// while this one's B is used. Block: (8 / k_warps) column warps x k_warps; 146-251 registers
// a thread (kRows 1-16), so one block per SM.
constexpr int kKnFp32UnitK = 32, kKnFp32Batch = 8;
template <int kRows>
constexpr int kn_fp32_smem_bytes() {  // the block's partials [k_warps][kRows][cols], aliasing the staged A
  return std::max(kSkinnyWarps * kKnStripCols * kRows, kSkinnyWarps * kKnFp32UnitK * kRows) *
         static_cast<int>(sizeof(float));
}
// Where A^T's row r (k) element m lives in a warp's [32][kRows] stage: 16-byte groups of a row
// are XOR-swizzled by r so that the 8 lanes of a quarter-warp storing rows r..r+7 hit distinct
// banks; every lane reads the same row (a broadcast) in the loop.
template <int kRows>
CLO_DEVICE constexpr int kn_fp32_stage_index(int r, int m) {
  if constexpr (kRows < 4) {
    return r * kRows + m;
  } else {
    constexpr int kVecs = kRows / 4;
    return 4 * (r * kVecs + ((m / 4) ^ ((r / (8 / kVecs)) % kVecs))) + m % 4;
  }
}

template <int kRows>
__global__ void __launch_bounds__(kSkinnyThreads, 1) gemm_skinny_kn_fp32_kernel(const GemmKernelArgs args,
                                                                                      SkinnySplit split) {
  pdl_wait_then_release();  // a PDL secondary where launch_skinny says: global memory only after this
  constexpr int kUnitK = kKnFp32UnitK, kBatch = kKnFp32Batch, kBatches = kUnitK / kBatch;
  static_assert(kBatches % 2 == 0, "batches alternate between two register buffers");
  extern __shared__ float4 kn_fp32_smem[];
  float* smem = reinterpret_cast<float*>(kn_fp32_smem);
  const auto [warp, lane, g, t, cw, kw, cols, n0] = skinny_warp(split, kKnStripCols);
  const int ncol = n0 + kKnStripCols * cw + 4 * lane;
  const bool col_ok = ncol < args.N;  // N % 4 == 0: all four columns in or all out
  const float* b_col = static_cast<const float*>(args.b) + ncol;
  const float* A = static_cast<const float*>(args.a);
  const int K = args.K;
  const KSlice ks = k_slice(div_ceil(K, kUnitK), kw, split);
  const int n_units = ks.first < ks.last ? div_ceil(ks.last - ks.first, ks.stride) : 0;
  float* stage = smem + warp * kUnitK * kRows;

  auto load_batch = [&](int unit, int batch, float4 (&bv)[kBatch]) {
    const int k0 = (ks.first + unit * ks.stride) * kUnitK + batch * kBatch;
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      const int k = k0 + r;
      if (col_ok && k < K) {
        const uint4 v = load_streaming_16(b_col + static_cast<long long>(k) * args.ldb);
        bv[r] = make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
      } else {
        bv[r] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  };
  auto load_a = [&](int unit, float (&av)[kRows]) {  // lane l: A[m][k0 + l], every m
    const int k = (ks.first + unit * ks.stride) * kUnitK + lane;
#pragma unroll
    for (int m = 0; m < kRows; ++m) av[m] = m < args.M && k < K ? __ldg(A + m * args.lda + k) : 0.f;
  };
  auto stage_a = [&](const float (&av)[kRows]) {
    __syncwarp();  // every lane is done reading the previous unit
    if constexpr (kRows < 4) {
#pragma unroll
      for (int m = 0; m < kRows; ++m) stage[kn_fp32_stage_index<kRows>(lane, m)] = av[m];
    } else {
#pragma unroll
      for (int j = 0; j < kRows / 4; ++j) {
        *reinterpret_cast<float4*>(stage + kn_fp32_stage_index<kRows>(lane, 4 * j)) =
            make_float4(av[4 * j], av[4 * j + 1], av[4 * j + 2], av[4 * j + 3]);
      }
    }
    __syncwarp();
  };
  float acc[kRows][4] = {};
  auto compute = [&](const float4 (&bv)[kBatch], int r0) {
#pragma unroll
    for (int rr = 0; rr < kBatch; ++rr) {
      const int r = r0 + rr;
      float a[kRows];
      if constexpr (kRows < 4) {
#pragma unroll
        for (int m = 0; m < kRows; ++m) a[m] = stage[kn_fp32_stage_index<kRows>(r, m)];
      } else {
#pragma unroll
        for (int j = 0; j < kRows / 4; ++j) {
          const float4 v = *reinterpret_cast<const float4*>(stage + kn_fp32_stage_index<kRows>(r, 4 * j));
          a[4 * j] = v.x;
          a[4 * j + 1] = v.y;
          a[4 * j + 2] = v.z;
          a[4 * j + 3] = v.w;
        }
      }
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        acc[m][0] = fmaf(a[m], bv[rr].x, acc[m][0]);
        acc[m][1] = fmaf(a[m], bv[rr].y, acc[m][1]);
        acc[m][2] = fmaf(a[m], bv[rr].z, acc[m][2]);
        acc[m][3] = fmaf(a[m], bv[rr].w, acc[m][3]);
      }
    }
  };

  float4 b0[kBatch], b1[kBatch];
  float av[kRows];
  if (n_units > 0) {
    load_a(0, av);
    load_batch(0, 0, b0);
    stage_a(av);
  }
  for (int u = 0; u < n_units; ++u) {
    const bool more = u + 1 < n_units;
    if (more) load_a(u + 1, av);
#pragma unroll
    for (int bt = 0; bt < kBatches; bt += 2) {
      load_batch(u, bt + 1, b1);
      compute(b0, bt * kBatch);
      if (bt + 2 < kBatches) {
        load_batch(u, bt + 2, b0);
      } else if (more) {
        load_batch(u + 1, 0, b0);
      }
      compute(b1, (bt + 1) * kBatch);
    }
    if (more) stage_a(av);
  }
  __syncthreads();  // the stages are free: the partials go there
  float* p = smem + kw * kRows * cols;
  const int c = kKnStripCols * cw + 4 * lane;
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    *reinterpret_cast<float4*>(p + m * cols + c) = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
  }
  __syncthreads();
  skinny_epilogue<float, kRows>(args, smem, split, cols, n0);
}

// The kernel a problem takes: mma.sync for fp16/bf16 (a CUDA-core twin of the fp32 B [N, K]
// kernel for 16-bit A of <= 8 rows measured 0-15% slower, NOTES.md) and int8 (B [K, N] only),
// CUDA cores for fp32.
enum class SkinnyKind { kMmaNK, kMmaKN, kFp32NK, kFp32KN, kInt8KN };
SkinnyKind skinny_kind(const GemmProblem& p) {
  if (p.in_dtype == DType::kInt8) return SkinnyKind::kInt8KN;
  if (p.in_dtype == DType::kFloat32) return p.trans_b ? SkinnyKind::kFp32NK : SkinnyKind::kFp32KN;
  return p.trans_b ? SkinnyKind::kMmaNK : SkinnyKind::kMmaKN;
}
// fp32, B [N, K]: rows of B per warp (8 while A is at most 8 rows, else 4: 64 accumulators).
constexpr int nk_fp32_b_rows(int rows) { return rows >= 16 ? 4 : 8; }

// How a problem is split: k_warps warps of a block share one strip of B (interleaved k
// units), and blocks are split along K (blockIdx.y, each split keeping >= 256 of K) until
// there are blocks_per_sm blocks per SM. Defaults per kernel from the side-by-side sweeps
// (NOTES.md "Skinny"): mma kernels 8 k-warps, 1 block per SM; fp32 B [N, K] 4 and 2; fp32
// and int8 B [K, N] their own rule (kn_strip_plan; int8 at 8 k-warps unless the knob names
// 1, 2 or 4, fp32 the k-warps of the best fill).
// Dev knobs (side-by-side timing only): CLO_SKINNY_BLOCKS_PER_SM (not for fp32 or int8 B [K, N]:
// their kernels run one block per SM), CLO_SKINNY_KWARPS.
struct SkinnyPlan {
  int k_warps, k_splits, blocks_x;
};
// The fp32 and int8 B [K, N] kernels (128-column strips) run one block per SM, so a second
// partial wave costs as much as a full one: k_splits fill at most one wave, and k_warps is the
// one whose blocks fill the most of whole waves; ties go to more k-warps (fp32: measured 0-15%
// faster at equal fill, NOTES.md).
// forced_kw: CLO_SKINNY_KWARPS's value (1, 2, 4 or 8 takes that count; anything else the rule).
SkinnyPlan kn_strip_plan(const GemmProblem& p, int forced_kw) {
  const int target = device_sm_count();
  const int max_splits = std::max(1, std::min(kSkinnyMaxSplits, p.K / 256));
  auto plan_for = [&](int kw) {
    const int blocks_x = div_ceil(p.N, kKnStripCols * kSkinnyWarps / kw);
    const int k_splits = std::max(1, std::min(max_splits, target / blocks_x));
    return SkinnyPlan{kw, k_splits, blocks_x};
  };
  auto fill = [&](const SkinnyPlan& pl) {
    const long long blocks = static_cast<long long>(pl.blocks_x) * pl.k_splits;
    return static_cast<double>(blocks) / static_cast<double>(div_ceil<long long>(blocks, target) * target);
  };
  if (forced_kw == 1 || forced_kw == 2 || forced_kw == 4 || forced_kw == 8) return plan_for(forced_kw);
  SkinnyPlan best = plan_for(1);
  for (int kw = 2; kw <= kSkinnyWarps; kw *= 2) {
    const SkinnyPlan pl = plan_for(kw);
    if (fill(pl) >= fill(best) - 1e-9) best = pl;
  }
  return best;
}
SkinnyPlan skinny_plan(const GemmProblem& p) {
  const SkinnyKind kind = skinny_kind(p);
  static bool dev_blocks = std::getenv("CLO_SKINNY_BLOCKS_PER_SM") != nullptr;
  static bool dev_kwarps = std::getenv("CLO_SKINNY_KWARPS") != nullptr;
  // Output columns of a block with one k-warp, and the k of the kernel's loop unit.
  int cols_one = 0, unit_k = 0;
  switch (kind) {
    case SkinnyKind::kMmaNK: cols_one = 16 * kSkinnyWarps; unit_k = 32; break;
    case SkinnyKind::kMmaKN: cols_one = 64 * kSkinnyWarps; unit_k = 16; break;
    case SkinnyKind::kFp32NK: cols_one = nk_fp32_b_rows(p.M > 8 ? 16 : 8) * kSkinnyWarps; unit_k = 128; break;
    case SkinnyKind::kFp32KN: return kn_strip_plan(p, dev_knob("CLO_SKINNY_KWARPS", dev_kwarps, 0));
    // int8: 8 k-warps measured fastest at 4096-28672 columns (NOTES.md "Stop 124"; the fill rule's
    // 1 k-warp at 12288 columns took 42.2 us against 29.9 at 16 rows).
    case SkinnyKind::kInt8KN: return kn_strip_plan(p, dev_knob("CLO_SKINNY_KWARPS", dev_kwarps, kSkinnyWarps));
  }
  const bool mma = kind == SkinnyKind::kMmaNK || kind == SkinnyKind::kMmaKN;
  const long long target = static_cast<long long>(dev_knob("CLO_SKINNY_BLOCKS_PER_SM", dev_blocks, mma ? 1 : 2)) *
                           device_sm_count();
  int kw = dev_knob("CLO_SKINNY_KWARPS", dev_kwarps, mma ? 8 : 4);
  kw = kw == 2 || kw == 4 || kw == 8 ? kw : 1;
  const int blocks_x = div_ceil(p.N, cols_one / kw);
  const int units = div_ceil(p.K, unit_k);
  const int max_splits = std::max(1, std::min(kSkinnyMaxSplits, units * unit_k / 256));
  const int k_splits =
      blocks_x >= target ? 1 : static_cast<int>(std::min<long long>(max_splits, div_ceil<long long>(target, blocks_x)));
  return {kw, k_splits, blocks_x};
}

template <typename Kernel>
cudaError_t launch_skinny(Kernel kernel, void (*reduce)(const GemmKernelArgs, const void*, int), const GemmProblem& p,
                          cudaStream_t stream, int smem_bytes = 0) {
  if (const cudaError_t err = set_dynamic_smem(kernel, smem_bytes); err != cudaSuccess) return err;
  SkinnyPlan plan = skinny_plan(p);
  const size_t partial_bytes = static_cast<size_t>(plan.k_splits) * p.M * p.N * sizeof(float);  // or int32
  if (plan.k_splits > 1 && (p.workspace == nullptr || p.workspace_bytes < partial_bytes)) plan.k_splits = 1;
  const GemmKernelArgs args = make_kernel_args(p);
  const SkinnySplit split{plan.k_warps, plan.k_splits, p.workspace};
  // The fp32 kernels only under kGemmPdlAll: not measured as secondaries.
  const int pdl_mode = gemm_pdl_mode();
  const bool pdl = pdl_mode == kGemmPdlAll ||
                   (pdl_mode == kGemmPdlDecode && p.in_dtype != DType::kFloat32 &&
                    gemm_skinny_pdl_pays(static_cast<long long>(plan.blocks_x) * plan.k_splits, device_sm_count()));
  cudaError_t err = launch_kernel(kernel, dim3(plan.blocks_x, plan.k_splits), dim3(kSkinnyThreads), smem_bytes, stream,
                                  pdl, args, split);
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess || plan.k_splits == 1) return err;
  const long long mn = static_cast<long long>(p.M) * p.N;
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>(div_ceil<long long>(mn, kSkinnyThreads), 4LL * device_sm_count()));
  return launch_kernel(reduce, dim3(blocks), dim3(kSkinnyThreads), 0, stream, pdl_mode != kGemmPdlOff, args,
                       static_cast<const void*>(p.workspace), plan.k_splits);
}

template <int kRows>
cudaError_t launch_skinny_fp32(const GemmProblem& p, cudaStream_t stream) {
  const auto reduce = gemm_skinny_reduce_kernel<float>;
  return p.trans_b ? launch_skinny(gemm_skinny_nk_fp32_kernel<kRows, nk_fp32_b_rows(kRows)>, reduce, p, stream)
                   : launch_skinny(gemm_skinny_kn_fp32_kernel<kRows>, reduce, p, stream, kn_fp32_smem_bytes<kRows>());
}

// The mma kernels. The cp.async-ring twins run for B [N, K] and for B [K, N] with A of <= 8
// rows (measured: B [K, N] at M > 8 was 3-7% faster on the register-batch kernel), where
// shared memory allows. Dev knob CLO_SKINNY_PIPE: 0 register batches, 1 rings everywhere.
template <typename T, typename TOut>
cudaError_t launch_skinny_mma(const GemmProblem& p, cudaStream_t stream) {
  static bool dev_pipe = std::getenv("CLO_SKINNY_PIPE") != nullptr;
  const bool ring_fits = smem_budget_per_block() >= kPipeSmemBytes + kSkinnyWarps * 64 * 16 * 4;  // + static partials
  const bool ring = ring_fits && dev_knob("CLO_SKINNY_PIPE", dev_pipe, p.trans_b || p.M <= 8 ? 1 : 0) != 0;
  const auto reduce = gemm_skinny_reduce_kernel<TOut>;
  if (ring) {
    if (p.trans_b) {
      return p.M > 8 ? launch_skinny(gemm_skinny_nk_mma_pipe_kernel<T, TOut, 2>, reduce, p, stream, kPipeSmemBytes)
                     : launch_skinny(gemm_skinny_nk_mma_pipe_kernel<T, TOut, 1>, reduce, p, stream, kPipeSmemBytes);
    }
    return p.M > 8 ? launch_skinny(gemm_skinny_kn_mma_pipe_kernel<T, TOut, true>, reduce, p, stream, kPipeSmemBytes)
                   : launch_skinny(gemm_skinny_kn_mma_pipe_kernel<T, TOut, false>, reduce, p, stream, kPipeSmemBytes);
  }
  if (p.trans_b) {
    return p.M > 8 ? launch_skinny(gemm_skinny_nk_mma_kernel<T, TOut, 2>, reduce, p, stream)
                   : launch_skinny(gemm_skinny_nk_mma_kernel<T, TOut, 1>, reduce, p, stream);
  }
  return p.M > 8 ? launch_skinny(gemm_skinny_kn_mma_kernel<T, TOut, true>, reduce, p, stream)
                 : launch_skinny(gemm_skinny_kn_mma_kernel<T, TOut, false>, reduce, p, stream);
}

cudaError_t launch_skinny_int8(const GemmProblem& p, cudaStream_t stream) {
  const auto reduce = gemm_skinny_reduce_kernel<int32_t, int32_t>;
  return p.M > 8 ? launch_skinny(gemm_skinny_kn_int8_kernel<true>, reduce, p, stream, kn_int8_smem_bytes<16>())
                 : launch_skinny(gemm_skinny_kn_int8_kernel<false>, reduce, p, stream, kn_int8_smem_bytes<8>());
}

template <typename T, typename TOut>
cudaError_t launch_skinny_typed(const GemmProblem& p, cudaStream_t stream) {
  switch (skinny_kind(p)) {
    case SkinnyKind::kMmaNK:
    case SkinnyKind::kMmaKN:
      if constexpr (sizeof(T) == 2) return launch_skinny_mma<T, TOut>(p, stream);
      return cudaErrorInvalidValue;
    default: break;
  }
  if constexpr (sizeof(T) == 4) {
    if (p.M <= 1) return launch_skinny_fp32<1>(p, stream);
    if (p.M <= 2) return launch_skinny_fp32<2>(p, stream);
    if (p.M <= 4) return launch_skinny_fp32<4>(p, stream);
    if (p.M <= 8) return launch_skinny_fp32<8>(p, stream);
    return launch_skinny_fp32<16>(p, stream);
  }
  return cudaErrorInvalidValue;
}

// int8 decode shapes with B stored [K, N] and a weight of at least 32 MiB: mma.sync's 128x256
// tiles read such a weight at ~1 TB/s unsplit, and with K split (gemm_int8.cu) still lose to
// this kernel there (NOTES.md "Stop 124": 16 x 12288 x 4096 27.1 us against 32.7, 1 x 12288 x
// 4096 24.2 against 28.1), while they win at 16 MiB (16 x 4096 x 4096: 13.9 against 14.9).
// Dev knob CLO_GEMM_INT8_SKINNY: 0 never, 1 that rule (default), 2 every such decode shape.
constexpr long long kInt8SkinnyMinWeightBytes = 32LL << 20;
bool int8_skinny_kn_applies(const GemmProblem& p) {
  static bool dev_mode = std::getenv("CLO_GEMM_INT8_SKINNY") != nullptr;
  const int mode = dev_knob("CLO_GEMM_INT8_SKINNY", dev_mode, 1);
  if (p.trans_b || p.out_dtype != DType::kInt32 || p.c != nullptr || mode == 0) return false;
  return mode == 2 || static_cast<long long>(p.K) * p.N >= kInt8SkinnyMinWeightBytes;
}

}  // namespace

size_t skinny_workspace_bytes(const GemmProblem& p) {
  if (!skinny_applicable(p)) return 0;
  const SkinnyPlan plan = skinny_plan(p);
  return plan.k_splits > 1 ? static_cast<size_t>(plan.k_splits) * p.M * p.N * sizeof(float) : 0;
}

bool skinny_applicable(const GemmProblem& p) {
  if (p.M > kSkinnyMaxM || p.trans_a || !gemm_vectorizable(p)) return false;
  switch (p.in_dtype) {
    case DType::kFloat32: return p.out_dtype == DType::kFloat32;
    case DType::kFloat16:
    case DType::kBFloat16: return p.out_dtype == DType::kFloat32 || p.out_dtype == p.in_dtype;
    case DType::kInt8: return int8_skinny_kn_applies(p);
    default: return false;
  }
}

cudaError_t launch_gemm_skinny(const GemmProblem& p, cudaStream_t stream) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0 || !skinny_applicable(p)) return cudaErrorInvalidValue;
  const bool f32_out = p.out_dtype == DType::kFloat32;
  switch (p.in_dtype) {
    case DType::kFloat32: return launch_skinny_typed<float, float>(p, stream);
    case DType::kFloat16:
      return f32_out ? launch_skinny_typed<__half, float>(p, stream) : launch_skinny_typed<__half, __half>(p, stream);
    case DType::kBFloat16:
      return f32_out ? launch_skinny_typed<__nv_bfloat16, float>(p, stream)
                     : launch_skinny_typed<__nv_bfloat16, __nv_bfloat16>(p, stream);
    case DType::kInt8: return launch_skinny_int8(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace cuda_llm_ops::gemm
