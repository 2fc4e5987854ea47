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
//    puts a thread block on every SM; a second kernel merges the splits with the
//    log-sum-exp rule (online_softmax_merge).
//  - Keys stream through a cp.async pipeline of STAGES tiles of 64 tokens
//    (16-byte copies, zero-filled past the end); each of the 4 warps owns 16
//    tokens of a tile and keeps its own online-softmax state, so the main loop
//    has a single barrier per tile; warps merge once at the end.
//  - Block-table entries for the tile after the one being issued are loaded into
//    registers one iteration ahead, so the gather never waits on the table.
#pragma once

#include <cmath>
#include <cstdlib>
#include <cstring>

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
  int64_t q_sb, q_sh, q_sn;
  int64_t o_sb, o_sh, o_sn;
  int num_q_heads, group, seq_len_q, rows, row_tiles;
  int num_splits;
  float scale_log2;
  bool causal;
  bool speculate;   // prologue table lookups before seq_len arrives (see the kernel)
  bool pdl_early;   // trigger the merge kernel's launch at the start, not after the loop (dev)
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

// Programmatic dependent launch (sm_90): the merge kernel is launched while the
// attention kernel drains and waits on the grid dependency instead of paying a
// full launch gap. No-ops on older archs and when launched without the attribute.
CLO_DEVICE void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}
CLO_DEVICE void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
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
  constexpr size_t epilogue = (kDecodeWarps + 1) * kRowsPerBlock * sizeof(float2) +
                              size_t(kDecodeWarps) * kRowsPerBlock * (D + 4) * sizeof(float);
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

  // Dev option (off: measured no better, NOTES.md v4): let the dependent merge
  // kernel launch as soon as every block has started instead of after the loop.
  if (p.pdl_early) pdl_launch_dependents();

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
  if (p.speculate) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) lookup_at(spec_start, kv.capacity(), s, first[s]);
  }

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
  if (!p.speculate || start != spec_start) {
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
  if (!p.pdl_early) pdl_launch_dependents();

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
  for (int idx = tid; idx < kRowsPerBlock * D; idx += kDecodeThreads) {
    const int r = idx / D, d = idx % D;
    const int gr = row_tile * kRowsPerBlock + r;
    if (gr >= p.rows) continue;
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) acc += obuf[(w * kRowsPerBlock + r) * kOStride + d];
    const float2 st = merged_state[r];
    const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
    if (p.num_splits == 1) {
      const float val = bad ? nan : acc * (st.y > 0.f ? 1.f / st.y : 0.f);
      static_cast<T*>(p.out)[b * p.o_sb + head * p.o_sh + qi * p.o_sn + d] = from_float<T>(val);
    } else {
      const int64_t row_id = (static_cast<int64_t>(b) * p.num_q_heads + head) * p.seq_len_q + qi;
      const int64_t slot = split * p.total_rows + row_id;
      p.partial_o[slot * D + d] = bad ? nan : acc;
      if (d == 0) p.partial_state[slot] = bad ? make_float2(nan, nan) : st;
    }
  }
}

