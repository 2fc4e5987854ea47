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
//    slots, which are idle in a memory-bound kernel anyway. On sm_90 a KV head of 17-32
//    rows may run as one block of two such tiles instead (the TMA kernel's kRowTiles,
//    decode_wide_rows_splits): 8 math warps over the same K/V tiles, so the keys are read
//    once per 32 rows rather than once per 16.
//  - grid.z splits the sequence (flash-decoding) so that B=1 at 16K context still
//    puts a thread block on every SM. The merge is fused: each split writes its
//    partial (o, max, sum) to the workspace and counts itself in on a per-(batch,
//    KV head, row tile) counter; the block that arrives last merges the splits
//    (log-sum-exp rule) and resets the counter to its idle value (kSplitCounterIdle).
//    A separate merge kernel cost ~9 us end to end at B=1/16K in v5 (launch, grid
//    dependency, second pass; NOTES.md); it now runs apart (decode_split_merge_kernel,
//    decode_balanced_merge_kernel, PDL) only on the 16-bit TMA kernel without head pairs,
//    where the last block's fold would take more L2 round trips than a launch costs
//    (decode_merge_apart_pays).
//  - Keys stream through a cp.async pipeline of STAGES tiles of 64 tokens
//    (16-byte copies, zero-filled past the end); each of the 4 warps owns 16
//    tokens of a tile and keeps its own online-softmax state, so the main loop
//    has a single barrier per tile; warps merge once at the end.
//  - Block-table entries for the tile after the one being issued are loaded into
//    registers one iteration ahead, so the gather never waits on the table.
#pragma once

#include <climits>
#include <cmath>

#include <type_traits>

#include "cuda_llm_ops/cluster.cuh"
#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/fp8.cuh"
#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"
#include "decode/decode_internal.h"
#include "decode/split_merge.cuh"

namespace cuda_llm_ops::decode {

// Dev builds only (CUDA_LLM_OPS_DEV_DEFINES=CLO_DEV_CHAOS): a pseudo-random per-lane delay
// (a quarter of the calls, up to ~4 us) at each hand-off of the pipelines and the epilogue,
// so a missing barrier or a wrong mbarrier parity shows up in plain runs as a wrong or
// unrepeatable result, without a sanitizer's own timing (NOTES.md v27).
#ifdef CLO_DEV_CHAOS
CLO_DEVICE void decode_dev_chaos(unsigned site) {
  unsigned x = static_cast<unsigned>(clock64()) ^ (threadIdx.x * 0x9E3779B9u) ^ (blockIdx.x * 0x85EBCA6Bu) ^
               (blockIdx.y * 0xC2B2AE35u) ^ (blockIdx.z * 0x165667B1u) ^ (site * 0x27D4EB2Fu);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  if ((x & 3u) == 0u) __nanosleep((x >> 4) % 4000u);
}
#define CLO_DEV_CHAOS_POINT(site) decode_dev_chaos(site)
#else
#define CLO_DEV_CHAOS_POINT(site) ((void)0)
#endif

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = kDecodeWarps * 32;
static_assert(kTileTokens == 16 * kDecodeWarps, "each warp owns 16 keys of a tile");

struct DecodeKernelParams {
#ifdef CLO_DEV_STAMPS
  // [blocks][kDecodeDevStamps] (TMA kernel): 0 %globaltimer after the PDL wait, 4 at the
  // end; %clock64 at 8 (with 0) and 9 (with 4), and at 1 first issue, 2 tile 0 landed,
  // 3 loop done, 5 seq_len and first table entry in registers, 6 after the start-up
  // barrier (q in smem), 7 last tile landed, 10 and 11 after the epilogue's two barriers,
  // 12-14 after the last tile's QK^T, softmax, PV (thread 0), 15-17 the 1-split output's
  // index math, warp merge, store; with splits 15 partials stored, 16 counted in (thread
  // 0), 17 merge done (0 in the blocks that did not merge), 18 and 19 thread 0's first
  // item folded and stored (the merger), 20 the SM id + 1: the host maps clocks
  // to ns per block
  unsigned long long* dev_stamps;
#endif
  const void* q;
  void* out;
  float* partial_o;        // [splits, total_rows, D] (num_splits > 1)
  float2* partial_state;   // [splits, total_rows] (max, sum) in the log2 domain
  int* split_counters;     // [B * units_x] splits done per (batch, KV head, row tile); idle between calls
  int64_t q_sb, q_sh, q_sn;
  int64_t o_sb, o_sh, o_sn;
  int num_q_heads, group, seq_len_q, rows;
  int row_tiles;  // blocks per (batch, KV head, split): ceil(rows / 16), or / 32 (two row tiles per block)
  int num_splits;
  int batch;
  int units_x;  // KV heads x row tiles: the grid's x extent without the balanced schedule
  // Balanced schedule (decode_streamk_piece; 0: off): this many blocks share the
  // (batch, KV head, row tile) units' 64-key tiles equally, in order, each unit in at most
  // two pieces by capacity (units >= blocks; three for two-row-tile blocks from blocks / 2
  // units, decode_wide_rows_streamk_blocks) or three by length (decode_partial_slots(2)),
  // merged like 2 splits.
  int streamk_blocks;
  // ... shared by the keys each sequence reads, planned on the device from seq_lens
  // (decode_streamk_len_range; paged caches: the host does not see their lengths)
  bool streamk_by_len;
  // Spread tail (decode_spread_work; 0: off): a 1-D grid whose first spread_from blocks
  // run units 0 .. spread_from - 1 whole (one per SM) and whose later blocks run the
  // remaining units in num_splits even pieces each, beside them.
  int spread_from;
  float scale_log2;
  // Logit soft-capping: score (log2 domain) = cap_log2 * tanh(q.k * cap_scale) where
  // cap_scale = scale / cap and cap_log2 = cap * log2(e); cap_scale 0: off (q.k * scale_log2).
  float cap_scale, cap_log2;
  int window_left;  // < 0: no sliding window (DecodeAttentionArgs::window_left)
  float* lse;       // nullptr, or [total_rows] log-sum-exp of each row's scores (natural log)
  bool causal;
  int64_t total_rows;  // B * Hq * Nq
  // Head pairs (decode_packs_head_pairs, D = 128, 160 and 256 only): 0, or the real query
  // heads per KV head when this row_cols-wide "head" is two adjacent row_cols/2-wide KV heads
  // (64 on the D = 128 kernel, 72-80 on the D = 160 one, 88-96 on the D = 256 one). Query
  // row r then belongs to real KV head (r / Nq) / pack_group of the pair: its q fills that half of the columns (the other
  // half zero, so its scores see only its own head's keys) and only that half of its
  // output row is real. Partials are stored row_cols/2 wide.
  int pack_group;
  // Columns of the K/V rows (and of q and out rows): D, or a narrower head dim run on
  // this kernel (decode_kernel_head_dim; a multiple of 8). The tile's columns past it
  // are zero in shared memory (zero-filled copies, or TMA's out-of-bounds fill), as are
  // q's, so they add nothing to the scores; the output keeps only the real ones.
  int row_cols;
  // FP8 caches: V's dequantization scale, applied in decode_epilogue (K's is folded into
  // scale_log2 / cap_scale). Unused by 16-bit caches.
  float v_scale;
  // The split blocks (the even grid's; the balanced schedule's pieces of cut units) store
  // their partials and end; decode_split_merge_kernel (decode_balanced_merge_kernel),
  // launched after them, merges (decode_merge_apart_pays). False: the last block of each
  // unit merges (the split counters).
  bool merge_apart;
  // The even grid's num_splits (2 .. kDecodeMaxClusterSplits) blocks of a unit as one
  // thread-block cluster (1, 1, num_splits) (sm_90, decode_split_cluster_pays): each block leaves
  // its rows' (max, sum) and columns in its own smem and, after a cluster barrier, merges its
  // share of the rows from every block's smem (distributed shared memory). No partials, no
  // count, no merge kernel; merge_apart is false.
  bool split_cluster;
  // Launch only (the kernel never reads it): the even grid's KV heads 2k, 2k + 1 as one
  // thread-block cluster (2, 1, 1) (decode_head_clusters_pay).
  bool head_cluster;
};

// What a block computes: one (batch, KV head, row tile) unit's keys, or one piece of
// them. Without the balanced schedule, the block's own indices: split blockIdx.z of an
// even split of the sequence into num_splits. With it (decode_streamk_piece), a range of
// the unit's slots (by capacity: its tiles_cap tiles at the table's capacity, which
// decode_piece_key lays over the keys the sequence reads; by length: the tiles it reads)
// and which of the unit's pieces (at most two by capacity, three by length) it is.
struct DecodeWork {
  int kvh, row_tile, b;
  int unit_x;  // kvh * row_tiles + row_tile: the split counter's column
  int split, num_splits;
  int tile_lo, tile_hi;  // the balanced schedule's slots [tile_lo, tile_hi); tile_hi < 0: an even split
  int tiles_cap;         // the balanced schedule's slots per unit
};
CLO_DEVICE DecodeWork decode_block_work(const DecodeKernelParams& p) {
  DecodeWork w;
  w.unit_x = blockIdx.x;
  w.kvh = blockIdx.x / p.row_tiles;
  w.row_tile = blockIdx.x % p.row_tiles;
  w.b = blockIdx.y;
  w.split = blockIdx.z;
  w.num_splits = p.num_splits;
  w.tile_lo = 0;
  w.tile_hi = -1;
  w.tiles_cap = 0;
  return w;
}
// The spread tail's 1-D grid (p.spread_from > 0; the TMA kernel's kDecodeSpreadTail
// instance: a separate one, since data-dependent unit indices cost the other grids' kernels
// 5-45 registers): block i < spread_from runs unit i (units in batch-major order, as the
// split counters) whole; the later blocks run the units from spread_from on, num_splits
// consecutive blocks per unit, one even split each.
CLO_DEVICE DecodeWork decode_spread_work(const DecodeKernelParams& p) {
  const int i = blockIdx.x, piece = i - p.spread_from;
  const bool whole = piece < 0;
  const int unit = whole ? i : p.spread_from + piece / p.num_splits;
  DecodeWork w;
  w.b = unit / p.units_x;
  w.unit_x = unit % p.units_x;
  w.kvh = w.unit_x / p.row_tiles;
  w.row_tile = w.unit_x % p.row_tiles;
  w.split = whole ? 0 : piece % p.num_splits;
  w.num_splits = whole ? 1 : p.num_splits;
  w.tile_lo = 0;
  w.tile_hi = -1;
  w.tiles_cap = 0;
  return w;
}
// The balanced schedule: block blockIdx.x of streamk_blocks takes the slots [lo, hi) of
// the units' slots laid end to end (unit-major: batch, then KV head and row tile; a unit
// has one slot per 64-key tile of the table's capacity, known at launch, and its slots
// cover the keys it reads: decode_piece_key), lo = blockIdx.x * total / blocks. Every
// block then reads about the same number of keys, where an even grid leaves two units on some SMs and one on the others
// (NOTES.md v28). A block's range is one to two units long (blocks < units < 2 x blocks,
// decode_streamk_blocks), so a unit is cut at most once (two pieces) and a block runs at
// most three; or, for two-row-tile blocks below one unit per block (decode_wide_rows_streamk_blocks:
// blocks / 2 <= units < blocks), half a unit to one unit long, so a unit is cut at most twice
// (three pieces: decode_partial_slots(2)) and a block runs at most two. A piece's index in its
// unit and the unit's piece count come from the blocks' starts inside the unit (as by length).
// Its pieces are taken in order from `pos`, which this advances.
struct DecodeStreamKRange {
  int64_t pos, hi;
  int tiles_cap;  // > 0: a unit's slots are its capacity tiles; 0: the tiles it reads (by length)
  int64_t total;  // by length: every unit's slots
};
CLO_DEVICE DecodeStreamKRange decode_streamk_range(const DecodeKernelParams& p, int capacity) {
  const int tiles_cap = (capacity + kTileTokens - 1) / kTileTokens;
  const int64_t total = static_cast<int64_t>(p.batch) * p.units_x * tiles_cap;
  return {total * blockIdx.x / p.streamk_blocks, total * (blockIdx.x + 1) / p.streamk_blocks, tiles_cap, total};
}
// A piece's index in its unit and the unit's piece count, from the blocks' starts inside the unit
// (slots [unit_start, unit_start + unit_slots)); the piece starts at slot r.pos. Both plans.
CLO_DEVICE void decode_streamk_piece_splits(const DecodeKernelParams& p, const DecodeStreamKRange& r,
                                            int64_t unit_start, int64_t unit_slots, DecodeWork& w) {
  // #{i >= 0 : total * i / blocks <= x}: the blocks' starts at or before slot x
  const int64_t blocks = p.streamk_blocks;
  auto starts_upto = [&](int64_t x) { return div_ceil((x + 1) * blocks, r.total); };
  const int64_t before = starts_upto(unit_start);
  w.split = static_cast<int>(starts_upto(r.pos) - before);
  w.num_splits = static_cast<int>(starts_upto(unit_start + unit_slots - 1) - before) + 1;
}
CLO_DEVICE DecodeWork decode_streamk_piece(const DecodeKernelParams& p, DecodeStreamKRange& r) {
  const int64_t unit = r.pos / r.tiles_cap, unit_start = unit * r.tiles_cap;
  DecodeWork w;
  w.tile_lo = static_cast<int>(r.pos - unit_start);
  w.tile_hi = static_cast<int>(min(r.hi, unit_start + r.tiles_cap) - unit_start);
  w.tiles_cap = r.tiles_cap;
  w.b = static_cast<int>(unit / p.units_x);
  w.unit_x = static_cast<int>(unit % p.units_x);
  w.kvh = w.unit_x / p.row_tiles;
  w.row_tile = w.unit_x % p.row_tiles;
  decode_streamk_piece_splits(p, r, unit_start, r.tiles_cap, w);
  r.pos = unit_start + w.tile_hi;
  return w;
}

// The kernels that run head pairs (decode_packs_head_pairs; 160: 16-bit head dims 72-80 only,
// decode_pair_kernel_head_dim).
template <int D>
constexpr bool decode_runs_head_pairs() {
  return D == 128 || D == 160 || D == 256;
}
// Columns of one real head row: row_cols, or half of them for head pairs (also the
// partials' width).
template <int D>
CLO_DEVICE int decode_head_cols(const DecodeKernelParams& p) {
  if constexpr (decode_runs_head_pairs<D>()) return p.pack_group > 0 ? p.row_cols / 2 : p.row_cols;
  return p.row_cols;
}
// The column of row gr's own head that column d of the block's D-wide row is, or -1
// where d belongs to the other head of a pair or lies past a narrower head's row_cols
// (nothing of row gr is loaded or stored there).
template <int D>
CLO_DEVICE int decode_own_col(const DecodeKernelParams& p, int gr, int d) {
  if constexpr (decode_runs_head_pairs<D>()) {
    if (p.pack_group > 0) {
      const int half = p.row_cols / 2;
      const int col = d - ((gr / p.seq_len_q) / p.pack_group) * half;
      return col >= 0 && col < half ? col : -1;
    }
  }
  return d < p.row_cols ? d : -1;
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
    // Token row of key `pos` in the TMA kernel's 3-D tensor map (D, Hkv, num_blocks *
    // block_size); the host checks num_blocks * block_size < 2^31.
    CLO_DEVICE int tma_row(int e, int pos) const { return (e << log2_bs) + (pos & bs_mask); }
  };
  static constexpr bool kPagedLayout = true;

