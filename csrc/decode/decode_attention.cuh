// Split-KV decode attention (flash-decoding) on tensor cores, one kernel template
// for two KV layouts chosen by an addressing policy:
//   PagedKV   - k/v cache [num_blocks, block_size, Hkv, D] reached through an
//               int32 block table (vLLM's PagedAttention layout);
//   StridedKV - k/v [B, Hkv, Nk, D] addressed by strides (contiguous caches,
//               flash_attention with few query rows).
//
// Work decomposition (why): decode is memory-bound (~1 FLOP/byte), so the one
// goal is to stream every K/V element from HBM exactly once, with enough bytes
// in flight to cover DRAM latency on every SM.
//  - One thread block serves a KV head and up to 16 query rows: all Hq/Hkv query
//    heads of that KV head times the Nq query positions (GQA: each KV element is
//    read once, not once per query head). The 16 rows are one m16 tile of
//    mma.sync m16n8k16; padding rows (e.g. 4 heads of GQA 32/8) cost tensor-core
//    slots, which are idle in a memory-bound kernel anyway.
//  - grid.z splits the sequence (flash-decoding) so that B=1 at 16K context still
//    puts a thread block on every SM. The merge is fused: each split writes its
//    partial (o, max, sum) to the workspace and counts itself in on a per-(batch,
//    KV head, row tile) counter; the block that arrives last merges the splits
//    (log-sum-exp rule) and resets the counter to 0. A separate merge kernel cost
//    ~9 us end to end at B=1/16K (launch, grid dependency, second pass; NOTES.md).
//  - Keys stream through a cp.async pipeline of STAGES tiles of 64 tokens
//    (16-byte copies, zero-filled past the end); each of the 4 warps owns 16
//    tokens of a tile and keeps its own online-softmax state, so the main loop
//    has a single barrier per tile; warps merge once at the end.
//  - Block-table entries for the tile after the one being issued are loaded into
//    registers one iteration ahead, so the gather never waits on the table.
#pragma once

#include <cmath>

#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"
#include "decode/decode_internal.h"

namespace cuda_llm_ops::decode {

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
static_assert(kTileTokens == 16 * kDecodeWarps, "each warp owns 16 keys of a tile");

struct DecodeKernelParams {
  const void* q;
  void* out;
  float* partial_o;        // [splits, total_rows, D] (num_splits > 1)
  float2* partial_state;   // [splits, total_rows] (max, sum) in the log2 domain
  int* split_counters;     // [B * gridDim.x] splits done per (batch, KV head, row tile); 0 between calls
  int64_t q_sb, q_sh, q_sn;
  int64_t o_sb, o_sh, o_sn;
  int num_q_heads, group, seq_len_q, rows, row_tiles;
  int num_splits;
  float scale_log2;
  bool causal;
  int64_t total_rows;  // B * Hq * Nq
};

// 16-byte cp.async (L2 only) with an L2 prefetch-size hint: a miss fetches the
// whole 128/256-byte line, so the key/value rows (128-512 bytes each, scattered
// over the cache) become full-line DRAM reads. Zero-fills when !valid.
template <int kPrefetchBytes>
CLO_DEVICE void cp_async_16_prefetch(void* smem_dst, const void* gmem_src, bool valid) {
  const uint32_t dst = smem_u32addr(smem_dst);
  const int src_bytes = valid ? 16 : 0;
  if constexpr (kPrefetchBytes >= 256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes));
  } else {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes));
  }
}

// ---- KV addressing policies -------------------------------------------------
// A policy gives the keys' count for a batch entry and a per-(batch, KV head)
// cursor with: lookup(pos) (what the gather must know ahead: the physical block),
// entry_ok(entry) and the element offsets of key/value `pos`.

struct PagedKV {
  const void* k;
  const void* v;
  const int* block_tables;
  int64_t table_stride;
  int max_blocks;
  int num_blocks;
  int log2_block_size;
  int64_t block_stride;  // elements between physical blocks: block_size * Hkv * D
  int64_t token_stride;  // Hkv * D
  int head_dim;
  const int* seq_lens;

