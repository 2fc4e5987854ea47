// int8 tensor-core GEMM: mma.sync m16n8k32 s8 x s8 -> s32 (exact), cp.async
// multi-stage pipeline, 128x256x64 block tile, 8 warps of 64x64. On Hopper (sm_90a
// build) the wgmma family takes its calls first (launch_gemm_int8: up to 128 rows of A where
// its grid fills a wave or splits along K, any grid past them); decode calls with B [K, N] of 32 MiB or more run on the
// skinny int8 kernel (gemm_skinny.cu) and never reach this file.
//
// B row-major [K, N] is the hard layout: mma wants, per lane, 4 consecutive k
// of one column n, and ldmatrix.trans does not exist for 8-bit elements. We
// stage B tiles as they are in memory (n contiguous) and read them with the
// 16-bit ldmatrix.trans, choosing which k row each of the 8 matrix rows comes
// from: matrix 0 reads k = {0,1,4,5,8,9,12,13}, matrix 1 the same + 2. After the
// transpose a lane holds, for columns n = 2g and 2g + 1, the bytes of
// k = 4t, 4t+1 (from matrix 0) and 4t+2, 4t+3 (from matrix 1); two byte
// permutes (prmt) split them into the fragment of column 2g and that of 2g + 1.
// The mma then computes column 2g in its n8 tile X and 2g + 1 in tile Y, so the
// lane's accumulators cover columns 4t..4t+3 of one row: a 16-byte store.
// B column-major (stored [N, K], k contiguous) reads like A, with plain ldmatrix.
#include <algorithm>
#include <cstdlib>

#include "cuda_llm_ops/mma.cuh"
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {
namespace {

constexpr int kI8BM = 128, kI8BN = 256, kI8BK = 64, kI8WarpsM = 2, kI8WarpsN = 4, kI8Stages = 4;
constexpr int kI8Threads = kI8WarpsM * kI8WarpsN * 32;
constexpr int kI8WM = kI8BM / kI8WarpsM, kI8WN = kI8BN / kI8WarpsN;
constexpr int kI8MT = kI8WM / 16, kI8NT = kI8WN / 8;

// XOR key of k row `row` in the row-major B tile: the 8 rows one ldmatrix
// matrix reads ({0,1,4,5,8,9,12,13} + {0,2} + 16j) get 8 distinct keys.
CLO_DEVICE int b_rowmajor_key(int row) { return (row & 1) | ((row >> 1) & 6); }

template <bool kTransB>
struct Int8Tiles {
  static constexpr int A_ROWS = kI8BM, A_CHUNKS = kI8BK / 16;  // 64-byte rows
  static constexpr int B_ROWS = kTransB ? kI8BN : kI8BK;
  static constexpr int B_CHUNKS = (kTransB ? kI8BK : kI8BN) / 16;
  static constexpr int A_STAGE = A_ROWS * A_CHUNKS * 16;  // bytes
  static constexpr int B_STAGE = B_ROWS * B_CHUNKS * 16;
  static constexpr size_t kSmemBytes = size_t(kI8Stages) * (A_STAGE + B_STAGE);
  static_assert((A_ROWS * A_CHUNKS) % kI8Threads == 0 && (B_ROWS * B_CHUNKS) % kI8Threads == 0, "copy split");
  CLO_DEVICE static int b_offset(int row, int ch) {
    if constexpr (kTransB) {
      return row * B_CHUNKS * 16 + swizzle_chunk<B_CHUNKS>(row, ch) * 16;
    } else {
      return row * B_CHUNKS * 16 + (ch ^ b_rowmajor_key(row)) * 16;
    }
  }
};

CLO_DEVICE uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(lo), "r"(hi), "r"(selector));
  return d;
}