  CLO_DEVICE Cursor cursor(int b, int kvh) const {
    return {block_tables + b * table_stride, static_cast<int64_t>(kvh) * head_dim, block_stride, token_stride,
            log2_block_size, (1 << log2_block_size) - 1, static_cast<unsigned>(num_blocks)};
  }
  // Keys the table can address: an upper bound of every seq_len.
  CLO_DEVICE int capacity() const { return max_blocks << log2_block_size; }
  CLO_DEVICE int load_len(int b) const { return __ldg(seq_lens + b); }
  // decode_prefetch_inputs: seq_len and the table entries of the first tiles from `pos`.
  CLO_DEVICE void prefetch_len_and_table(int b, int pos) const {
    prefetch_l2(seq_lens + b);
    if (pos < capacity()) prefetch_l2(block_tables + b * table_stride + (pos >> log2_block_size));
  }
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
    CLO_DEVICE int tma_row(int, int pos) const { return pos; }  // 4-D map (D, Nk, Hkv, B)
  };
  static constexpr bool kPagedLayout = false;
  CLO_DEVICE Cursor cursor(int b, int kvh) const {
    return {b * k_sb + kvh * k_sh, b * v_sb + kvh * v_sh, k_sn, v_sn};
  }
  CLO_DEVICE int capacity() const { return seq_len_k; }
  CLO_DEVICE int load_len(int) const { return seq_len_k; }
  CLO_DEVICE void prefetch_len_and_table(int, int) const {}
  CLO_DEVICE int check_len(int n, bool&) const { return n; }
};

// ---- shared-memory plan (host and device) -----------------------------------
// Q rows in smem: +8 elements (16 bytes) per row, so the 8 rows of an ldmatrix hit 8
// distinct 16-byte bank groups for every D here.
template <int D>
constexpr int decode_smem_stride() {
  return D + 8;
}

// K/V tiles in smem (both kernels): a 64-key tile of K (and one of V) is stored as
// planes of 64 columns (128 bytes), [planes][64 keys][64 columns], with 16-byte chunk c
// of key row r at chunk position c ^ (r % 8) within its 128-byte line: the TMA unit's
// 128-byte swizzle, so TMA boxes and cp.async fill the same layout. Why dense, swizzled
// lines (v7) rather than rows padded by 16 bytes (v1-v6): each 8-lane group of a warp's
// cp.async then fills one aligned 128-byte smem line; with 272-byte rows the L1 split
// every 128-byte global request in two (ncu, B=64/4K/MHA: 2.15x the L2 requests and
// 1.25x the sectors of a plain stream of the same bytes, 4-5% of the streaming rate).
// The 8 rows of an ldmatrix (one logical chunk) still hit 8 distinct bank groups.
// Under boxes that span every plane (stop 64) the TMA kernel groups the 64-column planes
// by its box rows: with boxes of 2^lg keys (lg = log2 min(block_size, 64); 6, the plain
// layout, for the cp.async kernel, strided caches and boxes per plane)
// the tile is [64 / 2^lg groups][planes][2^lg keys][64 columns], so one box of 2^lg keys x
// every plane (a 4-D map whose third dim steps 128 bytes along the row) lands as one
// group: paged block-16 tiles then take 8 boxes instead of 16 (B=46/8K/GQA on the H200:
// 16-row boxes 402 us, 32-row ones 384, 64-row ones 377). lg = 6 is the plain planes
// layout; the swizzle phase stays r % 8 (a group is a multiple of 8 lines).
// A 16-bit D = 96 tile ends in a 32-column tail plane (64-byte lines, two rows per 128
// bytes) with the TMA unit's 64-byte swizzle, chunk c of row r at c ^ ((r / 2) % 4): 8
// consecutive rows still hit 8 distinct bank groups, and no smem column or TMA box column
// lies past the row (v24: a 64-column plane half out of bounds made the D = 96 TMA kernel
// 10-16% slower than cp.async; all-32-column planes, 1.5x the boxes, were still slower on
// paged caches). FP8 D = 64 (32 16-bit columns) keeps one 64-column plane (v24: no faster
// as a 32-column plane).
// Under boxes that span every plane, a tile with a tail plane (16-bit D = 96 paged block 16,
// the TMA kernel's kTailSpans instances: two-row-tile blocks where decode_wide_row_boxes_pay,
// anywhere under CLO_DECODE_PLANE_BOXES=2; NOTES.md "Stop 91", "Stop 93") is kCols / 32 planes
// of 32 columns, each with the tail plane's 64-byte swizzle, grouped by 2^lg keys as the wide
// planes are: [64 / 2^lg groups][kCols / 32 planes][2^lg
// keys][32 columns], one box of 2^lg keys over every plane (the plane dim stepping 64 bytes
// along the row) landing as one group: 8 boxes a block-16 tile instead of 16. lg = 6 keeps the
// 64 + 32 layout (the kernels pass it as a constant there, so its offsets fold as before).
// kCols: the tile's 16-bit columns (decode_stage_cols).
constexpr int kPlaneCols = 64;
constexpr int kPlaneElems = kTileTokens * kPlaneCols;
constexpr int kTailPlaneCols = 32;
template <int kCols>
constexpr bool decode_has_tail_plane() {
  return kCols > kPlaneCols && kCols % kPlaneCols == kTailPlaneCols;
}
// 64-column planes (the tail plane, if any, comes after them).
template <int kCols>
constexpr int decode_wide_planes() {
  return decode_has_tail_plane<kCols>() ? kCols / kPlaneCols : (kCols + kPlaneCols - 1) / kPlaneCols;
}
template <int kCols>
constexpr int decode_kv_planes() {
  return decode_wide_planes<kCols>() + (decode_has_tail_plane<kCols>() ? 1 : 0);
}
template <int kCols>
constexpr int decode_kv_tile_elems() {
  return decode_wide_planes<kCols>() * kPlaneElems + (decode_has_tail_plane<kCols>() ? kTileTokens * kTailPlaneCols : 0);
}
// Element offset of 16-byte chunk `chunk` (columns 8 * chunk ..) of key row `row` in a
// tile whose wide planes are grouped by 2^lg keys (above; a tail plane is grouped only as one of
// the 96-column tile's three 32-column planes, decode_tail_spans_cols).
constexpr int kDecodeUngroupedLog2 = 6;  // log2(kTileTokens): the plain planes layout
static_assert(1 << kDecodeUngroupedLog2 == kTileTokens, "one group of 64 keys");
constexpr int kDecodeTailSpanLog2 = 4;  // tail-plane tiles under spanning boxes: block-16 pages
// The tiles that have the 32-column layout above (96 columns; the D = 160 kernel keeps its own).
template <int kCols>
constexpr bool decode_tail_spans_cols() {
  return kCols == 96;
}
template <int kCols>
CLO_HOST_DEVICE constexpr int decode_kv_offset(int row, int chunk, int lg = kDecodeUngroupedLog2) {
  constexpr int kWide = decode_wide_planes<kCols>();
  if (decode_tail_spans_cols<kCols>() && lg != kDecodeUngroupedLog2) {  // 32-column planes, grouped
    const int in_group = row & ((1 << lg) - 1);
    return ((row - in_group) * (kCols / kTailPlaneCols) + ((chunk >> 2) << lg) + in_group) * kTailPlaneCols +
           (((chunk & 3) ^ ((row >> 1) & 3)) << 3);
  }
  if (decode_has_tail_plane<kCols>() && (chunk >> 3) == kWide)
    return kWide * kPlaneElems + row * kTailPlaneCols + (((chunk & 3) ^ ((row >> 1) & 3)) << 3);
  const int swizzled = ((chunk & 7) ^ (row & 7)) << 3;
  if constexpr (kWide == 1) return row * kPlaneCols + swizzled;
  // The plain layout written out: the cp.async kernel passes a constant lg = 6, and the
  // grouped form of it costs that kernel registers (D = 256 strided spilled 4 bytes).
  if (lg == kDecodeUngroupedLog2) return (chunk >> 3) * kPlaneElems + row * kPlaneCols + swizzled;
  const int in_group = row & ((1 << lg) - 1);
  return ((row - in_group) * kWide + ((chunk >> 3) << lg) + in_group) * kPlaneCols + swizzled;
}
// The smem base is rounded up to this (TMA's 128-byte swizzle repeats every 1024 bytes
// and reads the address bits): the launch asks for that much more.
constexpr size_t kDecodeSmemAlign = 1024;
CLO_DEVICE unsigned char* decode_smem_base(unsigned char* raw) {
  const uint32_t a = smem_u32addr(raw);
  return raw + ((kDecodeSmemAlign - a % kDecodeSmemAlign) % kDecodeSmemAlign);
}

// decode_epilogue's warp merge (the split merge needs no shared memory): a state and an O
// row per math warp and row of its 16-row tile; kRowTiles 16-row tiles per block
// (decode_attention_tma_kernel) have kRowTiles x kDecodeWarps math warps.
template <int D, int kRowTiles = 1>
constexpr size_t decode_epilogue_smem_bytes() {
  constexpr size_t kWarpRows = size_t(kDecodeWarps) * kRowTiles * kRowsPerBlock;
  return kWarpRows * sizeof(float2) + kWarpRows * (D + 4) * sizeof(float);
}
// decode_epilogue's split cluster (p.split_cluster): a block's rows' (max, sum) and columns,
// past the warp merge's smem, inside the pipeline buffer (decode_split_cluster_fits).
template <int D, int kRowTiles = 1>
constexpr size_t decode_split_cluster_smem_bytes() {
  constexpr size_t kRows = size_t(kRowTiles) * kRowsPerBlock;
  return kRows * D * sizeof(float) + kRows * sizeof(float2);
}
// FP8 caches (KVT one byte): a stage holds the cache bytes, a tile of D/2 16-bit columns
// in the same swizzled plane layout (16-byte chunk c = 16 e4m3 values); the warps
// dequantize their fragments in registers (decode_warp_tile_fp8).
template <typename T, typename KVT>
constexpr bool decode_dequantizes() {
  return sizeof(KVT) == 1;
}
// The kernels instantiated with the narrow tile (kNarrow; where they run:
// decode_narrow_rows_pay): 16-bit caches, one row tile, every schedule; not the D = 160
// kernel (head pairs of 72-80), where it read 2.4% slower at MHA's small grids (paged D = 80
// B=1/16K 45.3 -> 46.4 us, B=2/8K 45.3 -> 46.4; GQA 32/8 B=1/16K 19.8 -> 19.9, B=64/2K 86.7 ->
// 86.0; NOTES.md "Stop 76").
template <typename T, int D, typename KVT>
constexpr bool decode_runs_narrow() {
  return !decode_dequantizes<T, KVT>() && D != 160;
}
template <typename T, int D, typename KVT>
constexpr int decode_stage_cols() {
  return D * static_cast<int>(sizeof(KVT)) / static_cast<int>(sizeof(T));
}
// Cache columns in one 64-column plane line (the TMA kernel's box width): 64, or 128 e4m3.
template <typename T, typename KVT>
constexpr int decode_plane_cache_cols() {
  return kPlaneCols * static_cast<int>(sizeof(T)) / static_cast<int>(sizeof(KVT));
}
// [K/V stages (or the epilogue's scratch)][Q rows][extra]: the pipeline first, at the
// aligned base.
template <typename T, int D, int kStages, typename KVT = T, int kRowTiles = 1>
constexpr size_t decode_pipeline_smem_bytes() {
  constexpr size_t pipeline =
      size_t(kStages) * 2 * decode_kv_tile_elems<decode_stage_cols<T, D, KVT>()>() * sizeof(T);
  constexpr size_t epilogue = decode_epilogue_smem_bytes<D, kRowTiles>();
  constexpr size_t larger = pipeline > epilogue ? pipeline : epilogue;
  return (larger + 127) / 128 * 128;
}
// Whether an instance's pipeline buffer holds the split cluster's smem after the warp merge's.
template <typename T, int D, int kStages, typename KVT = T, int kRowTiles = 1>
constexpr bool decode_split_cluster_fits() {
  return decode_epilogue_smem_bytes<D, kRowTiles>() + decode_split_cluster_smem_bytes<D, kRowTiles>() <=
         decode_pipeline_smem_bytes<T, D, kStages, KVT, kRowTiles>();
}
template <typename T, int D, int kStages, typename KVT = T, int kRowTiles = 1>
constexpr size_t decode_smem_bytes(size_t extra = 0) {
  return kDecodeSmemAlign + decode_pipeline_smem_bytes<T, D, kStages, KVT, kRowTiles>() +
         size_t(kRowTiles) * kRowsPerBlock * decode_smem_stride<D>() * sizeof(T) + extra;
}

// The order of q's 16 columns of a k-step in smem for FP8 caches: ldmatrix position j
// holds column decode_fp8_q_col(j), matching the K fragments ldmatrix makes of e4m3
// rows (decode_warp_tile_fp8): thread t's four bytes 4t .. 4t + 3 of a 16-byte chunk are
// its B-fragment positions 2t, 2t + 1, 2t + 8, 2t + 9.
CLO_HOST_DEVICE constexpr int decode_fp8_q_col(int j) {
  return j < 8 ? 4 * (j >> 1) + (j & 1) : 4 * ((j - 8) >> 1) + 2 + (j & 1);
}

// bf16 queries over FP8 caches run the tile math in fp16 (decode_fp8_scales_q): e4m3 ->
// f16 is one cvt per pair, e4m3 -> bf16 four (through f16 and f32), on every tile's chain.
template <typename T, typename KVT>
constexpr bool decode_fp8_scales_q() {
  return decode_dequantizes<T, KVT>() && std::is_same_v<T, __nv_bfloat16>;
}
// The factor undoing row r's q scale (decode_load_q's bf16 -> fp16 path), kept in the
// row's smem padding (columns D .. D + 7 are never read as q).
template <int D, int kQStride, typename T>
CLO_DEVICE float* decode_q_unscale_slot(T* q_s, int r) {
  return reinterpret_cast<float*>(q_s + r * kQStride + D);
}
// This lane's two rows' factors (rows g and g + 8 of its mma fragments), for
// decode_warp_tile_fp8; read after a barrier that follows decode_load_q.
template <int D, int kQStride, typename T>
CLO_DEVICE void decode_read_q_unscale(T* q_s, float (&u)[2]) {
  const int g = (threadIdx.x & 31) >> 2;
  u[0] = *decode_q_unscale_slot<D, kQStride>(q_s, g);
  u[1] = *decode_q_unscale_slot<D, kQStride>(q_s, g + 8);
}