  struct Cursor {
    const int* table;
    int64_t head_off, block_stride, token_stride;
    int log2_bs, bs_mask;
    unsigned num_blocks;
    CLO_DEVICE int lookup(int pos) const { return __ldg(table + (pos >> log2_bs)); }
    // One unsigned compare also rejects negative entries.
    CLO_DEVICE bool entry_ok(int e) const { return static_cast<unsigned>(e) < num_blocks; }
    CLO_DEVICE int64_t k_offset(int e, int pos) const {
      return e * block_stride + (pos & bs_mask) * token_stride + head_off;
    }
    CLO_DEVICE int64_t v_offset(int e, int pos) const { return k_offset(e, pos); }
  };

  CLO_DEVICE Cursor cursor(int b, int kvh) const {
    return {block_tables + b * table_stride, static_cast<int64_t>(kvh) * head_dim, block_stride, token_stride,
            log2_block_size, (1 << log2_block_size) - 1, static_cast<unsigned>(num_blocks)};
  }
  // Keys the table can address: an upper bound of every seq_len.
  CLO_DEVICE int capacity() const { return max_blocks << log2_block_size; }
  CLO_DEVICE int load_len(int b) const { return __ldg(seq_lens + b); }
  // seq_len outside [0, table capacity] cannot be served without reading past
  // the table: flag it (the output becomes NaN) and read nothing.
  CLO_DEVICE int check_len(int n, bool& bad) const {
    if (n < 0 || n > capacity()) {
      bad = true;
      return 0;
    }
    return n;
  }
};

struct StridedKV {
  const void* k;
  const void* v;
  int64_t k_sb, k_sh, k_sn, v_sb, v_sh, v_sn;
  int seq_len_k;

  struct Cursor {
    int64_t k_base, v_base, k_sn, v_sn;
    CLO_DEVICE int lookup(int) const { return 0; }
    CLO_DEVICE bool entry_ok(int) const { return true; }
    CLO_DEVICE int64_t k_offset(int, int pos) const { return k_base + pos * k_sn; }
    CLO_DEVICE int64_t v_offset(int, int pos) const { return v_base + pos * v_sn; }
  };
  CLO_DEVICE Cursor cursor(int b, int kvh) const {
    return {b * k_sb + kvh * k_sh, b * v_sb + kvh * v_sh, k_sn, v_sn};
  }
  CLO_DEVICE int capacity() const { return seq_len_k; }
  CLO_DEVICE int load_len(int) const { return seq_len_k; }
  CLO_DEVICE int check_len(int n, bool&) const { return n; }
};

// ---- shared-memory plan (host and device) -----------------------------------
// Pipeline depth. Deeper pipelines (6 stages at D=128, one block per SM) were
// measured 5-20% slower on every shape, small grids included (NOTES.md, v4).
template <int D>
constexpr int decode_stages() {
  return D <= 64 ? 4 : (D <= 128 ? 3 : 2);
}
// +8 elements (16 bytes) per row: 8 consecutive rows of an ldmatrix hit 8
// distinct 16-byte bank groups for every D here.
template <int D>
constexpr int decode_smem_stride() {
  return D + 8;
}
template <typename T, int D, int kStages>
constexpr size_t decode_smem_bytes() {
  constexpr size_t pipeline = size_t(kStages) * 2 * kTileTokens * decode_smem_stride<D>() * sizeof(T);
  constexpr size_t warp_merge = (kDecodeWarps + 1) * kRowsPerBlock * sizeof(float2) +
                                size_t(kDecodeWarps) * kRowsPerBlock * (D + 4) * sizeof(float);
  constexpr size_t split_merge = size_t(kRowsPerBlock) * (kMaxSplits + 1) * sizeof(float);
  constexpr size_t epilogue = warp_merge > split_merge ? warp_merge : split_merge;
  return size_t(kRowsPerBlock) * decode_smem_stride<D>() * sizeof(T) + (pipeline > epilogue ? pipeline : epilogue);
}

// Splits actually used for a sequence of n keys: never more than its 64-key tiles.
CLO_DEVICE int effective_splits(int num_splits, int n) {
  const int tiles = div_ceil(n, kTileTokens);
  return max(1, min(num_splits, tiles));
}
// Keys per split (64-aligned) for a sequence of n keys.
CLO_DEVICE int split_tokens(int num_splits, int n) {
  return div_ceil(div_ceil(n, effective_splits(num_splits, n)), kTileTokens) * kTileTokens;
}

