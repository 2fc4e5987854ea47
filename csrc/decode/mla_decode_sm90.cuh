// MLA decode attention for Hopper (sm_90a): wgmma from shared-memory descriptors, for
// calls of 32+ query heads (mla_decode_attention.cu dispatches; NOTES.md "MLA, wgmma").
//
// Why another kernel: the mma.sync kernel serves 16 heads a block and moves every K and V
// fragment through registers; at 128 heads its ~146 KB of shared-memory traffic per 32-key
// tile caps it near 130 TFLOP/s. Here a block serves 64 heads (wgmma's M), so each cache
// row in shared memory feeds 4x the heads, and the tensor cores read their operands from
// shared memory themselves.
//
// One block = 64 query heads of one sequence and one split of its keys; two warpgroups:
//   warpgroup 0: S = Q K^T (64 x 64 keys, wgmma m64n64k16, both operands K-major from
//     shared memory, 36 k-steps over the 576 columns), the online softmax, then
//     O[:, 0:256] += P V with P from registers (wgmma RS m64n256k16, V N-major);
//   warpgroup 1: the cp.async copies of Q and of every key tile (eight threads a cache row,
//     into the 128-byte swizzle the descriptors read), and O[:, 256:512] += P V with the
//     P and the rescale warpgroup 0 publishes in shared memory.
// Q (72 KB) and two stages of 64-key tiles (72 KB each; a row serves as K, its first 512
// columns as V) take 216 KB, so a block fills an SM. The loads of tile j + 1 run under
// all of tile j's work: at 64 heads a block is memory-bound (121 FLOP per byte); the two
// blocks of a 128-head sequence read each tile at about the same time and share it in L2.
// S = Q K^T of tile j + 1 waits for P V of tile j (no FA3-style overlap): with two stages
// the stage of tile j frees only after its P V, so overlapping the two would leave the
// load of tile j + 2 no more than the softmax's time; a third stage does not fit.
// Splits write the same partials as the mma.sync kernel (mla_store_rows); its combine kernel
// merges them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "cuda_llm_ops/tma.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"
#include "cuda_llm_ops/wgmma.cuh"
#include "decode/mla_decode_common.cuh"

namespace cuda_llm_ops::decode::mla_sm90 {

constexpr int kHeads = kMlaSm90Heads;                 // query heads a block serves (wgmma M)
constexpr int kKeys = kMlaSm90TileKeys;               // keys a tile (S = m64n64)
constexpr int kThreads = 256;                         // two warpgroups
constexpr int kChunks = kMlaHeadDimQK / 64;           // 64-column chunks of a row (9)
constexpr uint32_t kChunkBytes = 64 * 128;            // one chunk of 64 rows of 128 bytes
constexpr uint32_t kTileBytes = kChunks * kChunkBytes;  // Q, or one stage of keys: 72 KB
constexpr int kVCols = kMlaHeadDimV / 2;              // output columns a warpgroup owns
constexpr int kSAcc = kKeys / 2, kOAcc = kVCols / 2;  // fp32 accumulators per thread
constexpr int kQkSteps = kMlaHeadDimQK / 16, kPvSteps = kKeys / 16;
// Copies: eight threads of warpgroup 1 a row, each 4 rows of a tile.
constexpr int kCopyRows = kKeys / 16;
static_assert(kCopyRows == 4 && kMlaHeadDimQK * 2 / 16 == 8 * kChunks, "copy mapping");
// P for warpgroup 1: thread i's kSAcc / 2 packed pairs at [k][i] (conflict-free); the
// rescale factors of its two rows; at the end warpgroup 0's (max, sum) pairs reuse P's room.
constexpr uint32_t kPBytes = kSAcc / 2 * 128 * 4, kScaleBytes = 128 * 8;
constexpr size_t kSmemBytes = 3 * size_t(kTileBytes) + kPBytes + kScaleBytes + 1024;  // + alignment
static_assert(kSmemBytes <= 227 * 1024, "shared memory");
static_assert(kPBytes >= 128 * 16, "the final (max, sum) exchange fits P's room");
// Named barriers (0 is __syncthreads'): P published; key tile landed; stage released.
constexpr int kBarPFull = 1, kBarTileReady = 2, kBarStageFree = 3;

template <typename T>
CLO_DEVICE void issue_qk(float (&s)[kSAcc], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
  for (int i = 0; i < kSAcc; ++i) s[i] = 0.f;
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kQkSteps; ++kk) {
    const uint32_t off = (kk / 4) * kChunkBytes + (kk % 4) * 32;
    wgmma::wgmma_m64n64k16<0, 0>(wgmma::WgmmaTag<T>{}, s, wgmma::desc_advance(q_desc, off),
                                 wgmma::desc_advance(k_desc, off));
  }
  wgmma::commit_group();
}