// This block's kRows query rows (16, or 32 for two row tiles) into smem ([kRows][kQStride];
// rows past p.rows zero): row r <-> query head kvh * group + r_global / Nq, position
// r_global % Nq, r_global = row_tile * kRows + r. Threads
// 0 .. count - 1 of the block take part (whole warps for kFp8Order). kFp8Order: each
// k-step's 16 columns in the order decode_fp8_q_col gives (the head dim is then a
// multiple of 16), bf16 rows scaled into fp16 (decode_fp8_scales_q).
template <typename T, int D, int kQStride, bool kFp8Order = false, int kRows = kRowsPerBlock>
CLO_DEVICE void decode_load_q(const DecodeKernelParams& p, const DecodeWork& w, T* q_s, int count) {
  const int kvh = w.kvh, row_tile = w.row_tile, b = w.b;
  if constexpr (kFp8Order) {
    // One warp per row: lane l stores columns 8 l .. 8 l + 7, then lanes take one k-step
    // each and put its 16 columns in decode_fp8_q_col's order, in place. bf16 q is stored
    // as fp16 for the fp16 math (decode_fp8_scales_q): each row times a power of two 2^k
    // putting its largest |q| in [2^14, 2^15), so no value overflows fp16 and a row of
    // small values keeps its bits (bf16's 8 significant bits fit fp16's 11 down to 2^-28
    // of the row's largest; smaller ones add less than that to any dot product). Scores
    // are multiplied back by 2^-k (exact) before the softmax.
    constexpr bool kScaled = std::is_same_v<T, __nv_bfloat16>;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = count >> 5;
    uint16_t* q16 = reinterpret_cast<uint16_t*>(q_s);  // 16-bit values, moved as bits
    for (int r = warp; r < kRows; r += warps) {
      const int gr = row_tile * kRows + r;
      const int col = gr < p.rows && lane * 8 < D ? decode_own_col<D>(p, gr, lane * 8) : -1;
      uint4 row = make_uint4(0, 0, 0, 0);
      if (col >= 0) {
        const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
        row = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) + b * p.q_sb + head * p.q_sh +
                                              qi * p.q_sn + col);
      }
      if constexpr (kScaled) {
        const T* x = reinterpret_cast<const T*>(&row);
        float v[8], m = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          v[j] = to_float<T>(x[j]);
          m = fmaxf(m, fabsf(v[j]));  // NaN ignored: it converts to NaN anyway
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        // 2^k with k = 14 - floor(log2 m), 2^k and 2^-k both normal floats; 1 for a zero or infinite row
        const int k = m > 0.f && m <= FLT_MAX ? min(126, max(-126, 14 - ilogbf(m))) : 0;
        const float up = exp2f(static_cast<float>(k));
        alignas(16) __half h[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) h[j] = __float2half_rn(v[j] * up);
        row = *reinterpret_cast<const uint4*>(h);
        if (lane == 0) *decode_q_unscale_slot<D, kQStride>(q_s, r) = exp2f(static_cast<float>(-k));
      }
      if (lane * 8 < D) *reinterpret_cast<uint4*>(q16 + r * kQStride + lane * 8) = row;
      __syncwarp();
      if (lane < D / 16) {  // k-step `lane` of the row (each lane its own 32 bytes)
        uint4* chunk = reinterpret_cast<uint4*>(q16 + r * kQStride + lane * 16);
        alignas(16) uint4 in[2] = {chunk[0], chunk[1]};
        const uint16_t* x = reinterpret_cast<const uint16_t*>(in);
        alignas(16) uint16_t y[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) y[j] = x[decode_fp8_q_col(j)];
        chunk[0] = reinterpret_cast<const uint4*>(y)[0];
        chunk[1] = reinterpret_cast<const uint4*>(y)[1];
      }
      __syncwarp();
    }
    return;
  }
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
  for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += count) {
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    const int gr = row_tile * kRows + r;
    const int col = gr < p.rows ? decode_own_col<D>(p, gr, ch * 8) : -1;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (col >= 0) {
      const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
      const T* src = static_cast<const T*>(p.q) + b * p.q_sb + head * p.q_sh + qi * p.q_sn + col;
      val = *reinterpret_cast<const uint4*>(src);
    }
    *reinterpret_cast<uint4*>(q_s + r * kQStride + ch * 8) = val;
  }
}

// Called by one warp before the PDL wait: this block's small inputs (seq_len, the first
// tiles' table entries, its q rows) into L2, and their pages into the TLB, while the
// previous kernel still runs. Why it is safe: a prefetch brings nothing into the SM, and
// L2 is the point of coherence, so the previous kernel's later writes to these lines stay
// visible to the loads after the wait. Why: those loads start the block's dependent
// chain (seq_len || table -> first K/V tile); cold, they took ~2 us of a 27-us call at
// B=16/1K/GQA (NOTES.md v7, per-block timeline).
template <int D, class KV, int kRows = kRowsPerBlock>
CLO_DEVICE void decode_prefetch_inputs(const DecodeKernelParams& p, const DecodeWork& w, const KV& kv,
                                       int spec_start) {
  const int lines_per_row = (decode_head_cols<D>(p) * 2 + 127) / 128;  // 16-bit q rows
  const int lane = threadIdx.x & 31;
  const int kvh = w.kvh, row_tile = w.row_tile, b = w.b;
  if (lane == 0) kv.prefetch_len_and_table(b, spec_start);
  for (int i = lane; i < kRows * lines_per_row; i += 32) {
    const int gr = row_tile * kRows + i / lines_per_row;
    if (gr >= p.rows) break;
    const int head = kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
    const char* row = static_cast<const char*>(p.q) + 2 * (b * p.q_sb + head * p.q_sh + qi * p.q_sn);
    prefetch_l2(row + (i % lines_per_row) * 128);
  }
}

// The first key any row of the block may see: 0, or with a sliding window the lowest
// query position's window start.
CLO_DEVICE int decode_lowest_key(const DecodeKernelParams& p, int kv_len) {
  if (p.window_left < 0) return 0;
  const int lo = kv_len - p.seq_len_q - p.window_left;
  return lo > 0 ? lo : 0;
}
// decode_lowest_key rounded down to a 64-key tile: where the splits start (so they stay
// 64-aligned and TMA boxes start on block boundaries). The keys between it and the
// lowest key are never loaded (zero-filled, or not issued and their V masked in registers): a
// serving engine may have freed and reused their blocks (NaN, stale table entries).
CLO_DEVICE int decode_first_key(const DecodeKernelParams& p, int kv_len) {
  return decode_lowest_key(p, kv_len) / kTileTokens * kTileTokens;
}

// The balanced schedule by the keys read (p.streamk_by_len): a unit's slots are the 64-key
// tiles it reads (at least one, so an empty sequence still gets its output written),
// laid end to end as above; block i takes [total * i / blocks, total * (i + 1) / blocks).
// With ragged lengths a static share of the capacity leaves the blocks as uneven as the
// lengths (NOTES.md v37: 0-14% behind even 2-split grids); this share is even whatever
// they are. Planned by every warp from seq_lens (the same answer in each: no smem, no
// barrier), so all lanes of the calling warp must call these. A unit is cut at most twice
// (3 partial slots: decode_partial_slots) and a block runs at most kDecodeMaxPieces;
// where the lengths allow neither (a unit longer than two shares; units so short that a
// share holds more) the static plan runs instead (tiles_cap > 0).
// Pieces of the balanced schedule one block runs at most (the TMA kernel keeps a flag per
// piece): by capacity its range is more than one and at most two units long
// (decode_streamk_blocks), so three (a cut unit, at most one whole one, a cut unit), or half a
// unit to one long (decode_wide_rows_streamk_blocks), so two; by length this many, which the
// plan checks.
constexpr int kDecodeMaxPieces = 6;
// The 64-key tiles a kv_len-key sequence reads from `first` (decode_first_key) on.
CLO_DEVICE int decode_read_tiles(int first, int kv_len) {
  return kv_len > first ? div_ceil(kv_len - first, kTileTokens) : 0;
}
template <class KV>
CLO_DEVICE int decode_unit_slots(const DecodeKernelParams& p, const KV& kv, int b) {
  bool bad = false;  // a seq_len past the table: read as 0 here, NaN output (check_len)
  const int kv_len = kv.check_len(kv.load_len(b), bad);
  return max(1, decode_read_tiles(decode_first_key(p, kv_len), kv_len));
}
template <class KV>
CLO_DEVICE DecodeStreamKRange decode_streamk_len_range(const DecodeKernelParams& p, const KV& kv) {
  const int lane = threadIdx.x & 31;
  // Lane-wise first, one reduction each after: the uniform case skips the sum's.
  int64_t seq_slots = 0;
  int longest_unit = 0, shortest_unit = INT_MAX;
  for (int b = lane; b < p.batch; b += 32) {
    const int w = decode_unit_slots(p, kv, b);
    seq_slots += w;
    longest_unit = max(longest_unit, w);
    shortest_unit = min(shortest_unit, w);
  }
  longest_unit = warp_reduce_max(longest_unit);
  shortest_unit = warp_reduce_min(shortest_unit);
  // Every sequence reading as many tiles (the same length, or every table full): the
  // capacity plan, whose slots decode_piece_key lays over the tiles read in proportion,
  // cuts the same pieces up to a tile's rounding, and is already known (the rest of this
  // plan is on the start-up path).
  if (shortest_unit == longest_unit) return decode_streamk_range(p, kv.capacity());
  seq_slots = warp_reduce_sum(seq_slots);
  const int64_t total = seq_slots * p.units_x, blocks = p.streamk_blocks;
  const int64_t share_lo = total / blocks, share_hi = div_ceil(total, blocks);
  const bool fits = longest_unit <= 2 * share_lo && div_ceil(share_hi, static_cast<int64_t>(shortest_unit)) + 1 <=
                                                         kDecodeMaxPieces;
  if (!fits) return decode_streamk_range(p, kv.capacity());
  return {total * blockIdx.x / blocks, total * (blockIdx.x + 1) / blocks, 0, total};
}
// The next piece of a by-length range: the unit holding slot r.pos (a warp-wide search over
// the sequences' slot prefix sums), its slots up to r.hi; which piece of the unit it is and
// how many the unit has, from the blocks' boundaries inside it.
template <class KV>
CLO_DEVICE DecodeWork decode_streamk_len_piece(const DecodeKernelParams& p, const KV& kv, DecodeStreamKRange& r) {
  const int lane = threadIdx.x & 31;
  int64_t seq_start = 0, base = 0;
  int b = p.batch - 1, unit_slots = 1;
  for (int b0 = 0; b0 < p.batch; b0 += 32) {
    const bool in = b0 + lane < p.batch;
    const int w = in ? decode_unit_slots(p, kv, b0 + lane) : 0;
    const int64_t span = static_cast<int64_t>(w) * p.units_x;
    const int64_t end = base + warp_inclusive_sum(span);
    const unsigned hit = __ballot_sync(kFullMask, in && r.pos < end && r.pos >= end - span);
    if (hit != 0) {
      const int src = __ffs(hit) - 1;
      b = b0 + src;
      seq_start = __shfl_sync(kFullMask, end - span, src);
      unit_slots = __shfl_sync(kFullMask, w, src);
      break;
    }
    base = __shfl_sync(kFullMask, end, 31);
  }
  const int64_t j = (r.pos - seq_start) / unit_slots, unit_start = seq_start + j * unit_slots;
  DecodeWork w;
  w.b = b;
  w.unit_x = static_cast<int>(j);
  w.kvh = w.unit_x / p.row_tiles;
  w.row_tile = w.unit_x % p.row_tiles;
  w.tile_lo = static_cast<int>(r.pos - unit_start);
  w.tile_hi = static_cast<int>(min(r.hi, unit_start + unit_slots) - unit_start);
  w.tiles_cap = 0;
  decode_streamk_piece_splits(p, r, unit_start, unit_slots, w);
  r.pos = unit_start + w.tile_hi;
  return w;
}
// The key where a balanced piece's slot `slot` (of the unit's tiles_cap) starts: the
// slots are laid over the 64-key tiles the sequence reads (decode_first_key to kv_len) in
// proportion, not one slot per tile of the table's capacity, so the blocks' shares stay
// equal when the sequences are shorter than the capacity (tables sized for the longest
// context) or read a sliding window. A full sequence without a window gets tile `slot`.
// Both pieces of a cut unit map their shared slot to the same key: no gap, no overlap.
// By-length pieces (tiles_cap 0: decode_streamk_len_piece) count their slots in the tiles read.
CLO_DEVICE int decode_piece_key(const DecodeWork& w, int first, int kv_len, int slot) {
  if (w.tiles_cap == 0) return first + slot * kTileTokens;
  return first + static_cast<int>(static_cast<int64_t>(decode_read_tiles(first, kv_len)) * slot / w.tiles_cap) *
                     kTileTokens;
}
// Where this block's split of a kv_len-key sequence starts (splits share the keys from
// decode_first_key on; a balanced piece: decode_piece_key).
CLO_DEVICE int decode_split_start(const DecodeKernelParams& p, const DecodeWork& w, int kv_len) {
  const int first = decode_first_key(p, kv_len);
  if (w.tile_hi >= 0) return decode_piece_key(w, first, kv_len, w.tile_lo);
  return first + w.split * split_keys<kTileTokens>(w.num_splits, kv_len - first);
}

// The keys [start, end) of this block's split of a kv_len-key sequence, its 64-key
// tiles, and the splits the sequence actually uses (eff); the first and last visible
// key of the thread's rows tile_row0 + g and + g + 8 (tile_row0: the first row of the
// warp's 16-row tile; causal: each query position sees its own prefix; a sliding window:
// the window_left keys before it). `narrow` (decode_warp_tile_narrow): the thread's rows
// are tile_row0 + 2 t and + 2 t + 1 instead.
struct DecodeSplitRange {
  int eff, start, end, n_tiles;
  int lowest;  // decode_lowest_key: keys below it are not loaded
  int lower[2], limit[2];
};
// A balanced piece: its tiles' keys from decode_first_key on, below kv_len; every piece
// of a cut unit writes its partials (an empty one: no key), so eff = its pieces.
CLO_DEVICE DecodeSplitRange decode_split_range(const DecodeKernelParams& p, const DecodeWork& w, int kv_len,
                                               int tile_row0, bool narrow) {
  DecodeSplitRange r;
  const int lane = threadIdx.x & 31;
  const int row_lo = narrow ? 2 * (lane & 3) : lane >> 2, row_step = narrow ? 1 : 8;
  const int first = decode_first_key(p, kv_len);
  if (w.tile_hi >= 0) {
    r.eff = w.num_splits;
    r.start = decode_piece_key(w, first, kv_len, w.tile_lo);
    r.end = max(r.start, min(kv_len, decode_piece_key(w, first, kv_len, w.tile_hi)));
  } else {
    r.eff = split_count<kTileTokens>(w.num_splits, kv_len - first);
    const int tokens_per_split = split_keys<kTileTokens>(w.num_splits, kv_len - first);
    r.start = first + w.split * tokens_per_split;
    r.end = w.split < r.eff ? min(kv_len, r.start + tokens_per_split) : r.start;
  }
  r.n_tiles = r.end > r.start ? div_ceil(r.end - r.start, kTileTokens) : 0;
  r.lowest = decode_lowest_key(p, kv_len);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int gr = tile_row0 + row_lo + row_step * i;
    const int qi = gr < p.rows ? gr % p.seq_len_q : p.seq_len_q - 1;
    const int pos = qi + kv_len - p.seq_len_q;
    r.limit[i] = p.causal ? pos : kv_len - 1;
    r.lower[i] = p.window_left < 0 ? 0 : pos - p.window_left;
  }
  return r;
}

// A score's logit in the log2 domain (scaled; soft-capped where p.cap_scale > 0), or -inf
// where its key `pos` is outside its row's visible keys [lower, limit].
CLO_DEVICE float decode_masked_logit(const DecodeKernelParams& p, float s, int pos, int lower, int limit) {
  const float logit = p.cap_scale > 0.f ? p.cap_log2 * fast_tanh(s * p.cap_scale) : s * p.scale_log2;
  return pos <= limit && pos >= lower ? logit : -INFINITY;
}
// One row's online-softmax step from the max of its tile's logits (held by every lane of the
// row): the new running max, the factor the older O and sum take (`rescale`, applied to
// row_sum here) and what the tile's logits subtract before exp2 (`m_sub`). A row with no
// visible key yet keeps m = -inf; subtracting 0 then makes every exp2 exactly 0 instead of
// exp2(-inf + inf) = NaN.
CLO_DEVICE void decode_row_step(float tile_max, float& row_max, float& row_sum, float& rescale, float& m_sub) {
  const float m_new = fmaxf(row_max, tile_max);
  m_sub = m_new == -INFINITY ? 0.f : m_new;
  rescale = fast_exp2(row_max - m_sub);
  row_max = m_new;
  row_sum *= rescale;
}