template <typename T, int D, int kStages, class KV>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_attention_kernel(const DecodeKernelParams p, const KV kv) {
  static_assert(kStages >= 2, "the pipeline needs two stages");
  constexpr int kStride = decode_smem_stride<D>();
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
  constexpr int kLoads = kTileTokens * kChunksPerRow / kDecodeThreads;
  static_assert(kTileTokens * kChunksPerRow % kDecodeThreads == 0, "tile must split evenly over threads");
  static_assert(D % 16 == 0 && D <= 256, "head_dim must be a multiple of 16 up to 256");
  constexpr int kTileElems = kTileTokens * kStride;
  constexpr int kDTiles = D / 8;
  constexpr int kRowBytes = D * static_cast<int>(sizeof(T));

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* kv_s = q_s + kRowsPerBlock * kStride;  // [stages][K, V][64][kStride]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int kvh = blockIdx.x / p.row_tiles, row_tile = blockIdx.x % p.row_tiles;
  const int b = blockIdx.y, split = blockIdx.z;

  const auto cur = kv.cursor(b, kvh);
  const int len_raw = kv.load_len(b);
  // Start-up chain: seq_len -> block table -> first K/V tile, three dependent DRAM
  // round trips. The table lookups of the first tiles are issued before seq_len
  // arrives, assuming the sequence fills the table (split 0 always starts at key 0;
  // other splits start where a full table would put them). Entries are loaded for
  // every position below the table capacity, so they cover any real end; a wrong
  // guess of the start is redone below (one round trip, as without speculation).
  const int spec_start = split * split_tokens(p.num_splits, kv.capacity());
  int first[kStages - 1][kLoads];
  auto lookup_at = [&](int base, int limit, int tile, int (&ent)[kLoads]) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int pos = base + tile * kTileTokens + (tid + i * kDecodeThreads) / kChunksPerRow;
      ent[i] = pos < limit ? cur.lookup(pos) : 0;
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) lookup_at(spec_start, kv.capacity(), s, first[s]);

  // Query rows of this block: row r <-> (query head kvh*group + r_global / Nq, position r_global % Nq).
  for (int c = tid; c < kRowsPerBlock * kChunksPerRow; c += kDecodeThreads) {
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    const int gr = row_tile * kRowsPerBlock + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (gr < p.rows) {
      const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
      const T* src = static_cast<const T*>(p.q) + b * p.q_sb + head * p.q_sh + qi * p.q_sn + ch * 8;
      val = *reinterpret_cast<const uint4*>(src);
    }
    *reinterpret_cast<uint4*>(q_s + r * kStride + ch * 8) = val;
  }
  bool bad = false;
  const int kv_len = kv.check_len(len_raw, bad);
  const int eff = effective_splits(p.num_splits, kv_len);
  const int tokens_per_split = split_tokens(p.num_splits, kv_len);
  const int start = split * tokens_per_split;
  const int end = split < eff ? min(kv_len, start + tokens_per_split) : start;
  const int n_tiles = end > start ? div_ceil(end - start, kTileTokens) : 0;
  if (start != spec_start) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) lookup_at(start, end, s, first[s]);
  }

  // Last key each of this lane's two rows (g, g + 8) may see.
  int limit[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int gr = row_tile * kRowsPerBlock + g + 8 * i;
    const int qi = gr < p.rows ? gr % p.seq_len_q : p.seq_len_q - 1;
    limit[i] = p.causal ? qi + kv_len - p.seq_len_q : kv_len - 1;
  }

  const T* k_base = static_cast<const T*>(kv.k);
  const T* v_base = static_cast<const T*>(kv.v);

  // pos < end implies tile < n_tiles.
  auto lookup_tile = [&](int tile, int (&ent)[kLoads]) { lookup_at(start, end, tile, ent); };
  auto issue_tile = [&](int tile, int stage, const int (&entries)[kLoads]) {
    T* ks = kv_s + stage * 2 * kTileElems;
    T* vs = ks + kTileElems;
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int c = tid + i * kDecodeThreads;
      const int tok = c / kChunksPerRow, ch = c % kChunksPerRow;
      const int pos = start + tile * kTileTokens + tok;
      bool valid = pos < end;
      const int e = entries[i];
      if (valid && !cur.entry_ok(e)) {
        bad = true;
        valid = false;
      }
      const T* ksrc = valid ? k_base + cur.k_offset(e, pos) + ch * 8 : k_base;
      const T* vsrc = valid ? v_base + cur.v_offset(e, pos) + ch * 8 : v_base;
      cp_async_16_prefetch<kRowBytes>(ks + tok * kStride + ch * 8, ksrc, valid);
      cp_async_16_prefetch<kRowBytes>(vs + tok * kStride + ch * 8, vsrc, valid);
    }
  };

  // Prologue: the first stages' table entries (above, one round trip), then their
  // copies; the entries of the next tile load meanwhile.
  int entries[kLoads];
  {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_tiles) issue_tile(s, s, first[s]);
      cp_async_commit();
    }
    lookup_tile(kStages - 1, entries);
  }

  float o[kDTiles][4];
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // this lane's share; summed over the quad at the end

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t visible to all; stage (t-1) % kStages free to overwrite
    {
      const int nt = t + kStages - 1;
      if (nt < n_tiles) issue_tile(nt, nt % kStages, entries);
      lookup_tile(nt + 1, entries);
      cp_async_commit();
    }
    const int tok0 = start + t * kTileTokens + warp * 16;
    if (tok0 >= end) continue;  // this warp's 16 keys are all past the end (warp-uniform)
    const T* ks = kv_s + (t % kStages) * 2 * kTileElems + warp * 16 * kStride;
    const T* vs = ks + kTileElems;

    // S = Q K^T for 16 rows x 16 keys.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4], bk[4];
      ldmatrix_x4(a, q_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kStride + kk * 16 + (lane >> 4) * 8);
      ldmatrix_x4(bk, ks + ((lane & 7) + (lane >> 4) * 8) * kStride + kk * 16 + ((lane >> 3) & 1) * 8);
      const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
      mma_m16n8k16<T>(s[0], a, b0);
      mma_m16n8k16<T>(s[1], a, b1);
    }

    // Mask, scale into the log2 domain, online softmax per row.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pos = tok0 + j * 8 + 2 * t4 + (e & 1);
        const float x = pos <= limit[e >> 1] ? s[j][e] * p.scale_log2 : -INFINITY;
        s[j][e] = x;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], x);
      }
    float rescale[2], m_sub[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
      const float m_new = fmaxf(row_max[i], tile_max[i]);
      // A row with no visible key yet keeps m = -inf; subtracting 0 then makes
      // every exp2 exactly 0 instead of exp2(-inf + inf) = NaN.
      m_sub[i] = m_new == -INFINITY ? 0.f : m_new;
      rescale[i] = exp2f(row_max[i] - m_sub[i]);
      row_max[i] = m_new;
      row_sum[i] *= rescale[i];
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = exp2f(s[j][e] - m_sub[e >> 1]);
        s[j][e] = pe;
        row_sum[e >> 1] += pe;
      }
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
      o[n][0] *= rescale[0];
      o[n][1] *= rescale[0];
      o[n][2] *= rescale[1];
      o[n][3] *= rescale[1];
    }

    // O += P V: P (16 x 16 keys) from the S accumulators as the A operand.
    uint32_t pa[4];
    pa[0] = pack_float2<T>(s[0][0], s[0][1]);
    pa[1] = pack_float2<T>(s[0][2], s[0][3]);
    pa[2] = pack_float2<T>(s[1][0], s[1][1]);
    pa[3] = pack_float2<T>(s[1][2], s[1][3]);