// O += P V over one tile: V N-major (this warpgroup's 4 chunks of 64 columns, kChunkBytes
// apart), k-step kk = keys 16kk .. 16kk + 15 = 2048 bytes further.
template <typename T>
CLO_DEVICE void issue_pv(float (&o)[kOAcc], const uint32_t (&p)[kSAcc / 2], uint64_t v_desc) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kPvSteps; ++kk)
    wgmma::wgmma_m64n256k16_rs<1>(wgmma::WgmmaTag<T>{}, o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3],
                                  wgmma::desc_advance(v_desc, kk * 2048));
  wgmma::commit_group();
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_attention_sm90_kernel(const MlaKernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  // 128-byte swizzle atoms start on 1024-byte boundaries.
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* sQ = smem;
  unsigned char* sK = smem + kTileBytes;  // stage s at + s * kTileBytes
  uint32_t* sP = reinterpret_cast<uint32_t*>(smem + 3 * kTileBytes);
  float2* sScale = reinterpret_cast<float2*>(smem + 3 * kTileBytes + kPBytes);

  const int tid = threadIdx.x, wg = tid / 128, wg_tid = tid % 128;
  const int warp = wg_tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  const int head0 = blockIdx.x * kHeads, b = blockIdx.y, split = blockIdx.z;
  const int rows_here = min(kHeads, p.num_q_heads - head0);

  const MlaSplitRange range = mla_split_range<kKeys>(p, b, split);
  bool bad = range.bad;
  const int key_lo = range.key_lo, key_hi = range.key_hi;
  const int nk = key_hi - key_lo, n_tiles = div_ceil(nk, kKeys);

  float o[kOAcc];
#pragma unroll
  for (int i = 0; i < kOAcc; ++i) o[i] = 0.f;
  uint32_t pf[kSAcc / 2];
  float row_max[2] = {kNegInf, kNegInf}, row_sum[2] = {0.f, 0.f};
  const uint32_t k_base = smem_u32addr(sK);
  // This warpgroup's V columns of stage s: chunks 4 wg .. 4 wg + 3 of the tile.
  auto v_desc = [&](int s) {
    return wgmma::make_desc_sw128(k_base + s * kTileBytes + wg * (kVCols / 64) * kChunkBytes, kChunkBytes, 1024);
  };

  if (wg == 1) {
    // ---- copies and the second half of P V ----
    // Eight threads copy a row, rows cp_row + 16 i (i < 4): a warp's copy instruction
    // reads 4 whole 128-byte lines; thread piece's 9 pieces 8 k + piece land in chunk k,
    // slot piece ^ (row % 8) (the swizzle; 8 distinct slots a row, 4 full wavefronts).
    const int cp_row = wg_tid / 8, piece = wg_tid % 8;
    const int* table = p.block_tables + b * p.table_stride;
    const T* kv = static_cast<const T*>(p.kv);
    auto copy_row = [&](unsigned char* dst_row, const T* src, bool ok) {
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
        cp_async_16_prefetch<256>(dst_row + k * kChunkBytes + ((piece ^ (cp_row % 8)) << 4), src + (8 * k + piece) * 8,
                                  ok);
    };
    // The block-table entries of this thread's rows of a tile (-1 past the split's end).
    auto table_entries = [&](int tile) {
      int e[kCopyRows];
#pragma unroll
      for (int i = 0; i < kCopyRows; ++i) {
        const int pos = key_lo + tile * kKeys + cp_row + 16 * i;
        e[i] = tile < n_tiles && pos < key_hi ? __ldg(table + (pos >> p.log2_bs)) : -1;
      }
      return make_int4(e[0], e[1], e[2], e[3]);
    };
    auto issue_tile = [&](int tile, int4 entries) {
      if (tile < n_tiles) {
        const int e4[kCopyRows] = {entries.x, entries.y, entries.z, entries.w};
#pragma unroll
        for (int i = 0; i < kCopyRows; ++i) {
          const int row = cp_row + 16 * i, pos = key_lo + tile * kKeys + row, e = e4[i];
          bool ok = pos < key_hi;
          if (ok && static_cast<unsigned>(e) >= static_cast<unsigned>(p.num_blocks)) {
            bad = true;  // never dereferenced: zero-filled, the rows become NaN
            ok = false;
          }
          const T* src =
              kv + (ok ? (static_cast<int64_t>(e) * p.block_size + (pos & p.bs_mask)) * kMlaHeadDimQK : 0);
          copy_row(sK + (tile % 2) * kTileBytes + row * 128, src, ok);
        }
      }
      cp_async_commit();
    };
#pragma unroll
    for (int i = 0; i < kCopyRows; ++i) {  // Q (zeros past Hq) travels with tile 0
      const int row = cp_row + 16 * i;
      const bool ok = row < rows_here;
      copy_row(sQ + row * 128, static_cast<const T*>(p.q) + b * p.q_sb + (ok ? (head0 + row) * p.q_sh : 0), ok);
    }
    issue_tile(0, table_entries(0));
    issue_tile(1, table_entries(1));
    int4 entry = table_entries(2);  // a tile ahead of its copies
    pdl_launch_dependents();  // the combine kernel may start launching; it waits for this grid
    if (n_tiles > 0) {
      cp_async_wait<1>();
      tma::fence_proxy_async_shared();  // cp.async writes are generic-proxy; wgmma reads async
      named_barrier_arrive(kBarTileReady, kThreads);
    }
    for (int j = 0; j < n_tiles; ++j) {
      named_barrier_sync(kBarPFull, kThreads);  // P(j) and its rescale are published
#pragma unroll
      for (int i = 0; i < kSAcc / 2; ++i) pf[i] = sP[i * 128 + wg_tid];
      const float2 f = sScale[wg_tid];
      if (__any_sync(0xffffffffu, f.x != 1.f || f.y != 1.f)) scale_fragment_rows(o, {f.x, f.y});
      issue_pv<T>(o, pf, v_desc(j % 2));
      wgmma::wait_group<0>();
      // Warpgroup 0's P V of tile j is done too. Only then tile j + 1 is announced: warpgroup
      // 0 arrives here once per tile, and a second arrival before this sync would complete
      // the barrier's phase without this warpgroup.
      named_barrier_sync(kBarStageFree, kThreads);
      if (j + 1 < n_tiles) {  // tile j + 1 (the only group in flight) for warpgroup 0
        cp_async_wait<0>();
        tma::fence_proxy_async_shared();
        named_barrier_arrive(kBarTileReady, kThreads);
      }
      issue_tile(j + 2, entry);
      entry = table_entries(j + 3);
    }
    cp_async_wait_all();
  } else {
    // ---- S = Q K^T, the softmax, the first half of P V ----
    const uint64_t q_desc = wgmma::make_desc_sw128(smem_u32addr(sQ), 16, 1024);
    const float scale_log2 = p.scale_log2;
    for (int j = 0; j < n_tiles; ++j) {
      named_barrier_sync(kBarTileReady, kThreads);
      float s[kSAcc];
      issue_qk<T>(s, q_desc, wgmma::make_desc_sw128(k_base + (j % 2) * kTileBytes, 16, 1024));
      wgmma::wait_group<0>();
      const int n0 = j * kKeys;
      if (n0 + kKeys > nk) {  // the split's last tile: keys past its end
#pragma unroll
        for (int i = 0; i < kSAcc; ++i)
          if (n0 + 8 * (i / 4) + 2 * t4 + (i & 1) >= nk) s[i] = kNegInf;
      }
      float rescale[2];
      online_softmax_fragment<kSAcc>(s, row_max, row_sum, rescale, scale_log2);
      pack_fragment<T, kSAcc>(pf, s);
#pragma unroll
      for (int i = 0; i < kSAcc / 2; ++i) sP[i * 128 + wg_tid] = pf[i];
      sScale[wg_tid] = make_float2(rescale[0], rescale[1]);
      named_barrier_arrive(kBarPFull, kThreads);
      if (__any_sync(0xffffffffu, rescale[0] != 1.f || rescale[1] != 1.f)) scale_fragment_rows(o, rescale);
      issue_pv<T>(o, pf, v_desc(j % 2));
      wgmma::wait_group<0>();
      named_barrier_arrive(kBarStageFree, kThreads);
    }
  }

  // ---- epilogue: warpgroup 0's (max, sum) to warpgroup 1 through P's room ----
  __syncthreads();  // warpgroup 1 has read the last P
  float4* sState = reinterpret_cast<float4*>(sP);
  if (wg == 0) {
    const float l0 = group_reduce_sum<4>(row_sum[0]), l1 = group_reduce_sum<4>(row_sum[1]);
    sState[wg_tid] = make_float4(row_max[0], l0, row_max[1], l1);
  }
  bad = __syncthreads_or(bad) != 0;
  const float4 st = sState[wg_tid];
  const float m[2] = {st.x, st.z}, l[2] = {st.y, st.w};
  mla_store_rows<T, kOAcc / 4>(p, b, head0, warp * 16 + g, rows_here, wg * kVCols + 2 * t4, split, range.eff, m, l,
                                bad, wg == 0 && t4 == 0,
                                [&](int n, int h) { return make_float2(o[4 * n + 2 * h], o[4 * n + 2 * h + 1]); });
#endif
}

}  // namespace cuda_llm_ops::decode::mla_sm90