// The online-softmax step of a warp's 16 keys: scores `s` (QK^T, n8 tiles j = 0, 1 of keys
// tok0 + 8 j ..) masked (range), scaled (and soft-capped) into the log2 domain and
// exponentiated; row_max / row_sum and o rescaled; P returned as the A operand of PV.
template <typename T, int D>
CLO_DEVICE void decode_tile_softmax(float (&s)[2][4], int tok0, const DecodeSplitRange& range,
                                    const DecodeKernelParams& p, float (&o)[D / 8][4], float (&row_max)[2],
                                    float (&row_sum)[2], uint32_t (&pa)[4]) {
  const int t4 = threadIdx.x & 3;
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pos = tok0 + j * 8 + 2 * t4 + (e & 1);
      const float x = decode_masked_logit(p, s[j][e], pos, range.lower[e >> 1], range.limit[e >> 1]);
      s[j][e] = x;
      tile_max[e >> 1] = fmaxf(tile_max[e >> 1], x);
    }
  float rescale[2], m_sub[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
    decode_row_step(tile_max[i], row_max[i], row_sum[i], rescale[i], m_sub[i]);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pe = fast_exp2(s[j][e] - m_sub[e >> 1]);
      s[j][e] = pe;
      row_sum[e >> 1] += pe;
    }
  scale_fragment_rows(o, rescale);
  // P (16 x 16 keys) from the S accumulators as the A operand.
  pa[0] = pack_float2<T>(s[0][0], s[0][1]);
  pa[1] = pack_float2<T>(s[0][2], s[0][3]);
  pa[2] = pack_float2<T>(s[1][0], s[1][1]);
  pa[3] = pack_float2<T>(s[1][2], s[1][3]);
}

// The k-steps whose K fragments decode_warp_tile loads together: the largest divisor of
// the tile's k-steps up to 8.
constexpr int decode_k_step_group(int k_steps) {
  int group = k_steps < 8 ? k_steps : 8;
  while (k_steps % group != 0) --group;
  return group;
}
static_assert(decode_k_step_group(10) == 5 && decode_k_step_group(16) == 8 && decode_k_step_group(6) == 6);

// K's fragments of a warp's 16 keys (rows r0 .. r0 + 15 of the tile `ks`, laid out as
// decode_kv_offset with planes grouped by 2^lg keys): mma(kk, bk) for each k-step kk, bk the
// ldmatrix_x4 matrices (keys 0-7, columns 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) of its
// 16 columns. Up to 8 k-steps are loaded before their mma: one ldmatrix latency per group
// instead of one per k-step (a decode tile's math is latency-bound, one warp per scheduler;
// NOTES.md v12). Groups of equal size (D = 160: two of 5): a last group past the k-steps
// would read past the tile's rows and Q's (stop 74 found it).
template <int D, typename T, class Mma>
CLO_DEVICE void decode_k_fragments(const T* ks, int lg, int r0, Mma&& mma) {
  const int lane = threadIdx.x & 31;
  const int k_row = r0 + (lane & 7) + (lane >> 4) * 8, k_half = (lane >> 3) & 1;
  constexpr int kKSteps = D / 16;
  constexpr int kGroup = decode_k_step_group(kKSteps);
  static_assert(kKSteps % kGroup == 0, "whole groups of k-steps");
#pragma unroll
  for (int k0 = 0; k0 < kKSteps; k0 += kGroup) {
    uint32_t bk[kGroup][4];
#pragma unroll
    for (int i = 0; i < kGroup; ++i) ldmatrix_x4(bk[i], ks + decode_kv_offset<D>(k_row, (k0 + i) * 2 + k_half, lg));
#pragma unroll
    for (int i = 0; i < kGroup; ++i) mma(k0 + i, bk[i]);
  }
}

// Q's A-operand fragment of k-step kk from q_s ([16][kQStride]), as ldmatrix gives it.
template <typename T, int kQStride>
CLO_DEVICE void decode_q_frag(const T* q_s, int kk, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31;
  ldmatrix_x4(a, q_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kQStride + kk * 16 + (lane >> 4) * 8);
}

// Keys of a warp's 16 whose V rows a TMA tile fills with anything: past the sequence's end
// (real memory of other tokens, garbage, even NaN) or below a sliding window's lowest key.
// Their P is 0, but 0 * NaN is NaN: the TMA kernel masks the V fragments in registers after
// their ldmatrix (no shared-memory writes, so no barrier between the warps that read a tile).
// A transposed ldmatrix gives thread (g, t) keys 2t and 2t + 1 of a matrix in the low and
// high 16 bits of its register (16-bit values, or an FP8 pair per key: decode_warp_tile_fp8);
// `lo` masks the matrices of keys 0-7, `hi` those of keys 8-15. Keys [below, valid) stay.
struct DecodeVKeyMask {
  uint32_t lo = 0xffffffffu, hi = 0xffffffffu;
};
CLO_DEVICE DecodeVKeyMask decode_v_key_mask(int below, int valid) {
  const int k = 2 * (threadIdx.x & 3);
  const auto keep = [&](int key, uint32_t bits) { return key >= below && key < valid ? bits : 0u; };
  DecodeVKeyMask m;
  m.lo = keep(k, 0xffffu) | keep(k + 1, 0xffff0000u);
  m.hi = keep(k + 8, 0xffffu) | keep(k + 9, 0xffff0000u);
  return m;
}
// One ldmatrix_x4_trans of V whose matrices are (keys 0-7, 8-15, 0-7, 8-15) x columns, masked.
template <bool kMaskV>
CLO_DEVICE void decode_mask_v_frags(uint32_t (&bv)[4], const DecodeVKeyMask& m) {
  if constexpr (kMaskV) {
    bv[0] &= m.lo;
    bv[1] &= m.hi;
    bv[2] &= m.lo;
    bv[3] &= m.hi;
  }
}

// One warp's 16 keys of a tile (rows r0 .. r0 + 15 of the K and V tiles `ks`, `vs`, laid
// out as decode_kv_offset with planes grouped by 2^lg keys): S = Q K^T (16 query rows x 16
// keys, mma.sync), mask and scale into the log2 domain, online softmax per row, O += P V. q_frag(kk, a) gives Q's
// A-operand fragment of k-step kk (decode_q_frag from smem, or registers loaded once).
// range.lower[i] / range.limit[i]: the first / last visible key of row g + 8 i (sliding
// window; causal or sequence end); scores soft-capped where p.cap_scale > 0. kMaskV: V
// rows outside `vmask`'s keys are zeroed in registers (decode_v_key_mask).
template <typename T, int D, bool kMaskV = false, class QFrag>
CLO_DEVICE void decode_warp_tile(const QFrag& q_frag, const T* ks, const T* vs, int lg, int r0, int tok0,
                                 const DecodeSplitRange& range, const DecodeKernelParams& p, float (&o)[D / 8][4],
                                 float (&row_max)[2], float (&row_sum)[2], const DecodeVKeyMask& vmask = {}
#ifdef CLO_DEV_STAMPS
                                 , unsigned long long* dev_clk = nullptr  // [3]: after QK^T, softmax, PV
#endif
) {
  const int lane = threadIdx.x & 31;
  float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  decode_k_fragments<D>(ks, lg, r0, [&](int kk, const uint32_t (&bk)[4]) {
    uint32_t a[4];
    q_frag(kk, a);
    const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
    mma_m16n8k16<T>(s[0], a, b0);
    mma_m16n8k16<T>(s[1], a, b1);
  });
#ifdef CLO_DEV_STAMPS
  if (dev_clk != nullptr) {
    asm volatile("" ::"f"(s[0][0]), "f"(s[1][3]));
    dev_clk[0] = clock64();
  }
#endif
  uint32_t pa[4];
  decode_tile_softmax<T, D>(s, tok0, range, p, o, row_max, row_sum, pa);
#ifdef CLO_DEV_STAMPS
  if (dev_clk != nullptr) {
    asm volatile("" ::"r"(pa[0]), "r"(pa[3]), "f"(o[0][0]), "f"(o[D / 8 - 1][3]));
    dev_clk[1] = clock64();
  }
#endif
  const int v_row = r0 + (lane & 7) + ((lane >> 3) & 1) * 8, v_half = lane >> 4;
#pragma unroll
  for (int dn = 0; dn < D / 16; ++dn) {
    uint32_t bv[4];
    ldmatrix_x4_trans(bv, vs + decode_kv_offset<D>(v_row, dn * 2 + v_half, lg));
    decode_mask_v_frags<kMaskV>(bv, vmask);
    const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
    mma_m16n8k16<T>(o[2 * dn], pa, b0);
    mma_m16n8k16<T>(o[2 * dn + 1], pa, b1);
  }
#ifdef CLO_DEV_STAMPS
  if (dev_clk != nullptr) {
    asm volatile("" ::"f"(o[0][0]), "f"(o[D / 8 - 1][3]));
    dev_clk[2] = clock64();
  }
#endif
}

// Units of at most 8 query rows (decode_narrow_rows_pay: one token at groups up to 8, MHA
// included) fill 8 of the 16 rows of decode_warp_tile's A operand. With the keys as the
// MMA's M dimension they fill the 8 columns of its N instead: S^T = K Q^T (16 keys x 8
// rows) and O^T += V^T P^T (16 head columns x 8 rows a fragment): half the mma of
// decode_warp_tile, half its O registers (`ot`: D / 16 fragments) and half the exponentials.
// Thread (g, t) holds the scores of keys g and g + 8 for query rows 2t and 2t + 1, and
// ot[m][2h + j] is column 16m + 8h + g of row 2t + j; row_max[j] / row_sum[j] are row
// 2t + j's (row_sum a partial over the thread's keys: decode_epilogue sums it over g).
// The operands are decode_warp_tile's: K's and V's ldmatrix at the same addresses (the
// fragments reordered), Q's A fragment's rows 0-7 as the B operand, and P^T's B operand
// from the S^T accumulators by one movmatrix per 8 keys.
template <typename T, int D, bool kMaskV = false, class QFrag>
CLO_DEVICE void decode_warp_tile_narrow(const QFrag& q_frag, const T* ks, const T* vs, int lg, int r0, int tok0,
                                        const DecodeSplitRange& range, const DecodeKernelParams& p,
                                        float (&ot)[D / 16][4], float (&row_max)[2], float (&row_sum)[2],
                                        const DecodeVKeyMask& vmask = {}) {
  const int lane = threadIdx.x & 31, g = lane >> 2;
  float s[4] = {0.f, 0.f, 0.f, 0.f};
  decode_k_fragments<D>(ks, lg, r0, [&](int kk, const uint32_t (&bk)[4]) {
    uint32_t q[4];
    q_frag(kk, q);
    const uint32_t a[4] = {bk[0], bk[2], bk[1], bk[3]};  // K (keys x columns) as the A operand
    const uint32_t b[2] = {q[0], q[2]};                   // Q rows 0-7, columns 0-7 and 8-15
    mma_m16n8k16<T>(s, a, b);
  });
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int pos = tok0 + g + 8 * (e >> 1), j = e & 1;
    const float x = decode_masked_logit(p, s[e], pos, range.lower[j], range.limit[j]);
    s[e] = x;
    tile_max[j] = fmaxf(tile_max[j], x);
  }
  float rescale[2], m_sub[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) tile_max[j] = fmaxf(tile_max[j], __shfl_xor_sync(0xffffffffu, tile_max[j], x));
    decode_row_step(tile_max[j], row_max[j], row_sum[j], rescale[j], m_sub[j]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    s[e] = fast_exp2(s[e] - m_sub[e & 1]);
    row_sum[e & 1] += s[e];
  }
#pragma unroll
  for (int m = 0; m < D / 16; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) ot[m][e] *= rescale[e & 1];
  // P^T (keys 0-7, 8-15 x rows) as the B operand: each 8 x 8 block of S^T transposed.
  const uint32_t pb[2] = {movmatrix_trans(pack_float2<T>(s[0], s[1])), movmatrix_trans(pack_float2<T>(s[2], s[3]))};
  const int v_row = r0 + (lane & 7) + ((lane >> 3) & 1) * 8, v_half = lane >> 4;
#pragma unroll
  for (int dn = 0; dn < D / 16; ++dn) {
    uint32_t bv[4];  // transposed: (keys 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15)
    ldmatrix_x4_trans(bv, vs + decode_kv_offset<D>(v_row, dn * 2 + v_half, lg));
    decode_mask_v_frags<kMaskV>(bv, vmask);
    const uint32_t a[4] = {bv[0], bv[2], bv[1], bv[3]};  // V^T: (columns, keys) as the A operand
    mma_m16n8k16<T>(ot[dn], a, pb);
  }
}

// decode_warp_tile over FP8 (e4m3) tiles (`ks`, `vs`: D/2 16-bit columns, 16 values per
// 16-byte chunk), dequantized in registers: ldmatrix moves the bytes as it moves 16-bit
// pairs, and each thread converts the fragments it holds (one cvt per pair on sm_89+).
//  - K (non-transposed): thread (g, t) gets bytes 4t .. 4t + 3 of key g's chunk kk: its
//    B-fragment positions 2t, 2t + 1, 2t + 8, 2t + 9 of k-step kk. q sits in smem in the
//    same column order (decode_fp8_q_col), so the dot products are unchanged.
//  - V (transposed): thread (g, t) gets bytes 2g, 2g + 1 of keys 2t and 2t + 1; paired by
//    key (one byte permute), they are the B fragments of column g of two n-tiles: 2c holds
//    the even columns of chunk c (16 c + 2 g), 2c + 1 the odd ones. So o[nt][e] is output
//    column 16 (nt / 2) + 4 t + 2 (e & 1) + (nt & 1) (decode_epilogue's kFp8).
// kScaledQ (bf16 q, decode_fp8_scales_q): T is fp16 and q_unscale[i] undoes the scale of
// row g + 8 i's q (decode_load_q), applied to the scores before the softmax.
template <typename T, int D, bool kScaledQ, bool kMaskV = false, class QFrag>
CLO_DEVICE void decode_warp_tile_fp8(const QFrag& q_frag, const T* ks, const T* vs, int lg, int r0, int tok0,
                                     const DecodeSplitRange& range, const DecodeKernelParams& p,
                                     float (&o)[D / 8][4], float (&row_max)[2], float (&row_sum)[2],
                                     const float (&q_unscale)[2], const DecodeVKeyMask& vmask = {}) {
  static_assert(D % 32 == 0, "k-steps and chunks go in pairs");
  const int lane = threadIdx.x & 31;
  float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
  // Matrices of one ldmatrix_x4: (keys 0-7, chunk kk), (0-7, kk + 1), (8-15, kk), (8-15, kk + 1).
  const int k_row = r0 + (lane & 7) + (lane >> 4) * 8, k_next = (lane >> 3) & 1;
  constexpr int kPairs = D / 32;
  uint32_t bk[kPairs][4];
#pragma unroll
  for (int i = 0; i < kPairs; ++i) ldmatrix_x4(bk[i], ks + decode_kv_offset<D / 2>(k_row, 2 * i + k_next, lg));
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // k-step 2 i + h
      uint32_t a[4];
      q_frag(2 * i + h, a);
#pragma unroll
      for (int j = 0; j < 2; ++j) {  // n8 tile: keys 8 j ..
        const uint32_t x = bk[i][2 * j + h];
        const uint32_t b[2] = {e4m3x2_to<T>(static_cast<uint16_t>(x)), e4m3x2_to<T>(static_cast<uint16_t>(x >> 16))};
        mma_m16n8k16<T>(s[j], a, b);
      }
    }
  }
  if constexpr (kScaledQ) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] *= q_unscale[e >> 1];
  }
  uint32_t pa[4];
  decode_tile_softmax<T, D>(s, tok0, range, p, o, row_max, row_sum, pa);
  // Matrices of one ldmatrix_x4_trans: (keys 0-7, chunk c), (8-15, c), (0-7, c + 1), (8-15, c + 1).
  const int v_row = r0 + (lane & 7) + ((lane >> 3) & 1) * 8, v_next = lane >> 4;