#pragma unroll
    for (int dn = 0; dn < D / 16; ++dn) {
      uint32_t bv[4];
      ldmatrix_x4_trans(bv, vs + ((lane & 7) + ((lane >> 3) & 1) * 8) * kStride + dn * 16 + (lane >> 4) * 8);
      const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
      mma_m16n8k16<T>(o[2 * dn], pa, b0);
      mma_m16n8k16<T>(o[2 * dn + 1], pa, b1);
    }
  }
  cp_async_wait_all();

  // ---- epilogue: merge the 4 warps' states, write the output or the split's partials.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 1);
    row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], 2);
  }
  bad = __syncthreads_or(bad);  // also: every warp is done with the pipeline buffers
  float2* warp_state = reinterpret_cast<float2*>(kv_s);          // [warps][16]
  float2* merged_state = warp_state + kDecodeWarps * kRowsPerBlock;  // [16]
  float* obuf = reinterpret_cast<float*>(merged_state + kRowsPerBlock);  // [warps][16][D + 4]
  constexpr int kOStride = D + 4;
  const float my_max[2] = {row_max[0] == -INFINITY ? kNegInf : row_max[0],
                           row_max[1] == -INFINITY ? kNegInf : row_max[1]};
  if (t4 == 0) {
    warp_state[warp * kRowsPerBlock + g] = make_float2(my_max[0], row_sum[0]);
    warp_state[warp * kRowsPerBlock + g + 8] = make_float2(my_max[1], row_sum[1]);
  }
  __syncthreads();
  float weight[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = g + 8 * i;
    OnlineSoftmaxState st = OnlineSoftmaxState::empty();
    float m_all = kNegInf;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) m_all = fmaxf(m_all, warp_state[w * kRowsPerBlock + r].x);
    weight[i] = exp2f(my_max[i] - m_all);
    if (warp == 0 && t4 == 0) {
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float2 ws = warp_state[w * kRowsPerBlock + r];
        float wa, wb;
        st = online_softmax_merge(st, OnlineSoftmaxState{ws.x, ws.y}, wa, wb);
      }
      merged_state[r] = make_float2(st.max_val, st.sum_exp);
    }
  }
  float* ob = obuf + warp * kRowsPerBlock * kOStride;