// Split-K (gridDim.y > 1): block y takes `ktiles_per_split` k-tiles from y * ktiles_per_split
// on and adds its sums into D, which the launcher zeroed; int32 additions in any order give
// the same exact result.
template <bool kTransB>
__global__ void __launch_bounds__(kI8Threads) gemm_mma_int8_kernel(const GemmKernelArgs args, int ktiles_per_split) {
  using Tiles = Int8Tiles<kTransB>;
  constexpr int MT = kI8MT, NT = kI8NT, BK = kI8BK;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  int8_t* smem_a = reinterpret_cast<int8_t*>(smem_raw);
  int8_t* smem_b = smem_a + kI8Stages * Tiles::A_STAGE;
  const int8_t* A = static_cast<const int8_t*>(args.a);
  const int8_t* B = static_cast<const int8_t*>(args.b);
  const int M = args.M, N = args.N, K = args.K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / kI8WarpsN, warp_n = warp % kI8WarpsN;
  const BlockCoord blk = grouped_block(blockIdx.x, div_ceil(M, kI8BM), div_ceil(N, kI8BN));
  const int m0 = blk.bm * kI8BM, n0 = blk.bn * kI8BN;
  const int kt_begin = static_cast<int>(blockIdx.y) * ktiles_per_split;
  const int ktiles = max(0, min(div_ceil(K, BK) - kt_begin, ktiles_per_split));  // this block's k-tiles
  const bool split = gridDim.y > 1;

  auto load_tile = [&](int stage, int kt) {
    const int k0 = (kt_begin + kt) * BK;
    int8_t* sa = smem_a + stage * Tiles::A_STAGE;
    int8_t* sb = smem_b + stage * Tiles::B_STAGE;
#pragma unroll
    for (int p = 0; p < Tiles::A_ROWS * Tiles::A_CHUNKS / kI8Threads; ++p) {
      const int i = tid + p * kI8Threads;
      const int row = i / Tiles::A_CHUNKS, ch = i % Tiles::A_CHUNKS;
      const int gm = m0 + row, gk = k0 + ch * 16;
      const bool valid = gm < M && gk < K;
      cp_async_16(sa + row * Tiles::A_CHUNKS * 16 + swizzle_chunk<Tiles::A_CHUNKS>(row, ch) * 16,
                  valid ? A + (long long)gm * args.lda + gk : A, valid);
    }
#pragma unroll
    for (int p = 0; p < Tiles::B_ROWS * Tiles::B_CHUNKS / kI8Threads; ++p) {
      const int i = tid + p * kI8Threads;
      const int row = i / Tiles::B_CHUNKS, ch = i % Tiles::B_CHUNKS;
      int gn, gk;
      if constexpr (kTransB) { gn = n0 + row; gk = k0 + ch * 16; } else { gk = k0 + row; gn = n0 + ch * 16; }
      const bool valid = gn < N && gk < K;
      const int8_t* src = kTransB ? B + (long long)gn * args.ldb + gk : B + (long long)gk * args.ldb + gn;
      cp_async_16(sb + Tiles::b_offset(row, ch), valid ? src : B, valid);
    }
  };

  // Fragments of one k32 step. For row-major B, tile 2np is "X" (columns 2g of
  // each 16-column group) and 2np+1 is "Y" (columns 2g+1), see the file comment.
  auto load_frags = [&](int stage, int kk, uint32_t (&af)[MT][4], uint32_t (&bf)[NT][2]) {
    const int8_t* sa = smem_a + stage * Tiles::A_STAGE;
    const int8_t* sb = smem_b + stage * Tiles::B_STAGE;
    const int j = lane >> 3, r = lane & 7;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int row = warp_m * kI8WM + mt * 16 + (lane & 15), ch = kk * 2 + (lane >> 4);
      ldmatrix_x4(af[mt], sa + row * Tiles::A_CHUNKS * 16 + swizzle_chunk<Tiles::A_CHUNKS>(row, ch) * 16);
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      const int wn = warp_n * kI8WN + np * 16;
      uint32_t q[4];
      if constexpr (kTransB) {
        const int row = wn + r + (j >> 1) * 8, ch = kk * 2 + (j & 1);
        ldmatrix_x4(q, sb + Tiles::b_offset(row, ch));
        bf[2 * np][0] = q[0];
        bf[2 * np][1] = q[1];
        bf[2 * np + 1][0] = q[2];
        bf[2 * np + 1][1] = q[3];
      } else {
        const int row = kk * 32 + (j >> 1) * 16 + (r >> 1) * 4 + (r & 1) + (j & 1) * 2;
        ldmatrix_x4_trans(q, sb + Tiles::b_offset(row, wn / 16));
        bf[2 * np][0] = byte_perm(q[0], q[1], 0x6420);
        bf[2 * np][1] = byte_perm(q[2], q[3], 0x6420);
        bf[2 * np + 1][0] = byte_perm(q[0], q[1], 0x7531);
        bf[2 * np + 1][1] = byte_perm(q[2], q[3], 0x7531);
      }
    }
  };

  int32_t acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0;

  auto compute_stage = [&](int stage) {
    uint32_t af[2][MT][4], bf[2][NT][2];
    load_frags(stage, 0, af[0], bf[0]);
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) {
      if (kk + 1 < BK / 32) load_frags(stage, kk + 1, af[(kk + 1) & 1], bf[(kk + 1) & 1]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k32_s8(acc[mt][nt], af[kk & 1][mt], bf[kk & 1][nt]);
    }
  };