#pragma unroll
  for (int c = 0; c < D / 16; c += 2) {
    uint32_t bv[4];
    ldmatrix_x4_trans(bv, vs + decode_kv_offset<D / 2>(v_row, c + v_next, lg));
    decode_mask_v_frags<kMaskV>(bv, vmask);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // chunk c + h
      // bytes (key 2t col 2g, key 2t col 2g+1, key 2t+1 col 2g, key 2t+1 col 2g+1) -> pairs by key
      const uint32_t lo = __byte_perm(bv[2 * h], 0u, 0x3120), hi = __byte_perm(bv[2 * h + 1], 0u, 0x3120);
      const uint32_t even[2] = {e4m3x2_to<T>(static_cast<uint16_t>(lo)), e4m3x2_to<T>(static_cast<uint16_t>(hi))};
      const uint32_t odd[2] = {e4m3x2_to<T>(static_cast<uint16_t>(lo >> 16)),
                               e4m3x2_to<T>(static_cast<uint16_t>(hi >> 16))};
      mma_m16n8k16<T>(o[2 * (c + h)], pa, even);
      mma_m16n8k16<T>(o[2 * (c + h) + 1], pa, odd);
    }
  }
}

// Query row (b, head, qi): its index in the partials' and lse's [B, Hq, Nq] order, and its
// output row.
CLO_DEVICE int64_t decode_row_id(const DecodeKernelParams& p, int b, int head, int qi) {
  return (static_cast<int64_t>(b) * p.num_q_heads + head) * p.seq_len_q + qi;
}
template <typename T>
CLO_DEVICE T* decode_out_row(const DecodeKernelParams& p, int b, int head, int qi) {
  return static_cast<T*>(p.out) + b * p.o_sb + head * p.o_sh + qi * p.o_sn;
}

// Four output columns of each of kItems query rows (and its lse) from the partials of their
// first `n` splits, written by other blocks (ld.global.cg, never through L1): `locate(i, ps,
// po)` gives item i's first split's (max, sum) and columns (split s at s * split_stride and s *
// split_stride * cols after them) and returns whether the item is live; `store(i, m, l, acc,
// nan_row)` writes a live item's folded row. Every item's loads of a batch of kBatch splits are
// issued before any is used: kItems x kBatch loads per L2 round trip. `nan_seen`: the rows are
// NaN already (a bad length, a stale split group).
template <int kBatch, int kItems, class Locate, class Store>
CLO_DEVICE void decode_merge_items(int64_t split_stride, int cols, int n, bool nan_seen, Locate&& locate,
                                   Store&& store) {
  float m[kItems], l[kItems];
  float4 acc[kItems];
  bool nan_row[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    m[i] = kNegInf;
    l[i] = 0.f;
    acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    nan_row[i] = nan_seen;
  }
  for (int s0 = 0; s0 < n; s0 += kBatch) {
    float2 st[kItems][kBatch];
    float4 x[kItems][kBatch];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const float2* ps;
      const float* po;
      const bool live = locate(i, ps, po);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (live && s0 + j < n) {
          st[i][j] = __ldcg(ps + (s0 + j) * split_stride);
          x[i][j] = __ldcg(reinterpret_cast<const float4*>(po + (s0 + j) * split_stride * cols));
        } else {
          decode_fold_neutral(st[i][j], x[i][j]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) decode_fold_loaded<kBatch>(st[i], x[i], m[i], l[i], acc[i], nan_row[i]);
  }
#pragma unroll
  for (int i = 0; i < kItems; ++i) store(i, m[i], l[i], acc[i], nan_row[i]);
}
// A query row's four columns from (m, l, acc) (and its lse, where `lse` is not null).
template <typename T>
CLO_DEVICE void decode_store_row_cols(float m, float l, const float4& acc, bool nan_row, T* out, float* lse) {
  const float inv = nan_row ? __int_as_float(0x7fc00000) : (l > 0.f ? 1.f / l : 0.f);
  if (lse != nullptr) *lse = decode_row_lse(m, l, nan_row);
  *reinterpret_cast<uint2*>(out) =
      make_uint2(pack_float2<T>(acc.x * inv, acc.y * inv), pack_float2<T>(acc.z * inv, acc.w * inv));
}
// Four output columns of one query row (and its lse, where `lse` is not null) from the
// partials of its first `n` splits (split s's (max, sum) at ps[s * split_stride], its columns
// at po + s * split_stride * cols): decode_merge_items' one-item case, kBatch splits per L2
// round trip. `nan_seen`: the row is NaN already (a bad length, a stale split group).
template <typename T, int kBatch>
CLO_DEVICE void decode_merge_row_cols(const float2* ps, const float* po, int64_t split_stride, int cols, int n,
                                      bool nan_seen, T* out, float* lse) {
  decode_merge_items<kBatch, 1>(
      split_stride, cols, n, nan_seen,
      [&](int, const float2*& item_ps, const float*& item_po) {
        item_ps = ps;
        item_po = po;
        return true;
      },
      [&](int, float m, float l, const float4& acc, bool nan_row) {
        decode_store_row_cols<T>(m, l, acc, nan_row, out, lse);
      });
}

// decode_epilogue's fused merge: the items (row, 4 columns) a thread folds together where a
// block's `items` outnumber its `threads`, up to 4 (D = 128: 32 rows on 256 or 288 threads, 16
// rows on 160), so that their loads share L2 round trips.
constexpr int decode_fold_items(int items, int threads) {
  const int per_thread = (items + threads - 1) / threads;
  return per_thread < 4 ? per_thread : 4;
}
static_assert(decode_fold_items(1024, 256) == 4 && decode_fold_items(1024, 288) == 4 && decode_fold_items(512, 160) == 4 &&
              decode_fold_items(256, 160) == 2 && decode_fold_items(128, 160) == 1);
// Epilogue shared by the decode kernels: merge the math warps' online-softmax states
// (log-sum-exp through smem), then write `out` (1 split) or this split's partials;
// with splits, count the split in on the (batch, KV head, row tile)'s counter, and
// the last of its num_splits blocks merges all splits' rows. No block ever waits for
// another. Warps >= kMathWarps (a producer) hold no state and only help with the loops.
// `smem` is the (now free) pipeline buffer; `bad` marks a bad block index or length
// (the rows become NaN).
// kFp8 (FP8 caches): o holds columns in decode_warp_tile_fp8's order, and V's
// dequantization scale (p.v_scale) multiplies it here, where it is stored.
// kMathOnly (the balanced schedule's kernel): only the kThreads math threads run it, on
// named barrier kEpilogueBarrier and its own `smem` (the producer warp meanwhile fetches
// the next piece's tiles into the pipeline buffer).
// kRowTiles: the block's 16-row MMA tiles (rows row_tile * 16 * kRowTiles ..); math warp w
// holds the state of tile w / (kMathWarps / kRowTiles), merged with that tile's warps only.
// kNarrow: the math warps hold decode_warp_tile_narrow's state (O^T fragments, rows 2t, 2t + 1).
// kMayCluster: the block may run in a split cluster (p.split_cluster), its smem room for it.
constexpr int kEpilogueBarrier = 2;
template <typename T, int D, int kThreads, int kMathWarps, bool kFp8 = false, bool kMathOnly = false,
          int kRowTiles = 1, bool kNarrow = false, bool kMayCluster = false>
CLO_DEVICE void decode_epilogue(const DecodeKernelParams& p, const DecodeWork& w,
                                float (&o)[kNarrow ? D / 16 : D / 8][4], const float (&row_max)[2],
                                float (&row_sum)[2], bool bad, int eff, unsigned char* smem) {
  static_assert(!(kNarrow && kFp8), "the narrow tile runs 16-bit caches");
  static_assert(!(kMayCluster && kMathOnly), "the balanced schedule's epilogue never runs in a cluster");
  constexpr int kDTiles = D / 8;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int kvh = w.kvh, b = w.b, split = w.split;
  const bool math = warp < kMathWarps;
  static_assert(kMathWarps % kRowTiles == 0, "each row tile has its own math warps");
  constexpr int kKeyWarps = kMathWarps / kRowTiles;  // warps splitting one tile's keys
  const int row0 = w.row_tile * kRowTiles * kRowsPerBlock;  // the block's first row
  auto sync = [] {
    if constexpr (kMathOnly) named_barrier_sync(kEpilogueBarrier, kThreads);
    else __syncthreads();
  };
  auto sync_or = [](bool x) {
    if constexpr (kMathOnly) return named_barrier_or(kEpilogueBarrier, kThreads, x);
    else return __syncthreads_or(x) != 0;
  };
  // A row's partial sums sit across its quad (t), or across g (kNarrow).
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int x = kNarrow ? 4 : 1; x < (kNarrow ? 32 : 4); x <<= 1)
      row_sum[i] += __shfl_xor_sync(0xffffffffu, row_sum[i], x);
  const int rows_here = min(kRowTiles * kRowsPerBlock, p.rows - row0);
  CLO_DEV_CHAOS_POINT(10);
  bad = sync_or(bad);  // also: every warp is done with the pipeline buffers
#ifdef CLO_DEV_STAMPS
  unsigned long long* stamp =
      p.dev_stamps + kDecodeDevStamps * (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  if (p.dev_stamps != nullptr && tid == 0) stamp[10] = clock64();
#endif
  // Each math warp's (max, sum) and unscaled O of the block's real rows (GQA 32/8: 4 of
  // the 16); the merge weights are applied where the rows are summed, so one barrier
  // separates the writes from the reads.
  float2* warp_state = reinterpret_cast<float2*>(smem);                  // [math warps][16]
  float* obuf = reinterpret_cast<float*>(warp_state + kMathWarps * kRowsPerBlock);  // [math warps][16][D + 4]
  constexpr int kOStride = D + 4;
  CLO_DEV_CHAOS_POINT(11);
  if constexpr (kNarrow) {
    const int tile_rows = warp / kKeyWarps * kRowsPerBlock;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = 2 * t4 + j;
      if (!math || tile_rows + r >= rows_here) continue;
      if (g == 0)
        warp_state[warp * kRowsPerBlock + r] = make_float2(row_max[j] == -INFINITY ? kNegInf : row_max[j], row_sum[j]);
      float* ob = obuf + (warp * kRowsPerBlock + r) * kOStride + g;
#pragma unroll
      for (int m = 0; m < D / 16; ++m) {
        ob[16 * m] = o[m][j];
        ob[16 * m + 8] = o[m][2 + j];
      }
    }
  } else if (math) {
    const int tile_rows = warp / kKeyWarps * kRowsPerBlock;  // this warp's tile's first row in the block
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = g + 8 * i;
      if (tile_rows + r >= rows_here) continue;
      if (t4 == 0) warp_state[warp * kRowsPerBlock + r] = make_float2(row_max[i] == -INFINITY ? kNegInf : row_max[i],
                                                                      row_sum[i]);
      if constexpr (kFp8) {  // o[2m], o[2m + 1]: columns 16 m + 4 t4 .. + 3
        float* ob = obuf + (warp * kRowsPerBlock + r) * kOStride + 4 * t4;
        const float vs = p.v_scale;
#pragma unroll
        for (int m = 0; m < kDTiles / 2; ++m)
          *reinterpret_cast<float4*>(ob + m * 16) = make_float4(o[2 * m][2 * i] * vs, o[2 * m + 1][2 * i] * vs,
                                                                o[2 * m][2 * i + 1] * vs, o[2 * m + 1][2 * i + 1] * vs);
      } else {
        float* ob = obuf + (warp * kRowsPerBlock + r) * kOStride + 2 * t4;
#pragma unroll
        for (int n = 0; n < kDTiles; ++n)
          *reinterpret_cast<float2*>(ob + n * 8) = make_float2(o[n][2 * i], o[n][2 * i + 1]);
      }
    }
  }
  CLO_DEV_CHAOS_POINT(12);
  sync();
  CLO_DEV_CHAOS_POINT(13);
#ifdef CLO_DEV_STAMPS
  if (p.dev_stamps != nullptr && tid == 0) stamp[11] = clock64();
#endif

  const float nan = __int_as_float(0x7fc00000);
  constexpr int kD4 = D / 4;  // float4 columns
  // Block row r's merged (max, sum) over its tile's math warps (log-sum-exp) and its O
  // columns d..d+3.
  auto warp_sum = [&](int r, int d, float4& acc) {
    // slot of (the tile's first warp, the row in its tile); warp k of the tile at + k * 16
    const int slot0 = (r / kRowsPerBlock) * kKeyWarps * kRowsPerBlock + r % kRowsPerBlock;
    float m = kNegInf;
#pragma unroll
    for (int w = 0; w < kKeyWarps; ++w) m = fmaxf(m, warp_state[slot0 + w * kRowsPerBlock].x);
    float l = 0.f;
    acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kKeyWarps; ++w) {
      const float2 st = warp_state[slot0 + w * kRowsPerBlock];
      const float wt = exp2f(st.x - m);
      const float4 x = *reinterpret_cast<const float4*>(obuf + (slot0 + w * kRowsPerBlock) * kOStride + d);
      l += st.y * wt;
      acc.x += x.x * wt;
      acc.y += x.y * wt;
      acc.z += x.z * wt;
      acc.w += x.w * wt;
    }
    return make_float2(m, l);
  };
  auto out_ptr = [&](int gr, int d) {
    return reinterpret_cast<uint2*>(decode_out_row<T>(p, b, kvh * p.group + gr / p.seq_len_q, gr % p.seq_len_q) + d);
  };
  auto row_id_of = [&](int gr) { return decode_row_id(p, b, kvh * p.group + gr / p.seq_len_q, gr % p.seq_len_q); };
  // Head pairs: only the row's own head's columns are computed and stored (the other
  // half of the block's row is the other head's), and partials are that wide.
  const int head_cols = decode_head_cols<D>(p);
  const int items = rows_here * kD4;  // (row, 4 columns) of this block's real rows
  if (w.num_splits == 1) {
    for (int idx = tid; idx < items; idx += kThreads) {
      const int r = idx / kD4, d = (idx % kD4) * 4;
      const int gr = row0 + r, col = decode_own_col<D>(p, gr, d);
      if (col < 0) continue;
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && tid == 0) {
        asm volatile("" ::"r"(col), "r"(gr));
        stamp[15] = clock64();
      }
#endif
      float4 acc;
      const float2 st = warp_sum(r, d, acc);
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && tid == 0) {
        asm volatile("" ::"f"(st.y), "f"(acc.x));
        stamp[16] = clock64();
      }