// Log-sum-exp merge of the splits' partial outputs: one warp per query row.
// The splits' states are read by all lanes at once (not one split after another:
// a serial chain of dependent loads made this kernel ~1 us per split), reduced to
// the row's max and sum with shuffles, and the per-split weights staged in shared
// memory so the partial-output loads of all splits are independent.
template <typename T>
__global__ void __launch_bounds__(128)
    decode_merge_kernel(const float* __restrict__ partial_o, const float2* __restrict__ partial_state,
                        int num_splits, int64_t total_rows, int head_dim, int num_q_heads, int seq_len_q,
                        void* out, int64_t o_sb, int64_t o_sh, int64_t o_sn) {
  __shared__ float split_weight[4][kMaxSplits];
  pdl_wait_primary();  // the attention kernel's partials are complete and visible
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + warp;
  if (row >= total_rows) return;  // warp-uniform; no block barrier below
  float m_lane = kNegInf;
  bool nan_seen = false;
  for (int s = lane; s < num_splits; s += 32) {
    const float2 ps = partial_state[s * total_rows + row];
    if (ps.y != ps.y) nan_seen = true;              // a bad index upstream: the row becomes NaN
    else if (ps.y > 0.f) m_lane = fmaxf(m_lane, ps.x);  // empty splits (sum 0) do not count
  }
  const float m_all = warp_reduce_max(m_lane);
  nan_seen = __any_sync(0xffffffffu, nan_seen);
  float l_lane = 0.f;
  for (int s = lane; s < num_splits; s += 32) {
    const float2 ps = partial_state[s * total_rows + row];
    const float w = (ps.y > 0.f) ? exp2f(ps.x - m_all) : 0.f;
    split_weight[warp][s] = w;
    l_lane += ps.y > 0.f ? ps.y * w : 0.f;
  }
  const float l_all = warp_reduce_sum(l_lane);
  __syncwarp();
  constexpr int kPerLane = 256 / 32;
  float acc[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.f;
#pragma unroll 4
  for (int s = 0; s < num_splits; ++s) {
    const float w = split_weight[warp][s];
    if (w == 0.f) continue;  // warp-uniform (shared value)
    const float* po = partial_o + (s * total_rows + row) * head_dim;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < head_dim) acc[k] += po[d] * w;
    }
  }
  const float inv = nan_seen ? __int_as_float(0x7fc00000) : (l_all > 0.f ? 1.f / l_all : 0.f);
  const int qi = static_cast<int>(row % seq_len_q);
  const int64_t bh = row / seq_len_q;
  const int head = static_cast<int>(bh % num_q_heads);
  const int64_t b = bh / num_q_heads;
  T* o = static_cast<T*>(out) + b * o_sb + head * o_sh + qi * o_sn;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < head_dim) o[d] = from_float<T>(acc[k] * inv);
  }
}

// Programmatic dependent launch needs sm_90; cached per device.
inline bool device_supports_pdl() {
  static int cached[64] = {0};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev < 0 || dev >= 64) return false;
  if (cached[dev] == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cached[dev] = major >= 9 ? 2 : 1;
  }
  return cached[dev] == 2;
}

// Development overrides, read on every call so one benchmark process can compare
// variants on the same inputs (scripts/bench_decode_dev.py): CLO_DECODE_SPECULATE
// = 0 | 1 (default 1), CLO_DECODE_PDL_EARLY = 0 | 1 (default 0). NOTES.md, v4.
inline int decode_env_knob(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::atoi(v);
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
  p.speculate = decode_env_knob("CLO_DECODE_SPECULATE", 1) != 0;
  p.pdl_early = decode_env_knob("CLO_DECODE_PDL_EARLY", 0) != 0;
  p.total_rows = static_cast<int64_t>(a.batch) * a.num_q_heads * a.seq_len_q;
  if (a.num_splits > 1) {
    const int64_t need = decode_attention_workspace_floats(a.batch, a.num_q_heads, a.seq_len_q, D, a.num_splits);
    if (a.workspace == nullptr || a.workspace_floats < need) return cudaErrorInvalidValue;
    p.partial_o = a.workspace;
    p.partial_state = reinterpret_cast<float2*>(a.workspace + a.num_splits * p.total_rows * D);
  }
  const dim3 grid(a.num_kv_heads * p.row_tiles, a.batch, a.num_splits);
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
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || a.num_splits == 1) return err;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(div_ceil<int64_t>(p.total_rows, 4)));
  cfg.blockDim = dim3(128);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = device_supports_pdl() ? 1 : 0;
  const float* po = p.partial_o;
  const float2* ps = p.partial_state;
  return cudaLaunchKernelEx(&cfg, decode_merge_kernel<T>, po, ps, a.num_splits, p.total_rows, static_cast<int>(D),
                            a.num_q_heads, a.seq_len_q, a.out, a.o_stride_b, a.o_stride_h, a.o_stride_n);
}

#define CLO_INSTANTIATE_DECODE(T, D)                                                                    \
  template cudaError_t run_decode_attention<T, D, true>(const DecodeAttentionArgs&, cudaStream_t);     \
  template cudaError_t run_decode_attention<T, D, false>(const DecodeAttentionArgs&, cudaStream_t);

}  // namespace cuda_llm_ops::decode