#pragma unroll
  for (int s = 0; s < kI8Stages - 1; ++s) {
    if (s < ktiles) load_tile(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kI8Stages - 2>();
    __syncthreads();
    const int next = kt + kI8Stages - 1;
    if (next < ktiles) load_tile(next % kI8Stages, next);
    cp_async_commit();
    compute_stage(kt % kI8Stages);
  }
  cp_async_wait<0>();

  int32_t* D = static_cast<int32_t*>(args.d);
  const int g = lane >> 2, t = lane & 3;
  const bool vec4 = args.ldd % 4 == 0 && reinterpret_cast<uintptr_t>(D) % 16 == 0;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + warp_m * kI8WM + mt * 16 + g + h * 8;
      if (row >= M) continue;
      int32_t* drow = D + (long long)row * args.ldd;
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        const int* x = acc[mt][2 * np];
        const int* y = acc[mt][2 * np + 1];
        if constexpr (kTransB) {
          const int col = n0 + warp_n * kI8WN + np * 16 + 2 * t;
          const int v[4] = {x[2 * h], x[2 * h + 1], y[2 * h], y[2 * h + 1]};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = col + (e >> 1) * 8 + (e & 1);
            if (c < N) {
              if (split) {
                atomicAdd(drow + c, v[e]);
              } else {
                drow[c] = v[e];
              }
            }
          }
        } else {
          const int col = n0 + warp_n * kI8WN + np * 16 + 4 * t;
          const int4 v = make_int4(x[2 * h], y[2 * h], x[2 * h + 1], y[2 * h + 1]);
          // The split test stays outside the store loops: one store-or-add helper inside them
          // grew this kernel's code from 52 to 67 KB (scripts/kernel_diff.py, sm_90a).
          if (split) {
            const int vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (col + e < N) atomicAdd(drow + col + e, vv[e]);
          } else if (vec4 && col + 3 < N) {
            *reinterpret_cast<int4*>(drow + col) = v;
          } else {
            const int vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (col + e < N) drow[col + e] = vv[e];
          }
        }
      }
    }
  }
}

// K splits for a grid of `tiles` 128x256 tiles: one row tile of A (decode and small batches,
// bound by streaming B) whose tiles leave SMs idle. The count of least modelled time within two
// waves, each split keeping >= 4 k-tiles (ties: fewer splits); 1 otherwise. Time in k-tile steps
// of one CTA (0.84 us on an H100, where an unsplit 1 x 12288 x 4096 takes 64 of them, 54 us):
// waves x k-tiles a split, and for a split call a fixed ~8 us (the memset, a wider grid's ramp)
// plus its atomic adds, ~1.6 us a MB of int32 partials (s x M x N x 4 bytes): fitted to
// 1/16/64/128 x 4096/12288 x 4096 at 5 and 8 splits (NOTES.md "Stop 123"), where the fill rule
// alone took 128 x 12288 x 4096 from 60 to 82 us. Dev knob CLO_GEMM_INT8_SPLITK: 0 never split,
// n > 1 that many (at most 16) wherever one row tile (k-tiles allowing).
constexpr double kSplitFixedSteps = 9.5;            // ~8 us in 0.84-us steps
constexpr double kSplitAtomicsPerStep = 131072.0;  // int32 partials added in one step
int int8_k_splits(const GemmProblem& p, long long tiles) {
  static bool dev_mode = std::getenv("CLO_GEMM_INT8_SPLITK") != nullptr;
  const int knob = dev_knob("CLO_GEMM_INT8_SPLITK", dev_mode, -1);
  const int ktiles = div_ceil(p.K, kI8BK);
  if (p.M > kI8BM || knob == 0 || ktiles < 8) return 1;
  if (knob > 0) return std::max(1, std::min({knob, 16, ktiles / 4}));
  const long long sms = device_sm_count();
  if (tiles >= sms) return 1;
  int best = 1;
  double best_cost = double(ktiles);  // one wave, every k-tile
  for (int s = 2; s <= std::min<long long>({16, ktiles / 4, 2 * sms / tiles}); ++s) {
    const long long waves = (tiles * s + sms - 1) / sms;
    const double cost = double(waves * div_ceil(ktiles, s)) + kSplitFixedSteps +
                        double(s) * double(p.M) * double(p.N) / kSplitAtomicsPerStep;
    if (cost < best_cost - 1e-9) best = s, best_cost = cost;
  }
  return best;
}

template <bool kTransB>
cudaError_t launch_int8(const GemmProblem& p, cudaStream_t stream) {
  auto kernel = gemm_mma_int8_kernel<kTransB>;
  const size_t smem = Int8Tiles<kTransB>::kSmemBytes;
  cudaError_t err = set_dynamic_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const long long blocks = (long long)div_ceil(p.M, kI8BM) * div_ceil(p.N, kI8BN);
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  const int splits = int8_k_splits(p, blocks);
  const int ktiles = div_ceil(p.K, kI8BK), per_split = div_ceil(ktiles, splits);
  const int used = div_ceil(ktiles, per_split);  // splits that hold k-tiles
  if (used > 1) {  // the blocks add into D
    err = cudaMemset2DAsync(p.d, size_t(p.ldd) * sizeof(int32_t), 0, size_t(p.N) * sizeof(int32_t), p.M, stream);
    if (err != cudaSuccess) return err;
  }
  kernel<<<dim3(static_cast<unsigned>(blocks), used), kI8Threads, smem, stream>>>(make_kernel_args(p), per_split);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemm_int8(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  if (!gemm_vectorizable(p) || p.trans_a || p.c != nullptr) return cudaErrorInvalidValue;
  if (variant != GemmVariant::kAuto && variant != GemmVariant::kPipelined) return cudaErrorInvalidValue;
  if (variant == GemmVariant::kAuto) {  // Hopper: the wgmma family first (NotSupported launched nothing)
    const cudaError_t err = launch_gemm_wgmma_int8(p, stream);
    if (err != cudaErrorNotSupported) return err;
  }
  return p.trans_b ? launch_int8<true>(p, stream) : launch_int8<false>(p, stream);
}

}  // namespace cuda_llm_ops::gemm