#endif
      const float inv = bad ? nan : (st.y > 0.f ? 1.f / st.y : 0.f);
      if (p.lse != nullptr && col == 0) p.lse[row_id_of(gr)] = decode_row_lse(st.x, st.y, bad);
      *out_ptr(gr, col) =
          make_uint2(pack_float2<T>(acc.x * inv, acc.y * inv), pack_float2<T>(acc.z * inv, acc.w * inv));
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && tid == 0) stamp[17] = clock64();
#endif
    }
    return;
  }

  // ---- a split cluster (p.split_cluster: the unit's num_splits blocks as one cluster, rank =
  // w.split): each block leaves its rows' merged state and columns in its own smem past the warp
  // states; after a cluster barrier, block k folds its share of the rows (rows [k s, (k + 1) s)
  // of s = ceil(rows / splits)) from every block's smem (ld.shared::cluster, its own included)
  // in split order, two splits at a time, and stores them; a second barrier keeps each block's
  // smem alive until the others have read it. Compiled where kMayCluster: the TMA kernel's even
  // grid, where its pipeline buffer holds that smem (decode_split_cluster_fits).
  if constexpr (kMayCluster) {
    if (p.split_cluster) {
      const int n_splits = w.num_splits;  // <= kDecodeMaxClusterSplits (the launcher)
      float4* mine_o = reinterpret_cast<float4*>(obuf + kMathWarps * kRowsPerBlock * kOStride);  // [rows][D / 4]
      float2* mine_st = reinterpret_cast<float2*>(mine_o + kRowTiles * kRowsPerBlock * kD4);   // [rows]
      for (int idx = tid; idx < items; idx += kThreads) {
        float4 acc;
        float2 st;
        if (split < eff) {  // a split past the sequence's last tile holds no key
          st = warp_sum(idx / kD4, (idx % kD4) * 4, acc);
          if (bad) {
            acc = make_float4(nan, nan, nan, nan);
            st = make_float2(nan, nan);
          }
        } else {
          decode_fold_neutral(st, acc);
        }
        mine_o[idx] = acc;
        if (idx % kD4 == 0) mine_st[idx / kD4] = st;
      }
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && tid == 0) stamp[15] = clock64();
#endif
      cluster::sync();
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && tid == 0) stamp[16] = clock64();
#endif
      const int share = div_ceil(rows_here, n_splits);
      const int own_lo = min(split * share, rows_here) * kD4, own_hi = min(split * share + share, rows_here) * kD4;
      for (int idx = own_lo + tid; idx < own_hi; idx += kThreads) {
        const int r = idx / kD4, d = (idx % kD4) * 4;
        const int gr = row0 + r, col = decode_own_col<D>(p, gr, d);
        if (col < 0) continue;
        float m = kNegInf, l = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        bool nan_row = false;
        for (int j0 = 0; j0 < n_splits; j0 += 2) {
          decode_fold_splits<2>(
              j0, min(2, n_splits - j0),
              [&](int j, float2& st, float4& x) {
                st = cluster::load_remote_float2(cluster::map_shared(mine_st + r, j));
                x = cluster::load_remote_float4(cluster::map_shared(mine_o + idx, j));
              },
              m, l, acc, nan_row);
        }
        decode_store_row_cols<T>(m, l, acc, nan_row, reinterpret_cast<T*>(out_ptr(gr, col)),
                                 p.lse != nullptr && col == 0 ? p.lse + row_id_of(gr) : nullptr);
      }
      cluster::sync();
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && tid == 0) stamp[17] = clock64();
#endif
      return;
    }
  }

  // ---- split-KV: this split's partials (splits past the sequence's last tile have
  // none), then the count.
  if (split < eff) {
    for (int idx = tid; idx < items; idx += kThreads) {
      const int r = idx / kD4, d = (idx % kD4) * 4;
      const int gr = row0 + r, col = decode_own_col<D>(p, gr, d);
      if (col < 0) continue;
      float4 acc;
      const float2 st = warp_sum(r, d, acc);
      if (bad) acc = make_float4(nan, nan, nan, nan);
      const int64_t slot = split * p.total_rows + row_id_of(gr);
      *reinterpret_cast<float4*>(p.partial_o + slot * head_cols + col) = acc;
      if (col == 0) p.partial_state[slot] = bad ? make_float2(nan, nan) : st;
    }
  }
#ifdef CLO_DEV_STAMPS
  if (p.dev_stamps != nullptr && tid == 0) stamp[15] = clock64();
#endif
  if (p.merge_apart) return;  // decode_split_merge_kernel or decode_balanced_merge_kernel merges
  // Count the split in. The barrier orders every thread's partials before thread 0's
  // acq_rel add at gpu scope (release, cumulative over the block); in the last block the
  // same add acquires the other splits' partials, which its threads read after the barrier.
  CLO_DEV_CHAOS_POINT(14);
  sync();
  bool last = false, stale = false;
  if (tid == 0) {
    int* counter = p.split_counters + static_cast<int64_t>(b) * p.units_x + w.unit_x;
    const int before = atomic_add_acq_rel_gpu(counter, 1);
    // Counted from kSplitCounterIdle (decode.h): modulo 2^32, so any start is compared safely.
    const unsigned arrived = static_cast<unsigned>(before) - static_cast<unsigned>(kSplitCounterIdle);
    last = arrived == static_cast<unsigned>(w.num_splits - 1);
    // every block of the group has counted: ready for the next call / replay
    if (last) atomicExch(counter, kSplitCounterIdle);
    // A count outside [0, splits): the counter was not at rest when the call began (a
    // workspace not from the helpers, or overwritten). No block could tell it is the
    // last, nothing would merge and `out` would keep stale values: NaN instead, on this
    // and (the counter is left as it is) every later call with this workspace.
    stale = arrived >= static_cast<unsigned>(w.num_splits);
#ifdef CLO_DEV_STAMPS
    if (p.dev_stamps != nullptr) stamp[16] = clock64();
#endif
  }
  if (!sync_or(last || stale)) {
#ifdef CLO_DEV_STAMPS
    if (p.dev_stamps != nullptr && tid == 0) stamp[17] = stamp[18] = stamp[19] = 0;  // not this call's merger
#endif
    return;
  }
  // A stale group "merges" no split, as NaN: the merge below writes its rows.
  const bool stale_group = sync_or(stale);
  const int merged = stale_group ? 0 : eff;

  // Merge (log-sum-exp) the eff splits of this block's rows: a thread's items one at a time,
  // kFoldBatch splits per L2 round trip (16 would take the D < 128 kernels from ~95 to ~128
  // registers, NOTES v13); or at head_dim 128 and more, where the items outnumber the threads,
  // kFoldItems of a thread's items (kThreads apart) together over 2 splits per round trip
  // (decode_merge_items, fewer registers than the one-item batch), where that takes fewer round
  // trips: 32 rows over 2-4 splits (the balanced schedule's 2-3 pieces) in one or two, not one
  // per item (four on 256 threads); many splits keep the one-item batch (MQA B=8/16K at 16
  // splits: 37.5 us one at a time, 43.3 us together; NOTES.md "Stop 105"). Below 128 the items'
  // batch took the paged D = 96 TMA kernels from 128-143 to 148-151 registers and spilled the
  // narrow D = 64 ones; it spilled the narrow paged balanced kernel at 128 (units of up to 8
  // rows: two items a thread).
  constexpr int kFoldBatch = D >= 128 ? 16 : 8;
#ifdef CLO_DEV_FOLD_ONE_ITEM  // dev A/B builds only: one item at a time everywhere (the fold before stop 105)
  constexpr int kFoldItems = 1;
#else
  constexpr int kFoldItems = D >= 128 && !kNarrow ? decode_fold_items(kRowTiles * kRowsPerBlock * kD4, kThreads) : 1;
#endif
  const bool items_together =
      kFoldItems > 1 && div_ceil(items, kFoldItems * kThreads) * div_ceil(merged, 2) <
                            div_ceil(items, kThreads) * div_ceil(merged, kFoldBatch);
  if (!items_together) {
    for (int idx = tid; idx < items; idx += kThreads) {
      const int r = idx / kD4, d = (idx % kD4) * 4;
      const int gr = row0 + r, col = decode_own_col<D>(p, gr, d);
      if (col < 0) continue;
      const int64_t row_id = row_id_of(gr);
      decode_merge_row_cols<T, kFoldBatch>(p.partial_state + row_id, p.partial_o + row_id * head_cols + col,
                                           p.total_rows, head_cols, merged, stale_group,
                                           reinterpret_cast<T*>(out_ptr(gr, col)),
                                           p.lse != nullptr && col == 0 ? p.lse + row_id : nullptr);
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && idx == 0) stamp[18] = stamp[19] = clock64();
#endif
    }
  } else {
    for (int idx0 = tid; idx0 < items; idx0 += kFoldItems * kThreads) {
      // item i: (row, 4 columns) idx0 + i * kThreads; its column of the row's own head, or -1
      auto own_col = [&](int i, int& gr) {
        const int idx = idx0 + i * kThreads;
        gr = row0 + idx / kD4;
        return idx < items ? decode_own_col<D>(p, gr, (idx % kD4) * 4) : -1;
      };
      decode_merge_items<2, kFoldItems>(
          p.total_rows, head_cols, merged, stale_group,
          [&](int i, const float2*& ps, const float*& po) {
            int gr;
            const int col = own_col(i, gr);
            const int64_t row_id = col >= 0 ? row_id_of(gr) : 0;
            ps = p.partial_state + row_id;
            po = p.partial_o + row_id * head_cols + max(col, 0);
            return col >= 0;
          },
          [&](int i, float m, float l, const float4& acc, bool nan_row) {
            int gr;
            const int col = own_col(i, gr);
            if (col < 0) return;
            decode_store_row_cols<T>(m, l, acc, nan_row, reinterpret_cast<T*>(out_ptr(gr, col)),
                                     p.lse != nullptr && col == 0 ? p.lse + row_id_of(gr) : nullptr);
          });
#ifdef CLO_DEV_STAMPS
      if (p.dev_stamps != nullptr && idx0 == 0) stamp[18] = stamp[19] = clock64();
#endif
    }
  }
#ifdef CLO_DEV_STAMPS
  if (p.dev_stamps != nullptr && tid == 0) stamp[17] = clock64();
#endif
}

// T: q / out (and the math); KVT: the cache's element type, T or an FP8 byte (the warps
// dequantize their fragments, decode_warp_tile_fp8). kNarrow (decode_narrow_rows_pay): units
// of at most 8 rows on decode_warp_tile_narrow.
template <typename T, int D, int kStages, class KV, typename KVT = T, bool kNarrow = false>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_attention_kernel(const DecodeKernelParams p, const KV kv) {
  static_assert(kStages >= 2, "the pipeline needs two stages");
  constexpr bool kDequant = decode_dequantizes<T, KVT>();
  static_assert(!(kNarrow && kDequant), "the narrow tile runs 16-bit caches");
  constexpr int kStageCols = decode_stage_cols<T, D, KVT>();  // 16-bit columns of a stage tile's rows
  constexpr int kQStride = decode_smem_stride<D>();
  constexpr int kChunksPerRow = kStageCols / 8;  // 16-byte chunks
  constexpr int kColsPerChunk = 16 / static_cast<int>(sizeof(KVT));
  constexpr int kLoads = kTileTokens * kChunksPerRow / kDecodeThreads;
  static_assert(kTileTokens * kChunksPerRow % kDecodeThreads == 0, "tile must split evenly over threads");
  static_assert(D % 16 == 0 && D <= 256, "head_dim must be a multiple of 16 up to 256");
  constexpr int kTileElems = decode_kv_tile_elems<kStageCols>();
  constexpr int kDTiles = D / 8;
  constexpr int kRowBytes = D * static_cast<int>(sizeof(KVT));

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = decode_smem_base(smem_raw);
  T* kv_s = reinterpret_cast<T*>(smem);  // [stages][K, V][tile (decode_kv_offset)]
  T* q_s = reinterpret_cast<T*>(smem + decode_pipeline_smem_bytes<T, D, kStages, KVT>());

  const int tid = threadIdx.x, warp = tid >> 5;
  const DecodeWork w = decode_block_work(p);
  const int kvh = w.kvh, b = w.b;

  // PDL: no global memory is read before the previous kernel (which may write q, the
  // cache or the tables) has completed (prefetches only); then the next kernel may
  // start launching.
  const int spec_start = decode_split_start(p, w, kv.capacity());
  if (warp == 0) decode_prefetch_inputs<D>(p, w, kv, spec_start);
  pdl_wait_then_release();
  const auto cur = kv.cursor(b, kvh);
  const int len_raw = kv.load_len(b);
  // Start-up chain: seq_len -> block table -> first K/V tile, three dependent DRAM
  // round trips. The table lookups of the first tiles are issued before seq_len
  // arrives, assuming the sequence fills the table (split 0 always starts at key 0;
  // other splits start where a full table would put them). Entries are loaded for
  // every position below the table capacity, so they cover any real end; a wrong
  // guess of the start is redone below (one round trip, as without speculation).
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

  decode_load_q<T, D, kQStride, kDequant>(p, w, q_s, kDecodeThreads);
  bool bad = false;
  const int kv_len = kv.check_len(len_raw, bad);
  const DecodeSplitRange range = decode_split_range(p, w, kv_len, w.row_tile * kRowsPerBlock, kNarrow);
  const int eff = range.eff, start = range.start, end = range.end, n_tiles = range.n_tiles;
  if (start != spec_start) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) lookup_at(start, end, s, first[s]);
  }

  const KVT* k_base = static_cast<const KVT*>(kv.k);
  const KVT* v_base = static_cast<const KVT*>(kv.v);

  // Whether load i's 16-byte chunk lies within the K/V row (a narrower head dim's padding
  // columns stay zero-filled, never loaded). Where a thread copies the same chunk of
  // every row it loads (D = 64, 128, 256), one flag; else (D = 96) a bit per load. Per-load
  // compares kept live across the loop spilled the D = 256 kernel.
  constexpr bool kSameChunk = kDecodeThreads % kChunksPerRow == 0;
  static_assert(kLoads <= 32, "one bit per load");
  uint32_t in_row = 0;
#pragma unroll
  for (int i = 0; i < (kSameChunk ? 1 : kLoads); ++i)
    in_row |= static_cast<uint32_t>((tid + i * kDecodeThreads) % kChunksPerRow * kColsPerChunk < p.row_cols) << i;

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
      bool valid = pos < end && pos >= range.lowest && ((in_row >> (kSameChunk ? 0 : i)) & 1u);
      const int e = entries[i];
      if (valid && !cur.entry_ok(e)) {
        bad = true;
        valid = false;
      }
      const KVT* ksrc = valid ? k_base + cur.k_offset(e, pos) + ch * kColsPerChunk : k_base;
      const KVT* vsrc = valid ? v_base + cur.v_offset(e, pos) + ch * kColsPerChunk : v_base;
#ifdef CLO_DEV_CP_ASYNC_L2_128
      constexpr int kHintBytes = kRowBytes < 128 ? kRowBytes : 128;  // NOTES.md, "L2 promotion on the H200"
#else
      constexpr int kHintBytes = kRowBytes;
#endif
      cp_async_16_prefetch<kHintBytes>(ks + decode_kv_offset<kStageCols>(tok, ch), ksrc, valid);
      cp_async_16_prefetch<kHintBytes>(vs + decode_kv_offset<kStageCols>(tok, ch), vsrc, valid);
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

  constexpr int kOTiles = kNarrow ? D / 16 : kDTiles;  // O^T fragments of 16 columns (kNarrow), or 8
  float o[kOTiles][4];
#pragma unroll
  for (int n = 0; n < kOTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // this lane's share; summed over the quad (kNarrow: over g) at the end
  // Q fragments from smem per tile (this kernel runs up to 3 blocks per SM: no
  // registers to spare for them).
  const auto q_smem = [q_s](int kk, uint32_t (&a)[4]) { decode_q_frag<T, kQStride>(q_s, kk, a); };
  constexpr bool kScaledQ = decode_fp8_scales_q<T, KVT>();
  using MathT = std::conditional_t<kScaledQ, __half, T>;
  float q_unscale[2] = {1.f, 1.f};

  for (int t = 0; t < n_tiles; ++t) {
    CLO_DEV_CHAOS_POINT(20);
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t visible to all; stage (t-1) % kStages free to overwrite
    CLO_DEV_CHAOS_POINT(21);
    {
      const int nt = t + kStages - 1;
      if (nt < n_tiles) issue_tile(nt, nt % kStages, entries);
      lookup_tile(nt + 1, entries);
      cp_async_commit();
    }
    const int tok0 = start + t * kTileTokens + warp * 16;
    if (tok0 >= end) continue;  // this warp's 16 keys are all past the end (warp-uniform)
    const T* ks = kv_s + (t % kStages) * 2 * kTileElems;
    if constexpr (kScaledQ) decode_read_q_unscale<D, kQStride>(q_s, q_unscale);  // after the barrier above
    if constexpr (kNarrow) {
      decode_warp_tile_narrow<T, D>(q_smem, ks, ks + kTileElems, kDecodeUngroupedLog2, warp * 16, tok0, range, p, o,
                                    row_max, row_sum);
    } else if constexpr (kDequant) {
      const MathT* kh = reinterpret_cast<const MathT*>(ks);
      decode_warp_tile_fp8<MathT, D, kScaledQ>(q_smem, kh, kh + kTileElems, kDecodeUngroupedLog2, warp * 16, tok0,
                                               range, p, o, row_max, row_sum, q_unscale);
    } else {
      decode_warp_tile<T, D>(q_smem, ks, ks + kTileElems, kDecodeUngroupedLog2, warp * 16, tok0, range, p, o,
                             row_max, row_sum);
    }
  }
  cp_async_wait_all();

  decode_epilogue<T, D, kDecodeThreads, kDecodeWarps, kDequant, false, 1, kNarrow>(p, w, o, row_max, row_sum, bad, eff,
                                                                                  smem);
}