#pragma unroll
  for (int n = 0; n < kDTiles; ++n) {
    const int col = n * 8 + 2 * t4;
    *reinterpret_cast<float2*>(ob + g * kOStride + col) = make_float2(o[n][0] * weight[0], o[n][1] * weight[0]);
    *reinterpret_cast<float2*>(ob + (g + 8) * kOStride + col) =
        make_float2(o[n][2] * weight[1], o[n][3] * weight[1]);
  }
  __syncthreads();

  const float nan = __int_as_float(0x7fc00000);
  constexpr int kD4 = D / 4;  // float4 columns
  if (p.num_splits == 1) {
    for (int idx = tid; idx < kRowsPerBlock * kD4; idx += kDecodeThreads) {
      const int r = idx / kD4, d = (idx % kD4) * 4;
      const int gr = row_tile * kRowsPerBlock + r;
      if (gr >= p.rows) continue;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float4 x = *reinterpret_cast<const float4*>(obuf + (w * kRowsPerBlock + r) * kOStride + d);
        acc.x += x.x;
        acc.y += x.y;
        acc.z += x.z;
        acc.w += x.w;
      }
      const float2 st = merged_state[r];
      const float inv = bad ? nan : (st.y > 0.f ? 1.f / st.y : 0.f);
      const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
      *reinterpret_cast<uint2*>(static_cast<T*>(p.out) + b * p.o_sb + head * p.o_sh + qi * p.o_sn + d) =
          make_uint2(pack_float2<T>(acc.x * inv, acc.y * inv), pack_float2<T>(acc.z * inv, acc.w * inv));
    }
    return;
  }

  // ---- split-KV: write this split's partials (splits past the sequence's last
  // tile have none), then count the split in; the last of the (batch, KV head,
  // row tile)'s num_splits blocks merges. No block ever waits for another.
  const int rows_here = min(kRowsPerBlock, p.rows - row_tile * kRowsPerBlock);
  if (split < eff) {
    for (int idx = tid; idx < rows_here * kD4; idx += kDecodeThreads) {
      const int r = idx / kD4, d = (idx % kD4) * 4;
      const int gr = row_tile * kRowsPerBlock + r;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float4 x = *reinterpret_cast<const float4*>(obuf + (w * kRowsPerBlock + r) * kOStride + d);
        acc.x += x.x;
        acc.y += x.y;
        acc.z += x.z;
        acc.w += x.w;
      }
      if (bad) acc = make_float4(nan, nan, nan, nan);
      const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
      const int64_t row_id = (static_cast<int64_t>(b) * p.num_q_heads + head) * p.seq_len_q + qi;
      const int64_t slot = split * p.total_rows + row_id;
      *reinterpret_cast<float4*>(p.partial_o + slot * D + d) = acc;
      if (d == 0) p.partial_state[slot] = bad ? make_float2(nan, nan) : merged_state[r];
    }
  }
  // Release: every thread's partials are visible device-wide before the count.
  __threadfence();
  __syncthreads();  // all partials fenced; every thread is done with warp_state / obuf
  bool last = false;
  if (tid == 0) {
    int* counter = p.split_counters + static_cast<int64_t>(b) * gridDim.x + blockIdx.x;
    last = atomicAdd(counter, 1) == p.num_splits - 1;
    if (last) {
      atomicExch(counter, 0);  // every block of the group has counted: ready for the next call / replay
      __threadfence();         // acquire: the other splits' partials (read below through L2)
    }
  }
  if (!__syncthreads_or(last)) return;

  // Merge (log-sum-exp) the eff splits of this tile's rows. Partials are read with
  // ld.global.cg: written by other SMs during this kernel, so never through L1.
  float* split_w = reinterpret_cast<float*>(kv_s);           // [16][kMaxSplits]
  float* row_inv = split_w + kRowsPerBlock * kMaxSplits;      // [16]
  constexpr int kSplitsPerLane = kMaxSplits / 32;
  for (int r = warp; r < rows_here; r += kDecodeWarps) {  // warp-uniform
    const int gr = row_tile * kRowsPerBlock + r;
    const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
    const int64_t row_id = (static_cast<int64_t>(b) * p.num_q_heads + head) * p.seq_len_q + qi;
    float2 ps[kSplitsPerLane];
#pragma unroll
    for (int i = 0; i < kSplitsPerLane; ++i) {
      const int s = lane + 32 * i;
      ps[i] = s < eff ? __ldcg(p.partial_state + s * p.total_rows + row_id) : make_float2(kNegInf, 0.f);
    }
    float m_lane = kNegInf;
    bool nan_seen = false;
#pragma unroll
    for (int i = 0; i < kSplitsPerLane; ++i) {
      if (ps[i].y != ps[i].y) nan_seen = true;                  // a bad index: the row becomes NaN
      else if (ps[i].y > 0.f) m_lane = fmaxf(m_lane, ps[i].x);  // splits that saw no key do not count
    }
    const float m_all = warp_reduce_max(m_lane);
    nan_seen = __any_sync(0xffffffffu, nan_seen);
    float l_lane = 0.f;
#pragma unroll
    for (int i = 0; i < kSplitsPerLane; ++i) {
      const int s = lane + 32 * i;
      const float w = ps[i].y > 0.f ? exp2f(ps[i].x - m_all) : 0.f;
      if (s < eff) split_w[r * kMaxSplits + s] = w;
      l_lane += ps[i].y > 0.f ? ps[i].y * w : 0.f;
    }
    const float l_all = warp_reduce_sum(l_lane);
    if (lane == 0) row_inv[r] = nan_seen ? nan : (l_all > 0.f ? 1.f / l_all : 0.f);
  }
  __syncthreads();
  const int64_t split_stride = p.total_rows * D;
  for (int idx = tid; idx < rows_here * kD4; idx += kDecodeThreads) {
    const int r = idx / kD4, d = (idx % kD4) * 4;
    const int gr = row_tile * kRowsPerBlock + r;
    const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
    const int64_t row_id = (static_cast<int64_t>(b) * p.num_q_heads + head) * p.seq_len_q + qi;
    const float* po = p.partial_o + row_id * D + d;
    const float* w_row = split_w + r * kMaxSplits;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < eff; ++s) {  // independent L2 loads: 8 in flight per thread
      const float w = w_row[s];
      const float4 x = __ldcg(reinterpret_cast<const float4*>(po + s * split_stride));
      acc.x += w * x.x;
      acc.y += w * x.y;
      acc.z += w * x.z;
      acc.w += w * x.w;
    }
    const float inv = row_inv[r];
    *reinterpret_cast<uint2*>(static_cast<T*>(p.out) + b * p.o_sb + head * p.o_sh + qi * p.o_sn + d) =
        make_uint2(pack_float2<T>(acc.x * inv, acc.y * inv), pack_float2<T>(acc.z * inv, acc.w * inv));
  }
}