// Once per device and kernel instantiation (`state`, the caller's static array): the
// dynamic smem size and the largest smem carveout (a streaming kernel needs no L1
// share; two blocks per SM need 2 x 107 KB at D=128). With `need_sm90`, a kernel whose
// loaded image has no sm_90 code (a build without it, run through PTX JIT) gives
// cudaErrorNotSupported, and does so on every later call.
template <class Kernel>
cudaError_t configure_decode_kernel_once(Kernel kernel, size_t smem, bool need_sm90, int (&state)[64]) {
  int& st = state[current_device_slot()];  // 0 unknown, 1 configured, -1 unusable
  if (st == 0) {
    if (need_sm90) {
      cudaFuncAttributes attr{};
      const cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
      if (err != cudaSuccess) return err;
      if (attr.binaryVersion < 90) st = -1;
    }
    if (st == 0) {
      cudaError_t err = set_dynamic_smem(kernel, smem);
      if (err != cudaSuccess) return err;
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 static_cast<int>(cudaSharedmemCarveoutMaxShared));
      if (err != cudaSuccess) return err;
      st = 1;
    }
  }
  return st > 0 ? cudaSuccess : cudaErrorNotSupported;
}

// The least shared memory per block among sm_80+ GPUs' opt-in limits (sm_86/89/120).
constexpr size_t kSmallestSmemOptin = 99 * 1024;
// The cp.async kernel's preferred pipeline depth: decode_pipeline_stages for 16-bit
// caches; FP8 stages are half as large: 6 (3 at D = 256), about the bytes in flight of
// the 16-bit plan.
template <typename T, int D, typename KVT>
constexpr int decode_cp_async_pref_stages() {
  if constexpr (decode_dequantizes<T, KVT>()) return D <= 128 ? 6 : 3;
  return decode_pipeline_stages(D);
}
// The smaller depth where the preferred one does not fit 99-KB GPUs: 4 from 6, else 2.
constexpr int decode_cp_async_fallback_stages(int pref) { return pref > 4 ? 4 : 2; }
// The cp.async kernel's pipeline depth on a device allowing `limit` bytes per block:
// the preferred depth where it fits, else the fallback (16-bit D = 96 and 128: 2, FP8 D
// <= 128: 4, FP8 D = 256: 2, on 99-KB GPUs), else 0: no kernel (16-bit D = 256 needs 137
// KB at 2 stages; decode_head_dim_fits says so before any launch).
template <typename T, int D, typename KVT = T>
constexpr bool decode_has_fallback_stages() {
  constexpr int kPref = decode_cp_async_pref_stages<T, D, KVT>();
  return kPref > 2 && decode_smem_bytes<T, D, kPref, KVT>() > kSmallestSmemOptin;
}
// The smallest plan instantiated at this head dim (decode_min_smem_bytes sizes it).
template <typename T, int D, typename KVT = T>
constexpr int decode_min_cp_async_stages() {
  constexpr int kPref = decode_cp_async_pref_stages<T, D, KVT>();
  return decode_has_fallback_stages<T, D, KVT>() ? decode_cp_async_fallback_stages(kPref) : kPref;
}
template <typename T, int D, typename KVT = T>
constexpr int decode_cp_async_stages(size_t limit) {
  constexpr int kPref = decode_cp_async_pref_stages<T, D, KVT>();
  if (decode_smem_bytes<T, D, kPref, KVT>() <= limit) return kPref;
  constexpr int kMin = decode_min_cp_async_stages<T, D, KVT>();
  return decode_smem_bytes<T, D, kMin, KVT>() <= limit ? kMin : 0;
}

// The split merge on its own (p.merge_apart): one thread per 4 columns of a query row folds
// the row's partials of every split that holds keys of its sequence (the count the split blocks
// used, from its length) and writes the output row (and its lse). The fused merge, by the last
// split block of a unit, folded kThreads items per L2 round trip, ~1.9 us each at the end of a
// call on the H200: 4 of them for 16-32 rows at head_dim 128 (csrc/decode/NOTES.md "Stop 70");
// since stop 105 it takes a thread's items together at few splits (decode_epilogue), and on the
// H100 the two ways read within 1-2 us of each other on those rows.
// Launched after the attention grid, as its PDL secondary on sm_90 (set-up overlaps its tail).
constexpr int kDecodeMergeThreads = 128;
template <typename T, class KV>
__global__ void __launch_bounds__(kDecodeMergeThreads) decode_split_merge_kernel(const DecodeKernelParams p,
                                                                                 const KV kv) {
  const int cols4 = p.row_cols / 4;
  const int64_t item = blockIdx.x * int64_t(kDecodeMergeThreads) + threadIdx.x;
  const bool live = item < p.total_rows * cols4;
  const int64_t row_id = live ? item / cols4 : 0;
  const int col = static_cast<int>(item % cols4) * 4;
  const int per_b = p.num_q_heads * p.seq_len_q;
  const int b = static_cast<int>(row_id / per_b), in_b = static_cast<int>(row_id % per_b);
  const int head = in_b / p.seq_len_q, qi = in_b % p.seq_len_q;
  pdl_wait_then_release();  // the split blocks' partials (and q / seq_lens writes before them)
  if (!live) return;
  bool bad = false;
  const int kv_len = kv.check_len(kv.load_len(b), bad);
  const int eff = split_count<kTileTokens>(p.num_splits, kv_len - decode_first_key(p, kv_len));
  T* out = decode_out_row<T>(p, b, head, qi) + col;
  decode_merge_row_cols<T, 16>(p.partial_state + row_id, p.partial_o + row_id * p.row_cols + col, p.total_rows,
                               p.row_cols, eff, bad, out, p.lse != nullptr && col == 0 ? p.lse + row_id : nullptr);
}

template <typename T, class KV>
cudaError_t launch_decode_split_merge(const DecodeKernelParams& p, const KV& kv, cudaStream_t stream, bool pdl) {
  const int64_t items = p.total_rows * (p.row_cols / 4);
  return launch_kernel(decode_split_merge_kernel<T, KV>,
                       dim3(static_cast<unsigned>(div_ceil<int64_t>(items, kDecodeMergeThreads))),
                       dim3(kDecodeMergeThreads), 0, stream, pdl, p, kv);
}

// The balanced schedule's merge on its own (p.merge_apart with p.streamk_blocks > 0): a cut
// unit's last piece is always the first piece of its block, which the block reaches at the
// start of its range while the unit's first piece closes another block's range, so the fused
// fold of the last piece to arrive sits at the end of nearly every block (four L2 round trips
// for a 32-row unit at head_dim 128 on 256 math threads). Blocks (i, c): block i's plan, as
// the balanced kernel's block i made it (decode_streamk_range, then by length where that
// kernel switched: the same seq_lens give the same pieces); where its first piece is the last
// of a cut unit (split num_splits - 1 > 0: later pieces start at a unit's first slot, split
// 0), chunk c of that unit's (row, 4 columns) items folds the unit's num_splits partials (every
// piece wrote its own, an empty one too: decode_split_range's eff). 16-bit caches, no head
// pairs (the partials are row_cols wide); unit_rows: 16 x the kernel's row tiles.
template <typename T, class KV>
__global__ void __launch_bounds__(kDecodeMergeThreads) decode_balanced_merge_kernel(const DecodeKernelParams p,
                                                                                    const KV kv, const int unit_rows) {
  pdl_wait_then_release();  // the pieces' partials (and seq_lens writes before the attention grid)
  DecodeStreamKRange sk = decode_streamk_range(p, kv.capacity());
  DecodeWork w = decode_streamk_piece(p, sk);
  if (p.streamk_by_len) {
    const DecodeStreamKRange by_len = decode_streamk_len_range(p, kv);
    if (by_len.tiles_cap == 0) {
      sk = by_len;
      w = decode_streamk_len_piece(p, kv, sk);
    }
  }
  if (w.num_splits < 2 || w.split != w.num_splits - 1) return;
  bool bad = false;
  kv.check_len(kv.load_len(w.b), bad);
  const int cols4 = p.row_cols / 4, row0 = w.row_tile * unit_rows;
  const int items = min(unit_rows, p.rows - row0) * cols4;
  for (int idx = blockIdx.y * kDecodeMergeThreads + threadIdx.x; idx < items;
       idx += gridDim.y * kDecodeMergeThreads) {
    const int gr = row0 + idx / cols4, col = (idx % cols4) * 4;
    const int head = w.kvh * p.group + gr / p.seq_len_q, qi = gr % p.seq_len_q;
    const int64_t row_id = decode_row_id(p, w.b, head, qi);
    T* out = decode_out_row<T>(p, w.b, head, qi) + col;
    decode_merge_row_cols<T, decode_partial_slots(2)>(p.partial_state + row_id, p.partial_o + row_id * p.row_cols + col,
                                                      p.total_rows, p.row_cols, w.num_splits, bad, out,
                                                      p.lse != nullptr && col == 0 ? p.lse + row_id : nullptr);
  }
}

// blocks: the balanced grid's; a unit's items spread over enough blocks for one per thread.
template <typename T, class KV>
cudaError_t launch_decode_balanced_merge(const DecodeKernelParams& p, const KV& kv, int unit_rows,
                                         cudaStream_t stream, bool pdl) {
  const int chunks = div_ceil(std::min(unit_rows, p.rows) * (p.row_cols / 4), kDecodeMergeThreads);
  return launch_kernel(decode_balanced_merge_kernel<T, KV>,
                       dim3(static_cast<unsigned>(p.streamk_blocks), static_cast<unsigned>(chunks)),
                       dim3(kDecodeMergeThreads), 0, stream, pdl, p, kv, unit_rows);
}

template <typename T, int D, int kStages, class KV, typename KVT, bool kNarrow>
cudaError_t launch_decode_attention_kernel_stages(const DecodeKernelParams& p, const KV& kv, dim3 grid,
                                                  cudaStream_t stream, bool pdl) {
  constexpr size_t smem = decode_smem_bytes<T, D, kStages, KVT>();
  auto kernel = decode_attention_kernel<T, D, kStages, KV, KVT, kNarrow>;
  static int state[64] = {0};
  const cudaError_t err = configure_decode_kernel_once(kernel, smem, false, state);
  if (err != cudaSuccess) return err;
  return launch_kernel(kernel, grid, dim3(kDecodeThreads), smem, stream, pdl, p, kv);
}

template <typename T, int D, typename KVT = T, bool kNarrow = false, class KV>
cudaError_t launch_decode_attention_kernel(const DecodeKernelParams& p, const KV& kv, dim3 grid,
                                           cudaStream_t stream, bool pdl) {
  constexpr int kStages = decode_cp_async_pref_stages<T, D, KVT>();
  const int stages = decode_cp_async_stages<T, D, KVT>(static_cast<size_t>(smem_budget_per_block()));
  if (stages == kStages)
    return launch_decode_attention_kernel_stages<T, D, kStages, KV, KVT, kNarrow>(p, kv, grid, stream, pdl);
  if constexpr (decode_has_fallback_stages<T, D, KVT>()) {
    constexpr int kMin = decode_min_cp_async_stages<T, D, KVT>();
    if (stages == kMin)
      return launch_decode_attention_kernel_stages<T, D, kMin, KV, KVT, kNarrow>(p, kv, grid, stream, pdl);
  }
  return cudaErrorNotSupported;
}

}  // namespace cuda_llm_ops::decode

#include "decode/decode_attention_tma.cuh"  // the TMA kernel (sm_90; see run_decode_attention)

namespace cuda_llm_ops::decode {

template <typename T, int D, bool kPaged, typename KVT>
cudaError_t run_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream, int pack_group) {
  constexpr bool kDequant = decode_dequantizes<T, KVT>();
  if (pack_group > 0 && !decode_runs_head_pairs<D>()) return cudaErrorInvalidValue;
  if (a.kv_fp8 != kDequant || (kDequant && a.head_dim % 16 != 0)) return cudaErrorInvalidValue;
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
  p.batch = a.batch;
  p.units_x = a.num_kv_heads * p.row_tiles;
  // FP8: K's dequantization scale multiplies every score, so it joins the softmax scale.
  const float scale = kDequant ? a.scale * a.k_scale : a.scale;
  p.scale_log2 = scale * kLog2e;
  p.cap_scale = a.logits_soft_cap > 0.f ? scale / a.logits_soft_cap : 0.f;
  p.v_scale = kDequant ? a.v_scale : 1.f;
  p.cap_log2 = a.logits_soft_cap * kLog2e;
  p.window_left = a.window_left < 0 ? -1 : a.window_left;
  p.lse = a.lse;
  p.causal = a.causal;
  p.total_rows = static_cast<int64_t>(a.batch) * a.num_q_heads * a.seq_len_q;
  p.pack_group = pack_group;
  // A head dim narrower than D runs here padded (decode_kernel_head_dim); head pairs fill D.
  if (a.head_dim > D || a.head_dim % 8 != 0 || (pack_group > 0 && a.head_dim % 16 != 0)) return cudaErrorInvalidValue;
  p.row_cols = a.head_dim;
  const int head_cols = pack_group > 0 ? a.head_dim / 2 : a.head_dim;  // the partials' width
#ifdef CLO_DEV_STAMPS
  p.dev_stamps = decode_dev_stamps();
#endif
  const dim3 grid(a.num_kv_heads * p.row_tiles, a.batch, a.num_splits);
  if (a.num_splits > 1) {
    // Workspace layout (decode.h): partials from the start, split counters in the
    // last decode_workspace_counter_slots(workspace_floats) slots.
    const int64_t partial_slots = decode_partial_slots(a.num_splits);
    const int64_t partials = partial_slots * p.total_rows * (head_cols + 2);
    const int64_t counters = static_cast<int64_t>(grid.x) * grid.y;
    const int64_t slots = decode_workspace_counter_slots(a.workspace_floats);
    if (a.workspace == nullptr || reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0 || counters > slots ||
        partials > a.workspace_floats - slots)
      return cudaErrorInvalidValue;
    p.partial_o = a.workspace;
    p.partial_state = reinterpret_cast<float2*>(a.workspace + partial_slots * p.total_rows * head_cols);
    p.split_counters = reinterpret_cast<int*>(a.workspace + (a.workspace_floats - slots));
  }
  // Kernel choice: decode_tma_stages_for (decode_internal.h, NOTES.md v8, v23). Tensor maps
  // are encoded here, per call (a captured graph keeps them, as every kernel argument).
  const bool sm90 = device_cc_major() >= 9;
  // PDL for a grid of `blocks` (decode_pdl_pays; the CLO_DECODE_PDL knob forces it off or on)
  const int pdl_mode = decode_dev_pdl();
  auto launch_pdl = [&](int64_t blocks, int schedule, bool wide_rows = false) {
    return sm90 && pdl_mode != kDecodePdlOff &&
           (pdl_mode == kDecodePdlOn ||
            decode_pdl_pays(blocks, device_sm_count(), D, kDequant, schedule, wide_rows));
  };
  // one TMA box over every plane of its rows for a grid of `blocks` (decode_row_boxes_pay)
  auto row_boxes = [&](int64_t blocks) {
    return decode_row_boxes_pay(blocks, device_sm_count(), device_is_hopper_hbm3e());
  };
  const CUtensorMapL2promotion kv_promo = decode_kv_l2_promotion(kDequant, head_cols);
  // A split call of the TMA kernel's blocks of `row_tiles` 16-row tiles: on the even grid at
  // the split counts decode_split_cluster_pays takes, `launch(params)` as split clusters (where
  // no wave of them holds the grid the launcher says cudaErrorNotSupported, and the call goes on
  // as follows); else `launch(params)`, then, where its splits merge in a kernel of their own
  // (decode_merge_apart_pays: the fused fold's
  // threads over D / 4 items a row; 16-bit caches, no head pairs), that kernel as its PDL
  // secondary: the even grid's (decode_split_merge_kernel; every thread of the block folds) or,
  // for params as_balanced, the balanced schedule's (decode_balanced_merge_kernel; the math
  // warps fold, the producer streams the next piece meanwhile).
  auto launch_with_merge = [&](DecodeKernelParams params, int row_tiles, const auto& kv, auto&& launch) {
    const bool balanced = params.streamk_blocks > 0;
    if (!balanced && sm90 && decode_split_cluster_pays(a.num_splits)) {
      params.split_cluster = true;
      params.merge_apart = false;
      const cudaError_t err = launch(params);
      if (err != cudaErrorNotSupported) return err;
      params.split_cluster = false;  // no wave of clusters holds the grid: as below
    }
    const int fold_threads = balanced ? kTmaMathWarps * row_tiles * 32 : decode_tma_threads(row_tiles);
    params.merge_apart = !kDequant && pack_group == 0 &&
                         decode_merge_apart_pays(a.num_splits, std::min(p.rows, row_tiles * kRowsPerBlock), D,
                                                 fold_threads,
                                                 balanced ? kBalancedMergeApartTrips : kEvenGridMergeApartTrips);
    const cudaError_t err = launch(params);
    if (err != cudaSuccess || !params.merge_apart) return err;
    const bool merge_pdl = sm90 && pdl_mode != kDecodePdlOff;
    return balanced ? launch_decode_balanced_merge<T>(params, kv, row_tiles * kRowsPerBlock, stream, merge_pdl)
                    : launch_decode_split_merge<T>(params, kv, stream, merge_pdl);
  };
  // `params` as the balanced schedule's `blocks` blocks (decode_streamk_blocks) of `row_tiles`
  // 16-row tiles, planned by length on paged caches for 16-row blocks unless the
  // CLO_DECODE_STREAMK knob says by capacity; always by capacity for two-row-tile blocks
  // (contiguous: one length). Planned by length, those ran 1.4-3.2 us slower than by capacity
  // at uniform lengths (MQA B=136-170, Nq 8 B=17), 3.8 and 11.2 us at ragged MQA ones (stop 83),
  // and their kernel no longer holds that plan (decode_attention_tma_kernel, stop 84).
  const int streamk_mode = decode_dev_streamk_mode();
  // the balanced schedule's `blocks` over `units` of `row_tiles` row tiles, but where units that
  // read common cache lines start too far apart (decode_streamk_pays_shared_reads)
  auto streamk_pays = [&](int row_tiles, int64_t units, int64_t blocks) {
    return streamk_mode == kDecodeStreamKSharedLines ||
           decode_streamk_pays_shared_reads(a, sizeof(KVT), row_tiles, units, blocks);
  };
  auto as_balanced = [&](DecodeKernelParams params, int64_t blocks, int row_tiles) {
    params.streamk_blocks = static_cast<int>(blocks);
    params.streamk_by_len = kPaged && row_tiles == 1 && streamk_mode != kDecodeStreamKByCapacity;
    return params;
  };
  // The math tile of one-row-tile blocks: the narrow one for units of at most 8 rows
  // (decode_narrow_rows_pay), else the 16-row one; `launch(std::bool_constant<narrow>)`.
  auto with_tile = [&](auto&& launch) -> cudaError_t {
    if constexpr (decode_runs_narrow<T, D, KVT>()) {
      if (decode_narrow_rows_pay(p.rows)) return launch(std::true_type{});
    }
    return launch(std::false_type{});
  };
  auto launch_variant = [&](const auto& kv) -> cudaError_t {
    const int forced = decode_dev_kernel();
    // Two row tiles per block (decode_wide_rows_pay): units of 17-32 rows, or 32-row tiles
    // of larger ones, as one block each, on the even grid of the TMA kernel (2-split calls of
    // decode_wide_rows_runs_balanced as the balanced schedule, one block per SM); where TMA
    // cannot describe the cache, the 16-row paths below.
    if constexpr (decode_runs_wide_rows<T, D, KVT>()) {
      const int wide_tiles = decode_wide_row_tiles(p.rows);
      const int64_t wide_units = static_cast<int64_t>(a.num_kv_heads) * wide_tiles * a.batch;
      const int64_t sms = device_sm_count();
      const int64_t read_kv_len = decode_read_kv_len(a);
      if (sm90 && pack_group == 0 && p.rows > kRowsPerBlock && forced != kDecodeKernelCpAsync &&
          decode_wide_rows_pay(a.head_dim, p.rows, wide_units, a.num_splits, sms, read_kv_len,
                               device_is_hopper_hbm3e(), kPaged)) {
        const bool balanced = decode_runs_wide_rows_balanced<T, D, KVT>() && streamk_mode != kDecodeStreamKOff &&
                              decode_wide_rows_runs_balanced(wide_units, a.num_splits, sms, read_kv_len,
                                                             device_is_hopper_hbm3e(), kPaged);
        int64_t sk_blocks = balanced ? decode_wide_rows_streamk_blocks(wide_units, sms, decode_max_kv_len(a)) : 0;
        if (sk_blocks > 0 && !streamk_pays(wide_tiles, wide_units, sk_blocks)) sk_blocks = 0;
        const int64_t wide_blocks = sk_blocks > 0 ? sk_blocks : wide_units * a.num_splits;
        // the keys a block reads: a split's, or a balanced block's share of every unit's
        const int64_t block_keys = sk_blocks > 0 ? div_ceil<int64_t>(wide_units * read_kv_len, sk_blocks)
                                                 : div_ceil<int64_t>(read_kv_len, a.num_splits);
        DecodeTmaMaps maps;
        const bool row_boxes =
            decode_wide_row_boxes_pay(D, kPaged, wide_blocks, sms, block_keys, device_is_hopper_hbm3e());
        // (paged D = 96 block 16: the tail spans, on the even grid)
        const int box_rows =
            encode_decode_tma_maps<T, D, kPaged, KVT>(a, maps, kv_promo, row_boxes, sk_blocks == 0 && row_boxes);
        DecodeKernelParams pw = p;
        pw.row_tiles = wide_tiles;
        pw.units_x = a.num_kv_heads * wide_tiles;
        if (box_rows > 0 && sk_blocks > 0) {  // its 3 stages (the launcher's only depth at two row tiles)
          const cudaError_t err = launch_with_merge(
              as_balanced(pw, sk_blocks, 2), 2, kv, [&](const DecodeKernelParams& pm) {
                return launch_decode_attention_tma_stages<T, D, KVT, 2>(3, pm, kv, dim3(static_cast<unsigned>(sk_blocks)),
                                                                        stream, launch_pdl(sk_blocks, kDecodeBalanced, true),
                                                                        maps, box_rows);
              });
          if (err != cudaErrorNotSupported) return err;
        } else if (box_rows > 0) {
          const int knob_stages = decode_dev_tma_stages();
          const int stages =
              knob_stages > 0 ? knob_stages
                              : decode_wide_rows_stages(D, kPaged, wide_blocks, sms, maps.spans_planes,
                                                        device_is_hopper_hbm3e());
          const cudaError_t err = launch_with_merge(pw, 2, kv, [&](const DecodeKernelParams& pm) {
            return launch_decode_attention_tma_stages<T, D, KVT, 2>(
                stages, pm, kv, dim3(pw.units_x, a.batch, a.num_splits), stream,
                launch_pdl(wide_blocks, kDecodeEvenGrid, true), maps, box_rows);
          });
          if (err != cudaErrorNotSupported) return err;
        }
      }
    }
    // The balanced schedule (decode_streamk_blocks): a 2-split call of a 16-bit kernel at
    // D = 128 or 256, or 64 and 96 contiguous (decode_runs_streamk; head pairs too, at a
    // forced 2: decode_d64_tail_splits gives their band the spread tail's pieces or 3 splits
    // on HBM3e parts, 1 split elsewhere since stop 107) on the TMA kernel; where TMA cannot
    // describe the cache, the even 2-split grid below.
    if constexpr (decode_runs_streamk<T, D, KVT, kPaged>()) {
      const int64_t sk_blocks = decode_streamk_blocks(static_cast<int64_t>(grid.x) * grid.y, device_sm_count(),
                                                      decode_streamk_blocks_per_sm(D));
      if (sm90 && a.num_splits == 2 && sk_blocks > 0 && forced != kDecodeKernelCpAsync &&
          streamk_mode != kDecodeStreamKOff && streamk_pays(p.row_tiles, static_cast<int64_t>(grid.x) * grid.y, sk_blocks)) {
        DecodeTmaMaps maps;
        const int box_rows = encode_decode_tma_maps<T, D, kPaged, KVT>(a, maps, kv_promo, row_boxes(sk_blocks));
        const int knob_stages = decode_dev_tma_stages();
        const int stages = knob_stages == 2 ? 2 : decode_streamk_stages<T, D, KVT>();  // the small grids' depth
        if (box_rows > 0) {
          const cudaError_t err = launch_with_merge(
              as_balanced(p, sk_blocks, 1), 1, kv, [&](const DecodeKernelParams& pm) {
                return with_tile([&](auto narrow) {
                  return launch_decode_attention_tma_stages<T, D, KVT, 1, decltype(narrow)::value>(
                      stages, pm, kv, dim3(static_cast<unsigned>(sk_blocks)), stream,
                      launch_pdl(sk_blocks, kDecodeBalanced), maps, box_rows);
                });
              });
          if (err != cudaErrorNotSupported) return err;
        }
      }
    }
    // The spread tail (decode_spread_tail_pieces): the split call the heuristic sized for
    // it (or, under the CLO_DECODE_SPREAD knob, any split call of one to two units per SM)
    // runs the first SM-count units whole, one block each, and the others in num_splits
    // pieces whose blocks sit beside them, instead of leaving a second unit on some SMs.
    if constexpr (decode_runs_spread<T, D, KVT>()) {
      const int64_t units = static_cast<int64_t>(grid.x) * grid.y, sms = device_sm_count();
      const int spec_rows = decode_rule_spec_rows(a.seq_len_q, p.rows);
      const int spread_mode = decode_dev_spread();
      // (head pairs: the D = 64 pairs' own pieces, decode_pairs_spread_pieces)
      const int auto_pieces =
          pack_group > 0 ? decode_pairs_spread_pieces(kPaged, units, sms, decode_read_kv_len(a), device_is_hopper_hbm3e())
                         : decode_spread_tail_pieces(a.head_dim, kPaged, units, sms, decode_read_kv_len(a),
                                                     device_is_hopper_hbm3e(), spec_rows);
      const bool spread = spread_mode == kDecodeSpreadOn ? units > sms && units < 2 * sms
                                                         : spread_mode != kDecodeSpreadOff && a.num_splits == auto_pieces;
      if (sm90 && a.num_splits > 1 && forced != kDecodeKernelCpAsync && spread) {
        const int64_t blocks = sms + (units - sms) * a.num_splits;
        DecodeTmaMaps maps;
        const int box_rows = encode_decode_tma_maps<T, D, kPaged, KVT>(a, maps, kv_promo, row_boxes(blocks));
        if (box_rows > 0) {
          DecodeKernelParams ps = p;
          ps.spread_from = static_cast<int>(sms);
          // 3 stages: two blocks fit per SM
          const cudaError_t err = with_tile([&](auto narrow) {
            return launch_decode_attention_tma_kernel<T, D, 3, std::decay_t<decltype(kv)>, KVT, kDecodeSpreadTail, 1,
                                                      decltype(narrow)::value>(
                ps, kv, dim3(static_cast<unsigned>(blocks)), stream, launch_pdl(blocks, kDecodeSpreadTail), maps,
                box_rows);
          });
          if (err != cudaErrorNotSupported) return err;
        }
      }
    }
    const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
    const bool grid_pdl = launch_pdl(blocks, kDecodeEvenGrid);
    const int auto_stages = decode_tma_stages_for(D, kPaged, blocks, device_sm_count(), kDequant, a.head_dim,
                                                  pack_group > 0, a.num_splits, decode_read_kv_len(a), a.seq_len_q, p.rows);
    const int knob_stages = decode_dev_tma_stages();
    const bool want_tma = forced == kDecodeKernelTma || (forced == kDecodeKernelAuto && auto_stages > 0);
    const int tma_stages =
        knob_stages > 0 ? knob_stages : (auto_stages > 0 ? auto_stages : decode_pipeline_stages(D));
    DecodeTmaMaps maps;
    const int box_rows =
        want_tma && sm90 ? encode_decode_tma_maps<T, D, kPaged, KVT>(a, maps, kv_promo, row_boxes(blocks)) : 0;
    if (box_rows > 0) {
      DecodeKernelParams pe = p;
      pe.head_cluster = pack_group == 0 && decode_head_clusters_pay(a, D, device_is_hopper_hbm3e());
      const cudaError_t err = launch_with_merge(pe, 1, kv, [&](const DecodeKernelParams& pm) {
        return with_tile([&](auto narrow) {
          return launch_decode_attention_tma_stages<T, D, KVT, 1, decltype(narrow)::value>(
              tma_stages, pm, kv, grid, stream, grid_pdl, maps, box_rows);
        });
      });
      if (err != cudaErrorNotSupported) return err;
    }
    return with_tile([&](auto narrow) {
      return launch_decode_attention_kernel<T, D, KVT, decltype(narrow)::value>(p, kv, grid, stream, grid_pdl);
    });
  };
  if constexpr (kPaged) {
    PagedKV kv{a.k, a.v, a.block_tables, a.table_stride, a.max_blocks_per_seq, a.num_blocks,
               __builtin_ctz(static_cast<unsigned>(a.block_size)),
               static_cast<int64_t>(a.block_size) * a.num_kv_heads * a.head_dim,
               static_cast<int64_t>(a.num_kv_heads) * a.head_dim, a.head_dim, a.seq_lens};
    cudaError_t err = launch_variant(kv);
    if (err != cudaSuccess) return err;
  } else {
    StridedKV kv{a.k, a.v, a.k_stride_b, a.k_stride_h, a.k_stride_n, a.v_stride_b, a.v_stride_h, a.v_stride_n,
                 a.seq_len_k};
    cudaError_t err = launch_variant(kv);
    if (err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

#define CLO_INSTANTIATE_DECODE(T, D)                                                                    \
  template cudaError_t run_decode_attention<T, D, true>(const DecodeAttentionArgs&, cudaStream_t, int);     \
  template cudaError_t run_decode_attention<T, D, false>(const DecodeAttentionArgs&, cudaStream_t, int);
// Paged caches only: a kernel width that only head pairs run (decode_pair_kernel_head_dim).
#define CLO_INSTANTIATE_DECODE_PAIRS(T, D) \
  template cudaError_t run_decode_attention<T, D, true>(const DecodeAttentionArgs&, cudaStream_t, int);
// FP8 (e4m3) paged caches with T queries.
#define CLO_INSTANTIATE_DECODE_FP8_KV(T, D) \
  template cudaError_t run_decode_attention<T, D, true, __nv_fp8_e4m3>(const DecodeAttentionArgs&, cudaStream_t, int);

}  // namespace cuda_llm_ops::decode