template <typename T, int D, class KV>
cudaError_t launch_decode_attention_kernel(const DecodeKernelParams& p, const KV& kv, dim3 grid,
                                           cudaStream_t stream) {
  constexpr int kStages = decode_stages<D>();
  constexpr size_t smem = decode_smem_bytes<T, D, kStages>();
  auto kernel = decode_attention_kernel<T, D, kStages, KV>;
  // Dynamic smem size and the largest smem carveout (a streaming kernel needs no
  // L1 share; two blocks per SM need 2 x 107 KB at D=128), once per device.
  static bool configured[64] = {false};
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    cudaError_t err = set_dynamic_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               static_cast<int>(cudaSharedmemCarveoutMaxShared));
    if (err != cudaSuccess) return err;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  kernel<<<grid, kDecodeThreads, smem, stream>>>(p, kv);
  return cudaSuccess;
}

template <typename T, int D, bool kPaged>
cudaError_t run_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  const int group = a.num_q_heads / a.num_kv_heads;
  DecodeKernelParams p{};
  p.q = a.q;
  p.out = a.out;
  p.q_sb = a.q_stride_b;
  p.q_sh = a.q_stride_h;
  p.q_sn = a.q_stride_n;
  p.o_sb = a.o_stride_b;
  p.o_sh = a.o_stride_h;
  p.o_sn = a.o_stride_n;
  p.num_q_heads = a.num_q_heads;
  p.group = group;
  p.seq_len_q = a.seq_len_q;
  p.rows = group * a.seq_len_q;
  p.row_tiles = div_ceil(p.rows, kRowsPerBlock);
  p.num_splits = a.num_splits;
  p.scale_log2 = a.scale * kLog2e;
  p.causal = a.causal;
  p.total_rows = static_cast<int64_t>(a.batch) * a.num_q_heads * a.seq_len_q;
  const dim3 grid(a.num_kv_heads * p.row_tiles, a.batch, a.num_splits);
  if (a.num_splits > 1) {
    // Workspace layout (decode.h): partials from the start, split counters in the
    // last decode_workspace_counter_slots(workspace_floats) slots.
    const int64_t partials = static_cast<int64_t>(a.num_splits) * p.total_rows * (D + 2);
    const int64_t counters = static_cast<int64_t>(grid.x) * grid.y;
    const int64_t slots = decode_workspace_counter_slots(a.workspace_floats);
    if (a.workspace == nullptr || reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0 || counters > slots ||
        partials > a.workspace_floats - slots)
      return cudaErrorInvalidValue;
    p.partial_o = a.workspace;
    p.partial_state = reinterpret_cast<float2*>(a.workspace + a.num_splits * p.total_rows * D);
    p.split_counters = reinterpret_cast<int*>(a.workspace + (a.workspace_floats - slots));
  }
  if constexpr (kPaged) {
    PagedKV kv{a.k, a.v, a.block_tables, a.table_stride, a.max_blocks_per_seq, a.num_blocks,
               __builtin_ctz(static_cast<unsigned>(a.block_size)),
               static_cast<int64_t>(a.block_size) * a.num_kv_heads * D,
               static_cast<int64_t>(a.num_kv_heads) * D, D, a.seq_lens};
    cudaError_t err = launch_decode_attention_kernel<T, D>(p, kv, grid, stream);
    if (err != cudaSuccess) return err;
  } else {
    StridedKV kv{a.k, a.v, a.k_stride_b, a.k_stride_h, a.k_stride_n, a.v_stride_b, a.v_stride_h, a.v_stride_n,
                 a.seq_len_k};
    cudaError_t err = launch_decode_attention_kernel<T, D>(p, kv, grid, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

#define CLO_INSTANTIATE_DECODE(T, D)                                                                    \
  template cudaError_t run_decode_attention<T, D, true>(const DecodeAttentionArgs&, cudaStream_t);     \
  template cudaError_t run_decode_attention<T, D, false>(const DecodeAttentionArgs&, cudaStream_t);

}  // namespace cuda_llm_ops::decode
