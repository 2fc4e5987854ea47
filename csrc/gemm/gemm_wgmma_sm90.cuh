// Hopper fp16/bf16 GEMM: TMA loads into 128-byte-swizzled shared tiles, wgmma
// m64nNk16 from shared-memory descriptors, fp32 accumulators in registers.
//
// Warp-specialised, one CTA per SM: warpgroup 0 is the producer (one thread issues
// the TMA copies of each k-tile into a ring of kStages stages, register budget
// lowered with setmaxnreg), warpgroups 1 and 2 are consumers (64 rows of the
// 128 x BN tile each, one m64nBNk16 wgmma per k16 step, registers raised). Per
// stage two mbarriers: `full` (1 arrival with the stage's byte count; the TMA
// completes the transactions) and `empty` (one arrival per consumer warpgroup, of
// every CTA that reads the stage, once its wgmmas reading it have retired).
// Consumers keep one wgmma group in flight: after issuing k-tile kt they wait for
// group kt-1 and release its stage.
//
// Persistent: the grid holds as many CTAs as fit at once and each strides the tiles
// (grouped raster), so the producer fills the ring with the next tile's k-tiles while
// the consumers run the previous tile's epilogue, and no CTA launch or pipeline
// fill sits between tiles. Clusters of 2 CTAs along M: the pair computes two tiles
// that share their B columns; each CTA fetches half of every B k-tile and
// multicasts it into both rings, which cuts the L2 -> SM traffic per tile by a third
// (A 16 KB + B 32 KB per k-tile and CTA becomes 16 + 16 KB at BN = 256).
//
// Split-K over the last wave (persistent single CTAs): when the units do not fill whole
// waves and the last wave is at most half full, its units are cut along K into equal
// chunks for the idle CTAs instead of leaving them idle for a whole tile time
// (WgmmaTailSplit).
//
// The skinny tile (kSkinny; BN = 16 for decode shapes M <= 16; 32-128 for batched decode up to
// 256 rows, or 192 for 129-192 rows in whole units only; the caller swaps the problem so the
// weight is the 64-row operand): whole units of
// weight rows x token tiles where they fill a wave (plan_skinny_token_tiles), else
// plan_skinny deals units of row_step weight rows whole, one per CTA, where they keep most SMs
// busy (row_step: a K-major A's box height; an M-major A's unit is a 64-row box, or 64 + 32
// rows, or 2 x 64: skinny_m_major_32_box), else (BN >= 64) 64-row units split along K, else
// stream-K over 128-row units, with pieces summed in a workspace. Its ring's A slots hold the
// unit's rows only, as many slots as fit (WgmmaTailSplit::ring); at 64-row units the second
// consumer warpgroup sits out.
//
// Layouts (no transposed copy, the wgmma transpose bits pick the major-ness):
//   A [M,K] (K-major):  TMA box {64 k, 128 m}              -> smem [128 m][64 k], trans-a 0
//   A^T [K,M] (M-major): 2 boxes {64 m, 64 k}              -> smem [2][64 k][64 m], trans-a 1
//     (the skinny tile's 96-row units: {64 m, 64 k}, then {32 m, 64 k} in the 64-byte swizzle
//     -> smem [64 k][32 m] at the second chunk, read through a 64-byte-swizzle descriptor)
//   B [K,N] (N-major):  BN/64 boxes {64 n, 64 k}           -> smem [BN/64][64 k][64 n], trans-b 1
//   B^T [N,K] (K-major): box {64 k, BN n}                  -> smem [BN n][64 k], trans-b 0
// Every row is 128 bytes (64 elements) and every atom of 8 rows 1024-byte aligned:
// the 128-byte swizzle of TMA and of the wgmma descriptors coincide (the 32-row box: rows of
// 64 bytes, 512-byte atoms, the 64-byte swizzle on both sides).
// Edges: TMA zero-fills out-of-bounds elements (K tails add zeros), the epilogue
// masks rows/columns past M, N.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda_llm_ops/cluster.cuh"
#include "cuda_llm_ops/tma.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"
#include "cuda_llm_ops/wgmma.cuh"
#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {

// Element bytes 2 (fp16/bf16) or 1 (int8): a k-tile is 128 bytes of K either way (64 or 128
// elements), read in 4 wgmma k-steps of 32 bytes (k16 / k32).
// Skinny_: the skinny tile (a swapped decode problem, below), whose epilogue stores from
// registers.
template <int BN_, int Stages_, int ElemBytes_ = 2, bool Skinny_ = false>
struct WgmmaConfig {
  static constexpr int BM = 128, BN = BN_, BK = 128 / ElemBytes_, kStages = Stages_;
  static constexpr bool kSkinny = Skinny_;
  static constexpr int kKSteps = 4;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kAccum = BN / 2;  // fp32 / int32 accumulators per consumer thread (64 x BN per warpgroup)
  static constexpr uint32_t kABytes = BM * 128, kBBytes = BN * 128;
  static constexpr uint32_t kStageBytes = kABytes + kBBytes;
  // TMA-store staging: per consumer warpgroup 64 rows x 128 columns (two 64 x 64 boxes);
  // none for the skinny tile (register epilogue only).
  static constexpr uint32_t kEpiBytes = kSkinny ? 0 : kConsumers * 64 * 128 * 2;
  // The ring: kStages slots of kStageBytes; the skinny tile's A slots hold its unit's rows only
  // and as many slots as fit kRingBytes are used (launch_wgmma_cfg: WgmmaTailSplit::ring).
  static constexpr size_t kRingBytes = kSkinny ? size_t(225) * 1024 : size_t(kStages) * kStageBytes;
  static constexpr size_t kSmemBytes = kRingBytes + kEpiBytes + 1024;  // + alignment slack
  static constexpr int kProducerRegs = 56, kConsumerRegs = 224;
  static_assert(BN == 16 || BN == 32 || BN == 64 || BN == 128 || BN == 192 || BN == 256, "wgmma tile width");
  // The skinny tile up to 128 wide holds a first stream-K piece in registers beside acc; wider (its
  // 129-192 tokens in one tile, kSkinnyWide) it runs whole units only.
  static constexpr bool kSkinnyWide = kSkinny && BN > 128;
  static_assert(BN != 192 || kSkinny, "the 192-wide tile is the skinny tile's only");
  static_assert(!kSkinnyWide || ElemBytes_ == 2, "the wide skinny tile: 16-bit only");
  static_assert(ElemBytes_ == 2 || ElemBytes_ == 1, "16-bit or int8 elements");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// How a call runs: tile width, CTAs per cluster along M (2: the pair shares B, each
// fetching half and multicasting it), and a persistent grid (one cluster per
// co-resident slot, striding the work units) or one cluster per unit.
struct WgmmaSchedule {
  int bn = 256;
  int cluster = 1;
  bool persistent = true;
  bool tma_store = false;  // epilogue through shared memory and TMA stores (no C)
  int raster = 8;          // grouped_block's group: > 0 groups of unit rows, < 0 of tile columns
  int tail_split = 1;      // the last wave split along K: 0 never, 1 where it pays, 2 wherever it can
  bool split_short_wave = false;  // and a grid of one wave or less (plan_tail_split)
  bool skinny = false;     // the skinny tile (bn 16 to 192): a swapped decode problem (launch_gemm_wgmma_skinny)
  int pdl_mode = kGemmPdlOff;  // gemm_pdl_mode(); wgmma_pdl decides per launch
};

// Split-K over the last, partial wave (persistent single CTAs; tail_units == 0: every unit
// whole). Units [0, dp_units) run whole, strided over the grid; each of the other
// tail_units units is cut into `splits` chunks of its k-tiles, chunk c of tail unit t run
// by CTA c * tail_units + t after its whole units. CTAs with the same chunk index run the
// same k-range at the same time, so units sharing A rows or B columns share them in L2 (a
// stream-K deal of equal ranges staggers every CTA's k-offset: measured 25-40 us slower
// per call, NOTES.md). Every chunk stores its fp32 accumulators in the workspace and counts
// itself in on its unit's counter; the chunk that counts last sums all of them in chunk
// order (the same bits whichever is last) and runs the epilogue. No CTA waits on another.
struct WgmmaTailSplit {
  int dp_units = 0;  // = the unit count when tail_units == 0
  int tail_units = 0;
  int splits = 0;             // chunks per tail unit (>= 2), tail_units * splits <= grid
  int* counters = nullptr;    // [tail_units][kConsumers], zeroed before the launch
  float* partials = nullptr;  // [tail_units * splits chunks][kConsumers][kAccum / 4][128 threads] float4
  // The skinny tile (kSkinny: decode shapes, memory-bound, no L2 reuse to keep) deals
  // ranges of units * ktiles iterations (plan_skinny): CTA g takes [range_start(g),
  // range_start(g + 1)), counted in steps of `step` k-tiles (base >= 1 steps each).
  // step == 1: stream-K, whole units inside a range and a partial piece at either end
  // (slots 2g and 2g + 1, counters per unit); step == ktiles: whole units only. A unit is
  // row_step rows of the swapped problem (the weight's rows: a K-major A's TMA box height).
  int base = 0, rem = 0, step = 1, row_step = 0;
  // Token tiles (batched decode, plan_skinny_token_tiles): unit v is weight rows
  // (v / tiles_n) * row_step.. of the swapped problem and its tile_n columns (v % tiles_n) * tile_n..
  int tiles_n = 1;
  // The skinny tile's ring (launch_wgmma_cfg): slots of a_stride bytes of A (row_step rows in
  // whole 1 KB atoms) and BN rows of B, `ring` of them (<= the kernel's Stages).
  int ring = 0;
  uint32_t a_stride = 0;
  // The skinny tile's token tile: tile_n tokens (a multiple of 8, at most BN; 0 in the planner's
  // output means BN), each a box of that many rows; the kernel computes BN columns, of which
  // those past tile_n come from stale slot rows and are not stored.
  int tile_n = 0;
  // The skinny tile's last token tile, where it holds fewer than tile_n tokens: its box's rows
  // (the tokens rounded up to 8; 0: every tile full, or the knob off).
  int b_last_rows = 0;
  __host__ __device__ int range_start(int g) const { return (g * base + (g < rem ? g : rem)) * step; }
  __device__ int cta_of(int i) const {  // the CTA whose range holds iteration i
    i /= step;
    const int big = rem * (base + 1);
    return i < big ? i / (base + 1) : rem + (i - big) / base;
  }
};

// Host: the tail split of `units` units of `ktiles` k-tiles over a persistent grid of
// `grid` single CTAs (mode as WgmmaSchedule::tail_split), and the workspace it needs:
// counters, then one chunk's accumulators per splitting CTA.
constexpr long long kTailSplitMinSaved = 8;  // mode 1: k-tiles a CTA must save against a whole last wave
constexpr long long kShortWaveMaxFill = 4;   // short waves split at most 1/4 full
// Host: the chunks to cut each of `units` units of `ktiles` k-tiles into, one a CTA of `grid`,
// when a unit's partial sums meet in memory: ~ktiles/s k-tiles of streaming plus the last
// chunk's sum of s chunks is least near s = sqrt(ktiles / 2) (at least 2); no more than the
// idle CTAs a unit nor its k-tiles. Below 2: no split.
inline long long split_k_chunks(long long units, int ktiles, long long grid) {
  return std::min<long long>({grid / units, ktiles, std::max(2LL, std::llround(std::sqrt(ktiles / 2.0)))});
}
inline WgmmaTailSplit plan_tail_split(long long units, int ktiles, long long grid, int mode, bool short_wave) {
  WgmmaTailSplit ts;
  ts.dp_units = static_cast<int>(units);
  if (mode == 0 || grid <= 0) return ts;
  // A grid of a quarter wave or less leaves most SMs idle for the whole call: with short_wave
  // every unit is a tail unit (dp_units 0; the launch runs units * splits CTAs). Fuller short
  // grids stay whole: int8 64 x 12288 x 4096 (48 units) took 34.7 us in 2 chunks against 29.2
  // whole, where 16 units took 24.4 in 4 against 27.4 and, at K = 14336, 41.4 in 7 against
  // 72.5 (NOTES.md "Stop 125"). Without short_wave nothing idles for long.
  const long long tail = units <= grid ? (short_wave && units * kShortWaveMaxFill <= grid ? units : 0) : units % grid;
  if (tail == 0) return ts;
  // The tail takes ~ktiles/s k-tiles of math (~0.8 us each at 128x256) plus the last chunk's
  // sum of s chunks (~1.5 us per 128 KB chunk), and at most the idle CTAs per unit.
  const long long splits = split_k_chunks(tail, ktiles, grid);
  if (splits < 2) return ts;  // a last wave more than half full stays whole
  // mode 1: the longest chunk (ceil(ktiles / splits)) must save >= kTailSplitMinSaved k-tiles
  // against the whole unit (a chunk writes, and its unit's last chunk reads, 128 KB of fp32
  // per CTA per chunk: a few k-tiles' time).
  if (mode == 1 && ktiles - (ktiles + splits - 1) / splits < kTailSplitMinSaved) return ts;
  ts.dp_units = static_cast<int>(units - tail);
  ts.tail_units = static_cast<int>(tail);
  ts.splits = static_cast<int>(splits);
  return ts;
}
// Host: the work units of a call on single CTAs (128 x sch.bn tiles), and the split
// launch_wgmma_cfg runs them in (persistent single CTAs, one per SM; none otherwise): the
// launch, the workspace query and the int8 rule all plan through it.
inline long long wgmma_units(const GemmProblem& p, const WgmmaSchedule& sch) {
  return (long long)div_ceil(p.M, 128) * div_ceil(p.N, sch.bn);
}
inline WgmmaTailSplit wgmma_tail_split(const GemmProblem& p, const WgmmaSchedule& sch) {
  if (sch.cluster != 1 || !sch.persistent) return WgmmaTailSplit{};
  const int bk = 128 / static_cast<int>(elem_size(p.in_dtype));  // k-tiles of 128 bytes (WgmmaConfig::BK)
  return plan_tail_split(wgmma_units(p, sch), div_ceil(p.K, bk), device_sm_count(), sch.tail_split,
                         sch.split_short_wave);
}
template <typename Cfg>
inline size_t tail_split_counter_bytes(const WgmmaTailSplit& ts) {
  return (size_t(ts.tail_units) * Cfg::kConsumers * sizeof(int) + 255) / 256 * 256;
}
template <typename Cfg>
inline size_t tail_split_workspace_bytes(const WgmmaTailSplit& ts) {
  if (ts.tail_units == 0) return 0;
  return tail_split_counter_bytes<Cfg>(ts) + size_t(ts.tail_units) * ts.splits * Cfg::BM * Cfg::BN * sizeof(float);
}

// Host: the skinny tile's stream-K deal of `units` units of `ktiles` k-tiles over `grid`
// CTAs (in: the SMs, or 0 for one CTA per unit with every range one whole unit and no
// workspace; out: the CTAs to launch, at most one per k-tile). tail_units = units (the
// counters' count).
inline WgmmaTailSplit plan_skinny_stream_k(long long units, int ktiles, long long& grid) {
  WgmmaTailSplit ts;
  ts.dp_units = 0;
  ts.tail_units = static_cast<int>(units);
  ts.splits = 1;
  const long long iters = units * ktiles;
  if (grid <= 0 || iters >= (1LL << 31)) {
    grid = units;
    ts.base = ktiles;
    ts.rem = 0;
    return ts;
  }
  grid = std::min(grid, iters);
  ts.base = static_cast<int>(iters / grid);
  ts.rem = static_cast<int>(iters % grid);
  return ts;
}

// Host: `units` whole units of `ktiles` k-tiles, one or more a CTA, over at most `grid` CTAs.
inline WgmmaTailSplit skinny_whole_deal(long long units, int ktiles, long long& grid, int row_step) {
  WgmmaTailSplit ts;
  grid = std::min(grid, units);
  ts.dp_units = static_cast<int>(units);
  ts.base = static_cast<int>(units / grid);
  ts.rem = static_cast<int>(units % grid);
  ts.step = ktiles;
  ts.row_step = row_step;
  return ts;
}
// Host: how the skinny tile deals a decode problem of `rows` weight rows (the swapped
// problem's M) and `ktiles` k-tiles over `grid` CTAs (in: the SMs, or 0 for one CTA per
// 128-row unit without workspace; out: the CTAs to launch). A weight stored [N, K]
// (k_major: one TMA box of row_step rows a k-tile) is cut into units of row_step rows, a
// multiple of 8 from 128 down to 64, the one that leaves the busiest CTA the fewest rows
// (the largest on a tie), and dealt whole where that keeps 90% of the SMs busy: no pieces,
// no workspace; else in one wave of the shortest units of >= 64 rows where that keeps 70% of the
// SMs busy (6144 rows: 96 units of 64, as b [K, N] below). At 12288 rows that is 128 units of
// 96 rows, 3% over an even share, where
// stream-K's end-of-range fixups (store, release, count, load: several round trips through
// a saturated memory system) cost ~10% (NOTES.md "Skinny", run 7). Units of 32 rows (4096
// rows) ran 0.78x stream-K: 4 KB of weight a stage beside 2 KB of activations. A weight stored
// [K, N] comes in 64-row boxes of its M-major operand: whole 128-row units, one a CTA, where
// they fit one wave and keep 70% of the SMs busy (12288 rows: 96 CTAs, 1.07x stream-K at
// K = 4096, 1.19x at 2048: an SM streams ~30 GB/s, so 96 of them still draw 2.9 TB/s), now
// in the shortest of 64, 96 (a 64-row box and a 32-row one in the 64-byte swizzle) or 128 rows
// that fits: 12288 rows in 128 units of 96, 6144 and 8192 in units of 64.
// Otherwise, with short_wave (int8: 16-bit decode shapes that would fall to stream-K run on
// the skinny kernels, wgmma_skinny_applies), the same one wave of units where it keeps fewer
// SMs busy but its busiest CTA, at an SM's ~30 GB/s, still ends before stream-K would: all
// the bytes at 3.0 TB/s plus ~4 us of fixups (int8 16x4096x4096: 64 units of 64 rows, 8.7 us
// against 9.6 predicted, 10.6 measured against stream-K's 15.6; NOTES.md "Skinny", int8 in
// one short wave). Otherwise, with split_units (the 64- and 128-wide tiles of batched decode,
// whose stream-K pieces are 4-8x the 16-wide tile's, 32-64 KB, and a unit's last piece reads
// them all at one SM's ~30 GB/s; and an M-major weight's decode tile), units of 64 rows, each cut along K into as many equal ranges
// as the SMs allow, at most ~sqrt(ktiles / 2) (4096 rows: 64 units x 2 on 128 CTAs; a unit's
// last range reads one other piece). Otherwise stream-K over 128-row units.
// The short-wave estimate's figures (NOTES.md "Skinny"): bytes a microsecond one SM streams
// (~30 GB/s), the whole GPU streams (3.0 TB/s measured copy), and stream-K's fixups in us.
constexpr double kSkinnySmBytesPerUs = 30e3, kSkinnyGpuBytesPerUs = 3.0e6, kSkinnyStreamKFixupUs = 4.0;
inline WgmmaTailSplit plan_skinny(long long rows, int ktiles, bool k_major, long long& grid, bool short_wave,
                                  bool split_units = false) {
  int row_step = 0;  // of a whole-unit deal; 0: stream-K
  if (grid > 0 && k_major) {
    long long best_rows = 0;
    for (int r = 128; r >= 64; r -= 8) {
      const long long busiest = ((rows + r - 1) / r + grid - 1) / grid * r;
      if (row_step == 0 || busiest < best_rows) row_step = r, best_rows = busiest;
    }
    if ((rows + row_step - 1) / row_step * 10 < grid * 9) row_step = 0;
  }
  if (grid > 0 && row_step == 0) {  // one wave of the shortest units the layout allows (70% busy, or short_wave)
    int r = 64;
    if (k_major) {
      r = static_cast<int>(std::max<long long>(64, ((rows + grid - 1) / grid + 7) / 8 * 8));
    } else {
      while (r < 128 && (rows + r - 1) / r > grid) r += 32;
    }
    const long long units = (rows + r - 1) / r;
    const double row_bytes = 128.0 * ktiles;  // k-tiles are 128 bytes
    const bool beats_stream_k = short_wave && k_major &&
                                r * row_bytes / kSkinnySmBytesPerUs <=
                                    rows * row_bytes / kSkinnyGpuBytesPerUs + kSkinnyStreamKFixupUs;
    if (r <= 128 && units <= grid && (units * 10 >= grid * 7 || beats_stream_k)) row_step = r;
  }
  const long long units = (rows + (row_step > 0 ? row_step : 128) - 1) / (row_step > 0 ? row_step : 128);
  if (row_step == 0 && split_units && grid > 0) {
    // Units of 64 rows (128: 0.58-0.66x cuBLAS against 0.65-0.72x at 4096 rows, NOTES.md
    // "Batched decode"); a unit's last range sums all its pieces, one or two a round trip.
    const long long units64 = (rows + 63) / 64;
    const long long splits = split_k_chunks(units64, ktiles, grid);
    if (splits >= 2 && units64 * ktiles < (1LL << 31)) {
      grid = units64 * splits;
      WgmmaTailSplit ts = plan_skinny_stream_k(units64, ktiles, grid);
      ts.row_step = 64;
      return ts;
    }
  }
  if (row_step > 0 && units * ktiles < (1LL << 31)) return skinny_whole_deal(units, ktiles, grid, row_step);
  WgmmaTailSplit ts = plan_skinny_stream_k((rows + 127) / 128, ktiles, grid);
  ts.row_step = 128;
  return ts;
}
// Host: batched decode (more than 16 rows of activations, `tokens`: the swapped problem's N) in
// whole units of row_step weight rows x token tiles, one a CTA, nothing split along K, where
// such a deal fills one wave (90% of the SMs). It is the shape cuBLAS runs there (64x64 tiles at
// 128 tokens, 64x128 at 256, 96 weight rows at 6144: NOTES.md "Token tiles") and replaces the
// split units' end-of-range sums, which one SM's round trips through a saturated memory system
// made the grid's tail. The tokens are cut into tiles_n >= 2 tiles of tile_n tokens each, as even
// as multiples of 8 allow, on the narrowest kernel at least that wide (bn: 16, 32, 64 or 128;
// the columns past tile_n are computed and dropped). Of those deals, the one whose CTA reads the
// fewest bytes a k-tile (row_step + tile_n rows: weight and activations alike come through L2
// into the SM); a tie goes to fewer, wider token tiles (one consumer warpgroup at 64 rows, fewer
// shared-memory reads; ties to the narrower tile measured slower, NOTES.md "Stop 127").
// row_step: 64..128 in 8s for a weight stored [N, K], else 64, 96 or 128
// (skinny_m_major_32_box). bn 0: no such deal.
// Even tiles: 144 tokens on 4096 rows are 64-row units x 2 tiles of 72 (136 rows a CTA a k-tile;
// cuBLAS's 64x72 tile) where tiles of the kernel's width were 96-row units x 3 tiles of 64 (the
// last of 16 tokens; 160 rows): 20.2 -> 19.3 us at K = 4096 (cuBLAS 15.6), 66.3 -> 60.5 at
// K = 14336, 129-176 tokens 1-10 us faster on those weights (NOTES.md "Stop 128"). Dev knob
// CLO_GEMM_SKINNY_TT_EVEN: 0 gives tiles of the kernel's width (the last one short), the deal
// before. Units taller than 64 rows count kSkinnyTallUnitRows more: they run the second consumer
// warpgroup at the kernel's whole width, and such deals measured slower than 64-row units reading
// as many rows (4096 rows x 224-256 tokens: 128-row units x 4 tiles of 64, 21.3-22.2 us, against
// 64-row units x 2 tiles of 128, 19.8; NOTES.md "Stop 127", tt_narrow).
// Token tiles 16 wide (17-32 tokens in two, on the decode tile's kernel) are weighed for a 16-bit
// call (int8: not measured) of at most kSkinnyTt16MaxKtiles k-tiles: they
// read each weight unit twice from L2 where the split units (plan_skinny) read it once but sum
// their pieces through memory, and that sum is the smaller cost at short K (4096 rows x 17-32
// tokens: 16.2 against 20.7 us at K = 4096, 23.3 / 27.0 at 6144, 30.2 / 32.6 at 8192, 40.6 / 39.9
// at 11008, 51.5 / 48.6 at 14336; NOTES.md "Stop 127"). So are tiles of 16 tokens or fewer on a
// wider kernel.
constexpr int kSkinnyTt16MaxKtiles = 128;
constexpr int kSkinnyTallUnitRows = 16;
// Host: whether the wide tile (192) takes 129-192 tokens with its 64-row units cut along K
// (plan_skinny_deal) instead of token tiles: cuBLAS's deal at 144 x 4096 x 14336 (64x144 tiles, K
// in two: 45.5 us against our two 64x72 token tiles' 60.5; each weight row comes into an SM once,
// 20-25% fewer L2 bytes; NOTES.md "Stop 128"). For the same reason as the 16-wide tiles' rule, only
// above kSkinnyTt16MaxKtiles k-tiles (16-bit), and where 2 chunks of every 64-row unit fit a wave.
// Measured (fp16, graphs, cold L2; NOTES.md "Stop 129"): 4096 x 14336 at 129-192 tokens 54.8-56.7
// us against the token tiles' 58.9-66.6 (cuBLAS 50.1-60.0), 4096 x 11008 45.7-47.2 against
// 46.7-52.9. Dev knob CLO_GEMM_SKINNY_WIDE_SPLIT: 0 off (the token tiles); 1 (default) on; 2 at any K.
inline bool skinny_wide_split(long long rows, long long tokens, int ktiles, long long grid, bool int8) {
  static bool dev = std::getenv("CLO_GEMM_SKINNY_WIDE_SPLIT") != nullptr;
  const int mode = dev_knob("CLO_GEMM_SKINNY_WIDE_SPLIT", dev, 1);
  if (mode == 0) return false;
  return !int8 && tokens > 128 && tokens <= 192 && (mode == 2 || ktiles > kSkinnyTt16MaxKtiles) &&
         2 * ((rows + 63) / 64) <= grid;
}
struct SkinnyTokenTiles {
  int bn = 0, tile_n = 0, row_step = 0, tiles_n = 1;
};
inline SkinnyTokenTiles plan_skinny_token_tiles(long long rows, long long tokens, bool k_major, long long grid,
                                                int ktiles, bool int8) {
  SkinnyTokenTiles best;
  if (tokens <= 16 || grid <= 0 || skinny_wide_split(rows, tokens, ktiles, grid, int8)) return best;
  long long best_rows = 0;
  // Dev knob CLO_GEMM_SKINNY_TT16: 0 never weighs 16-wide token tiles, 1 always, 2 (default) by
  // the rule above.
  static bool dev_tt16 = std::getenv("CLO_GEMM_SKINNY_TT16") != nullptr;
  const int tt16_mode = dev_knob("CLO_GEMM_SKINNY_TT16", dev_tt16, 2);
  const bool tt16 = tt16_mode == 1 || (tt16_mode == 2 && !int8 && ktiles <= kSkinnyTt16MaxKtiles);
  static bool dev_even = std::getenv("CLO_GEMM_SKINNY_TT_EVEN") != nullptr;
  const bool even = dev_knob("CLO_GEMM_SKINNY_TT_EVEN", dev_even, 1) != 0;
  for (const int bn : {128, 64, 32, 16}) {  // the kernel's width, then (even) the tile widths it is narrowest for
    for (int tile_n = bn; tile_n > (even ? bn / 2 : bn - 8); tile_n -= 8) {
      if (tile_n <= 16 && !tt16) continue;
      const long long tiles = (tokens + tile_n - 1) / tile_n;
      if (tiles < 2) continue;  // one token tile: plan_skinny's deals
      // Only the narrowest even width for this many tiles (a wider one reads more for nothing).
      if (even && (tokens + tiles - 1) / tiles <= tile_n - 8) continue;
      for (int r = 64; r <= 128; r += k_major ? 8 : 32) {
        const long long items = (rows + r - 1) / r * tiles;
        if (items > grid || items * 10 < grid * 9) continue;
        const long long cost = r + tile_n + (even && r > 64 ? kSkinnyTallUnitRows : 0);
        if (best.bn == 0 || cost < best_rows || (cost == best_rows && tiles < best.tiles_n)) {
          best = {bn, tile_n, r, static_cast<int>(tiles)}, best_rows = cost;
        }
      }
    }
  }
  return best;
}
// Host: whether plan_skinny may split 64-row units along K for a tile `bn` wide: the wide
// tiles of batched decode, and the decode tile of an M-major weight (b [K, N]: 4096 rows, 64
// units x 2 ranges, which stream-K over 128-row units ran at 0.74x cuBLAS; NOTES.md "PDL").
constexpr bool skinny_split_units(int bn, bool k_major) { return bn >= 64 || !k_major; }
// Host: the skinny tile's deal of `rows` weight rows, `tokens` activation rows and `ktiles`
// k-tiles on a tile `bn` wide (grid as plan_skinny): token tiles where plan_skinny_token_tiles
// finds a deal (it must be of this bn), else plan_skinny's (tokens <= bn; int8 with its short
// waves; a tile wider than 128 only where its units go whole). false: this bn cannot run the
// problem.
inline bool plan_skinny_deal(long long rows, long long tokens, int bn, int ktiles, bool k_major, long long& grid,
                             bool int8, WgmmaTailSplit& ts) {
  const SkinnyTokenTiles tt = plan_skinny_token_tiles(rows, tokens, k_major, grid, ktiles, int8);
  if (tt.bn != 0) {
    const long long units = (rows + tt.row_step - 1) / tt.row_step * tt.tiles_n;
    if (tt.bn != bn || units * ktiles >= (1LL << 31)) return false;
    ts = skinny_whole_deal(units, ktiles, grid, tt.row_step);
    ts.tiles_n = tt.tiles_n;
    ts.tile_n = tt.tile_n;
    return true;
  }
  if (tokens > bn) return false;
  if (bn > 128 && skinny_wide_split(rows, tokens, ktiles, grid, int8)) {
    // 64-row units, each cut along K into equal chunks, one a CTA (the family's tail split; the
    // kernel has no registers to hold a stream-K piece beside the wide tile's accumulators).
    const long long units = (rows + 63) / 64;
    ts = WgmmaTailSplit{};
    ts.tail_units = static_cast<int>(units);
    ts.splits = static_cast<int>(split_k_chunks(units, ktiles, grid));
    ts.row_step = 64;
    grid = units * ts.splits;
    return true;
  }
  ts = plan_skinny(rows, ktiles, k_major, grid, int8, skinny_split_units(bn, k_major));
  return bn <= 128 || ts.tail_units == 0;  // else the wide tile (kSkinnyWide) runs whole units only
}
// Counters, then two pieces per CTA (the ends of its range); 0 when every range is whole. The
// wide tile's split (splits >= 2; stream-K deals carry 1): counters, then a chunk per CTA (the
// family's tail-split layout).
template <typename Cfg>
inline size_t skinny_stream_k_workspace_bytes(const WgmmaTailSplit& ts, long long grid) {
  if (Cfg::kSkinnyWide && ts.splits >= 2) return tail_split_workspace_bytes<Cfg>(ts);  // skinny_wide_split's deal
  // A whole-unit deal has no tail units (its step is ktiles, 1 at K <= 64); stream-K's ranges
  // are all whole units when one CTA holds each.
  if (ts.tail_units == 0 || (grid == ts.tail_units && ts.rem == 0)) return 0;
  return tail_split_counter_bytes<Cfg>(ts) + size_t(grid) * 2 * Cfg::BM * Cfg::BN * sizeof(float);
}

// Whether the skinny tile's M-major A (kTransA) comes in 96-row units: a 64-row box (128-byte
// swizzle) and a 32-row one (64-byte swizzle, map_a32). The kernel and its launcher (which
// encodes map_a32) both ask here.
template <bool kSkinny, bool kTransA>
__host__ __device__ constexpr bool skinny_m_major_32_box(const WgmmaTailSplit& ts) {
  return kSkinny && kTransA && ts.row_step == 96;
}

// Encodes a 2-D row-major tensor map (dim0 contiguous), 128-byte swizzle and 256-byte L2
// promotion unless told (gemm_wgmma_sm90.cu; the driver entry point is looked up once).
cudaError_t encode_tensor_map_2d(CUtensorMap* map, DType dtype, const void* base, uint64_t dim0, uint64_t dim1,
                                 uint64_t row_stride_bytes, uint32_t box0, uint32_t box1,
                                 CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B,
                                 CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B);

// A k-tile's place in a ring of runtime length (the skinny tile's): slot and phase parity,
// advanced one k-tile at a time (no integer division in the loops).
struct RingPos {
  int slot = 0, phase = 0;
  CLO_DEVICE void next(int ring) {
    if (++slot == ring) slot = 0, phase ^= 1;
  }
};

template <typename T, bool kTransA, bool kTransB, int BN, int Stages, int kCluster, bool kSkinny = false>
__global__ void __launch_bounds__(WgmmaConfig<BN, Stages, sizeof(T), kSkinny>::kThreads, 1)
gemm_wgmma_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const __grid_constant__ CUtensorMap map_d, const __grid_constant__ CUtensorMap map_a32,
                       const __grid_constant__ CUtensorMap map_b_last, const GemmKernelArgs args, const int tma_store,
                       const int raster, const WgmmaTailSplit ts) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = WgmmaConfig<BN, Stages, sizeof(T), kSkinny>;
  constexpr int BM = Cfg::BM, BK = Cfg::BK;
  // int8 -> int32 (exact, no alpha): 8-bit wgmma reads both operands K-major only.
  constexpr bool kInt8 = std::is_same_v<T, int8_t>;
  static_assert(!kInt8 || (!kTransA && kTransB), "int8 wgmma: A [M, K] and B stored [N, K]");
  using Acc = std::conditional_t<kInt8, int32_t, float>;
  using Acc4 = std::conditional_t<kInt8, int4, float4>;
  static_assert(kCluster == 1 || kCluster == 2, "cluster of 1 or 2 CTAs along M");
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[Stages];
  __shared__ __align__(8) uint64_t empty_bar[Stages];
  // 128-byte swizzle atoms must start on 1024-byte boundaries.
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  // The skinny tile's ring: slots of its unit's rows of A, as many as fit (more k-tiles of
  // weight in flight: an SM's stream is bound by its bytes in flight, NOTES.md "Token tiles").
  const int ring = kSkinny ? ts.ring : Stages;
  const uint32_t a_stride = kSkinny ? ts.a_stride : Cfg::kABytes;
  unsigned char* smem_a = smem;
  unsigned char* smem_b = smem + ring * a_stride;
  unsigned char* smem_epi = smem + Stages * Cfg::kStageBytes;

  const int M = args.M, N = args.N, K = args.K;
  // Warp-uniform to the compiler (a shuffle from lane 0), so the A descriptor, which derives
  // from it, can live in uniform registers, as the wgmma operands must.
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  const int wg_tid = threadIdx.x % 128;
  const int ktiles = div_ceil(K, BK);
  // The skinny tile's token tiles are tile_n tokens (<= BN) apart; every other tile BN.
  const int tile_w = kSkinny ? ts.tile_n : BN;
  // Work units: kCluster vertically adjacent tiles sharing one column of B; the CTAs of
  // a cluster take the same unit, rank r its r-th tile. A persistent grid strides the
  // units; a grid of one cluster per unit runs each once.
  const int rank = kCluster > 1 ? static_cast<int>(cluster::ctarank()) : 0;
  const int unit_rows = div_ceil(div_ceil(M, BM), kCluster), tiles_n = div_ceil(N, BN);
  const int first_unit = blockIdx.x / kCluster, unit_stride = gridDim.x / kCluster;
#ifdef CLO_DEV_STAMPS
  auto dev_now = [] { return global_timer_ns(); };
  unsigned long long* dev_stamp = args.dev_stamps == nullptr ? nullptr : args.dev_stamps + kGemmDevStamps * blockIdx.x;
  if (dev_stamp != nullptr && threadIdx.x == 0) dev_stamp[0] = dev_now();
#endif

  // The skinny tile's M-major A in 96-row units: rows 64..95 come as a 32-row box in the
  // 64-byte swizzle (map_a32), which the second consumer reads with a descriptor of its own.
  const bool a_half_tail = skinny_m_major_32_box<kSkinny, kTransA>(ts);
  // The skinny tile's units of 64 rows leave the second consumer's rows empty: it sits the call
  // out, and the stages' empty barriers count one consumer.
  const int live_consumers = kSkinny && ts.row_step <= 64 ? 1 : Cfg::kConsumers;
  // The wide skinny tile's units cut along K into equal chunks (skinny_wide_split), run as the
  // family's last-wave chunks (splits >= 2; the skinny tile's stream-K deals carry splits = 1).
  const bool wide_split = Cfg::kSkinnyWide && ts.splits >= 2;
  if (threadIdx.x == 0) {
    tma::prefetch_tensor_map(&map_a);
    tma::prefetch_tensor_map(&map_b);
    if (a_half_tail) tma::prefetch_tensor_map(&map_a32);
    if (ts.b_last_rows > 0) tma::prefetch_tensor_map(&map_b_last);
#pragma unroll
    for (int s = 0; s < Stages; ++s) {
      tma::mbarrier_init(&full_bar[s], 1);
      // One arrival per consumer warpgroup of every CTA whose producer writes the stage.
      tma::mbarrier_init(&empty_bar[s], live_consumers * kCluster);
    }
    tma::mbarrier_init_fence();
  }
  // The peer's barriers must be initialised before its first multicast or remote arrival.
  if constexpr (kCluster > 1) {
    cluster::sync();
  } else {
    __syncthreads();
  }
  // Launched as a PDL secondary (wgmma_pdl), the set-up above ran beside the previous
  // kernel's tail; every global access (the TMA loads, the split's workspace, the stores)
  // comes after this wait (but a CLO_DEV_STAMPS build's first stamp, a probe's own buffer).
  // The next kernel's CTAs may then take only SMs this grid leaves idle or frees: one of
  // these CTAs fills an SM's registers.
  pdl_wait_then_release();

  if (warpgroup == 0) {
    wgmma::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (wg_tid == 0) {
      int it = 0;  // k-tiles issued by this CTA over all its work: ring slot and phase
      RingPos slot_pos;  // the skinny tile's slot and phase of k-tile `it`
      // k-tiles [kb, ke) of work unit `unit` into the ring.
      auto load_unit = [&](int unit, int kb, int ke) {
        // The skinny tile's units are ts.row_step rows (a K-major A box that high) of one of
        // its ts.tiles_n tile columns; grouped_block knows only 128-row units.
        const BlockCoord blk = kSkinny ? BlockCoord{unit / ts.tiles_n, unit % ts.tiles_n}
                                       : grouped_block(unit, unit_rows, tiles_n, raster);
        const int m0 = kSkinny ? blk.bm * ts.row_step : (blk.bm * kCluster + rank) * BM, n0 = blk.bn * tile_w;
        // 64-wide m/n chunks entirely past M / N are not loaded (their stale smem only
        // feeds output rows / columns the epilogue masks); the byte count follows. A
        // cluster's second tile may lie wholly past M: it loads no A, still its half of B.
        // (The skinny tile's M-major units of 64 rows load one chunk: its second consumer sits
        // those units out.)
        const int a_chunks = m0 >= M                       ? 0
                             : kSkinny && kTransA && ts.row_step == 64 ? 1
                             : kTransA                     ? min(BM / 64, div_ceil(M - m0, 64))
                                                           : BM / 64;
        const int b_chunks = kTransB ? 0 : min(BN / 64, div_ceil(N - n0, 64));  // N-major B: 64-column boxes
        // The skinny tile's token tile is a box of tile_n rows (map_b), its last one, where it holds
        // fewer tokens, of those tokens' rows only (map_b_last, ts.b_last_rows: the tokens rounded
        // up to 8); the slot's other rows keep stale data, which feeds only output columns the
        // epilogue drops (past the tile or past M).
        const bool b_last = kSkinny && ts.b_last_rows > 0 && n0 + tile_w > N;
        const uint32_t b_bytes = kTransB ? (b_last ? ts.b_last_rows : tile_w) * 128u : b_chunks * 8192u;
        for (int kt = kb; kt < ke; ++kt, ++it) {
          const int s = kSkinny ? slot_pos.slot : it % Stages;
          // Stage s last held k-tile it - ring: wait until every CTA that reads the
          // stage has released it (phase (it/ring - 1) of empty).
          if (it >= ring) tma::mbarrier_wait_suspended(&empty_bar[s], kSkinny ? slot_pos.phase ^ 1 : ((it / Stages) - 1) & 1);
          if constexpr (kSkinny) slot_pos.next(ring);
          // A K-major B tile is one box of BN rows (the skinny tile's: b_bytes' rows; TMA counts rows past N, zero-filled).
          const uint32_t a_bytes = kSkinny && !kTransA ? (a_chunks > 0 ? ts.row_step * 128u : 0u)
                                   : a_half_tail && a_chunks == 2 ? 8192u + 4096u
                                                                  : a_chunks * 8192u;
          tma::mbarrier_arrive_expect_tx(&full_bar[s], a_bytes + b_bytes);
          const int k0 = kt * BK;
          unsigned char* sa = smem_a + s * a_stride;
          unsigned char* sb = smem_b + s * Cfg::kBBytes;
          if constexpr (!kTransA) {
            if (a_chunks > 0) tma::load_2d(sa, &map_a, k0, m0, &full_bar[s]);
          } else {
            for (int c = 0; c < a_chunks; ++c) {
              if (c == 1 && a_half_tail) {
                tma::load_2d(sa + 8192, &map_a32, m0 + 64, k0, &full_bar[s]);
              } else {
                tma::load_2d(sa + c * 8192, &map_a, m0 + 64 * c, k0, &full_bar[s]);
              }
            }
          }
          // B: each CTA of the cluster fetches its share once and multicasts it to all.
          if constexpr (kCluster == 1) {
            if constexpr (kTransB) {
              tma::load_2d(sb, b_last ? &map_b_last : &map_b, k0, n0, &full_bar[s]);
            } else {
              for (int c = 0; c < b_chunks; ++c) tma::load_2d(sb + c * 8192, &map_b, n0 + 64 * c, k0, &full_bar[s]);
            }
          } else {
            constexpr uint16_t kAll = (1u << kCluster) - 1;
            if constexpr (kTransB) {  // rows rank*BN/kCluster.. of the [BN n][64 k] tile
              constexpr int kRows = BN / kCluster;
              tma::load_2d_multicast(sb + rank * kRows * 128, &map_b, k0, n0 + rank * kRows, &full_bar[s], kAll);
            } else {  // 64-column chunks rank, rank + kCluster, ...
              for (int c = rank; c < b_chunks; c += kCluster) {
                tma::load_2d_multicast(sb + c * 8192, &map_b, n0 + 64 * c, k0, &full_bar[s], kAll);
              }
            }
          }
        }
      };
      if constexpr (kSkinny) {
        if (!wide_split) {
          for (int pos = ts.range_start(blockIdx.x), end = ts.range_start(blockIdx.x + 1); pos < end;) {
            const int t = pos / ktiles, stop = min(end, (t + 1) * ktiles);
            load_unit(t, pos - t * ktiles, stop - t * ktiles);
            pos = stop;
          }
        }
      } else {
      for (int unit = first_unit; unit < ts.dp_units; unit += unit_stride) load_unit(unit, 0, ktiles);
      }
      // The family's last-wave chunks and the wide tile's split: chunk c of tail unit t.
      if ((!kSkinny || wide_split) && kCluster == 1 && blockIdx.x < ts.tail_units * ts.splits) {
        const int t = blockIdx.x % ts.tail_units, c = blockIdx.x / ts.tail_units;
        load_unit(ts.dp_units + t, c * ktiles / ts.splits, (c + 1) * ktiles / ts.splits);
      }
    }
  } else {
    wgmma::setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int cw = warpgroup - 1;  // rows cw*64 .. cw*64+63 of the tile
    // Descriptors of stage 0 (A: 64 rows x 128 B, or m-chunk cw of 64 k x 128 B); a stage and
    // k-step are a constant further on (wgmma::desc_advance, attention/NOTES.md v9).
    // The 32-row tail box (a_half_tail): 64-byte rows, its upper 32 rows (lbo) stale and masked.
    const bool a_sw64 = a_half_tail && cw == 1;
    const uint64_t a_desc0 = a_sw64 ? wgmma::make_desc_sw64(smem_u32addr(smem_a) + 8192, 4096, 512)
                                    : wgmma::make_desc_sw128(smem_u32addr(smem_a) + cw * 8192, kTransA ? 8192 : 16, 1024);
    const uint32_t a_kstep = kTransA ? (a_sw64 ? 1024 : 2048) : 32;  // bytes of a k16 step
    const uint64_t b_desc0 = wgmma::make_desc_sw128(smem_u32addr(smem_b), kTransB ? 16 : 8192, 1024);
    // Stage `slot` read: one thread per warpgroup arrives for the warpgroup (its wgmmas
    // retired together) on the barrier of every CTA whose producer fills it.
    auto release = [&](int slot) {
      if (wg_tid != 0) return;
      uint64_t* bar = &empty_bar[slot];
      if constexpr (kCluster == 1) {
        tma::mbarrier_arrive(bar);
      } else {
#pragma unroll
        for (int r = 0; r < kCluster; ++r) cluster::mbarrier_arrive_remote(cluster::map_shared(bar, r));
      }
    };
    Acc acc[Cfg::kAccum];
    int it = 0;
    RingPos slot_pos;  // the skinny tile's slot and phase of k-tile `it`
#ifdef CLO_DEV_STAMPS
    const bool dev_on = dev_stamp != nullptr && cw == 0 && wg_tid == 0;
    unsigned long long dev_loop_ns = 0, dev_fix_ns = 0, dev_mark = 0;
#endif
    // acc = the sum over the next `nk` k-tiles of the ring.
    auto mainloop = [&](int nk) {
#pragma unroll
      for (int i = 0; i < Cfg::kAccum; ++i) acc[i] = Acc(0);
      const int it_begin = it, it_end = it + nk;
#ifdef CLO_DEV_STAMPS
      const unsigned long long dev_t0 = dev_on ? dev_now() : 0;
#endif
      int prev = 0;  // the slot of k-tile it - 1
      for (; it < it_end; ++it) {
        const int s = kSkinny ? slot_pos.slot : it % Stages;
        tma::mbarrier_wait(&full_bar[s], kSkinny ? slot_pos.phase : (it / Stages) & 1);
        if constexpr (kSkinny) slot_pos.next(ring);
#ifdef CLO_DEV_STAMPS
        if (dev_on && it == 0) dev_stamp[1] = dev_now();
#endif
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < Cfg::kKSteps; ++kk) {
          const uint64_t da = wgmma::desc_advance(a_desc0, s * a_stride + kk * a_kstep);
          const uint64_t db = wgmma::desc_advance(b_desc0, s * Cfg::kBBytes + (kTransB ? kk * 32 : kk * 2048));
          if constexpr (kInt8) {
            if constexpr (BN == 256) {
              wgmma::wgmma_m64n256k32_s8(acc, da, db);
            } else if constexpr (BN == 16) {
              wgmma::wgmma_m64n16k32_s8(acc, da, db);
            } else if constexpr (BN == 32) {
              wgmma::wgmma_m64n32k32_s8(acc, da, db);
            } else if constexpr (BN == 64) {
              wgmma::wgmma_m64n64k32_s8(acc, da, db);
            } else {
              wgmma::wgmma_m64n128k32_s8(acc, da, db);
            }
          } else if constexpr (BN == 256) {
            wgmma::wgmma_m64n256k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
          } else if constexpr (BN == 192) {
            wgmma::wgmma_m64n192k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
          } else if constexpr (BN == 16) {
            wgmma::wgmma_m64n16k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
          } else if constexpr (BN == 32) {
            wgmma::wgmma_m64n32k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
          } else if constexpr (BN == 64) {
            wgmma::wgmma_m64n64k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
          } else {
            wgmma::wgmma_m64n128k16<kTransA ? 1 : 0, kTransB ? 0 : 1>(wgmma::WgmmaTag<T>{}, acc, da, db);
          }
        }
        wgmma::commit_group();
        if (it > it_begin) {
          wgmma::wait_group<1>();  // the group of k-tile it-1 has retired: its stage is free
          release(kSkinny ? prev : (it - 1) % Stages);
        }
        prev = s;
      }
      wgmma::wait_group<0>();
      release(kSkinny ? prev : (it - 1) % Stages);  // every work item has at least one k-tile
#ifdef CLO_DEV_STAMPS
      if (dev_on) {
        dev_mark = dev_stamp[2] = dev_now();
        dev_loop_ns += dev_mark - dev_t0;
      }
#endif
    };
    // acc (alpha applied) into D at the tile of work unit `unit`. The producer meanwhile
    // fills the ring with the next unit's first k-tiles.
    auto epilogue = [&](int unit) {
      const BlockCoord blk = kSkinny ? BlockCoord{unit / ts.tiles_n, unit % ts.tiles_n}
                                     : grouped_block(unit, unit_rows, tiles_n, raster);
      const int m0 = kSkinny ? blk.bm * ts.row_step : (blk.bm * kCluster + rank) * BM, n0 = blk.bn * tile_w;
      const int warp = wg_tid / 32, lane = wg_tid % 32;
      // The value stored: alpha * acc, or the exact int32 sum for int8.
      auto out = [&](Acc x) {
        if constexpr (kInt8) {
          return x;
        } else {
          return args.alpha * x;
        }
      };
      if constexpr (kSkinny) {
        // The skinny tile computes D^T (rows: output columns n, columns: rows m of a, BN of
        // them from n0): element (r, c) of the accumulators goes to D[c][r].
        const int r0 = m0 + cw * 64 + warp * 16 + lane / 4, c0 = n0 + 2 * (lane % 4);
        // Rows past the unit's row_step (smem rows the unit's box did not fill) belong to
        // the next unit or to nothing; columns past the token tile, to the next tile or nothing.
        const int row_end = min(M, m0 + ts.row_step), col_end = min(N, n0 + tile_w);
        auto store_t = [&](auto out_tag) {
          using TOut = decltype(out_tag);
#pragma unroll
          for (int i = 0; i < Cfg::kAccum; ++i) {
            const int r = r0 + 8 * ((i / 2) % 2), c = c0 + 8 * (i / 4) + i % 2;
            if (r < row_end && c < col_end) store_one<TOut>(args, c, r, out(acc[i]));
          }
        };
        if constexpr (kInt8) {
          store_t(int32_t{});
        } else if (args.out_f32) {
          store_t(float{});
        } else {
          store_t(T{});
        }
      } else if (tma_store) {
        // Through shared memory and TMA stores (no C; output in T or fp32): the stores run
        // while the next tile's mainloop does. The warpgroup's 64 x BN rows go out in passes
        // of two 64-row boxes of 128-byte rows (64 columns of T, 32 of fp32) through its
        // 16 KB buffer, 128-byte swizzle: 16-byte chunk c of row r lies at chunk c ^ (r % 8),
        // so a warp's 8 rows hit distinct banks. TMA clips rows and columns past M and N.
        unsigned char* buf = smem_epi + cw * 16384;
        const int r = warp * 16 + lane / 4;  // r % 8 == lane / 4, and (r + 8) % 8 too
        auto stage_and_store = [&](auto out_tag) {
          using TOut = decltype(out_tag);
          constexpr int kElem = sizeof(TOut), kBoxCols = 128 / kElem, kGroupsPerBox = kBoxCols / 8;
#pragma unroll
          for (int h = 0; h < BN / (2 * kBoxCols); ++h) {
            if (wg_tid == 0) tma::store_wait_read<0>();  // the buffer's last store has read it
            named_barrier_sync(1 + cw, 128);
#pragma unroll
            for (int jj = 0; jj < 2 * kGroupsPerBox; ++jj) {
              const int j = 2 * kGroupsPerBox * h + jj;  // 8-column group of the accumulators
              const int byte = (8 * (jj % kGroupsPerBox) + 2 * (lane % 4)) * kElem;
              unsigned char* p = buf + (jj / kGroupsPerBox) * 8192 + r * 128 + (((byte / 16) ^ (lane / 4)) * 16) + byte % 16;
              if constexpr (kElem == 4) {  // fp32, or int32 for int8
                using Pair = std::conditional_t<kInt8, int2, float2>;
                *reinterpret_cast<Pair*>(p) = Pair{out(acc[4 * j]), out(acc[4 * j + 1])};
                *reinterpret_cast<Pair*>(p + 8 * 128) = Pair{out(acc[4 * j + 2]), out(acc[4 * j + 3])};
              } else {
                *reinterpret_cast<uint32_t*>(p) = pack_float2<TOut>(out(acc[4 * j]), out(acc[4 * j + 1]));
                *reinterpret_cast<uint32_t*>(p + 8 * 128) = pack_float2<TOut>(out(acc[4 * j + 2]), out(acc[4 * j + 3]));
              }
            }
            tma::fence_proxy_async_shared();
            named_barrier_sync(1 + cw, 128);
            if (wg_tid == 0) {
              tma::store_2d(&map_d, n0 + 2 * kBoxCols * h, m0 + cw * 64, buf);
              tma::store_2d(&map_d, n0 + 2 * kBoxCols * h + kBoxCols, m0 + cw * 64, buf + 8192);
              tma::store_commit();
            }
          }
        };
        if constexpr (kInt8) {
          stage_and_store(int32_t{});
        } else if (args.out_f32) {
          stage_and_store(float{});
        } else {
          stage_and_store(T{});
        }
      } else {
        // Straight from the accumulators (masked pair stores, alpha/beta/c).
        const int row0 = m0 + cw * 64 + warp * 16 + lane / 4;
        const int col0 = n0 + 2 * (lane % 4);
        auto store_all = [&](auto out_tag) {
          using TOut = decltype(out_tag);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            store_pair<TOut>(args, row0, col0 + 8 * j, args.alpha * acc[4 * j], args.alpha * acc[4 * j + 1]);
            store_pair<TOut>(args, row0 + 8, col0 + 8 * j, args.alpha * acc[4 * j + 2],
                             args.alpha * acc[4 * j + 3]);
          }
        };
        if constexpr (kInt8) {
          // int32 pairs, exact. Kept inline: routed through store_pair it compiles to other
          // SASS, which no GPU run has tested yet (NOTES.md, int8 on the wgmma family).
          int32_t* d = static_cast<int32_t*>(args.d);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = row0 + 8 * h, col = col0 + 8 * j;
              if (row >= M || col >= N) continue;
              int32_t* dst = d + (long long)row * args.ldd + col;
              if (args.pair_ok && col + 1 < N) {
                *reinterpret_cast<int2*>(dst) = make_int2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
              } else {
                dst[0] = acc[4 * j + 2 * h];
                if (col + 1 < N) dst[1] = acc[4 * j + 2 * h + 1];
              }
            }
          }
        } else if (args.out_f32) {
          store_all(float{});
        } else {
          store_all(T{});
        }
      }
    };

    if constexpr (Cfg::kSkinnyWide) {
      // Whole units (the CTA's range is units start/ktiles.. straight to D), or (wide_split) the
      // chunks below: no first stream-K piece to hold beside the wide tile's accumulators.
      if (cw < live_consumers && !wide_split) {
        for (int t = ts.range_start(blockIdx.x) / ktiles, end = ts.range_start(blockIdx.x + 1) / ktiles; t < end; ++t) {
          mainloop(ktiles);
          epilogue(t);
        }
      }
    } else if constexpr (kSkinny) {
      if (cw < live_consumers) {  // else no rows of the unit: nothing to compute or store
      // Stream-K over every unit: whole units straight to D; a piece at either end of the
      // range is stored, counted in, and the unit's last piece sums the pieces in CTA order
      // (the same bits whichever is last) and stores D. Both pieces are published at the end
      // of the range: a publication (store, release, atomic) takes the consumers several
      // round trips through a saturated memory system (2-7 us), and a first piece published
      // mid-range stalled the CTA's stream for that long, which became the grid's tail
      // (skinny_stream_probe stamps, NOTES.md "Skinny", run 7). So the first piece waits in
      // registers (kAccum more) while the rest of the range streams.
      constexpr int kVec = Cfg::kAccum / 4;
      auto piece_of = [&](int g, int piece) {
        return reinterpret_cast<Acc4*>(ts.partials) + ((size_t(2 * g + piece) * Cfg::kConsumers + cw) * kVec) * 128 +
               wg_tid;
      };
      const int start = ts.range_start(blockIdx.x), end = ts.range_start(blockIdx.x + 1);
      Acc held[Cfg::kAccum];
      int held_unit = -1, last_unit = -1;
      for (int pos = start; pos < end;) {
        const int t = pos / ktiles, stop = min(end, (t + 1) * ktiles);
        mainloop(stop - pos);
        const bool whole = pos == t * ktiles && stop == (t + 1) * ktiles;
        pos = stop;
        if (whole) {
          epilogue(t);
        } else if (pos < end) {  // the range's first piece, with more of the range after it
#pragma unroll
          for (int i = 0; i < Cfg::kAccum; ++i) held[i] = acc[i];
          held_unit = t;
        } else {
          last_unit = t;
        }
      }
      if (held_unit >= 0 || last_unit >= 0) {
        // Slot 0: the piece of the unit the range starts in; slot 1: of the unit it ends in.
        auto store_piece = [&](int slot, const Acc (&v)[Cfg::kAccum]) {
          Acc4* mine = piece_of(blockIdx.x, slot);
#pragma unroll
          for (int j = 0; j < kVec; ++j) __stcg(mine + j * 128, Acc4{v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]});
        };
        if (held_unit >= 0) store_piece(0, held);
        if (last_unit >= 0) store_piece(start / ktiles == last_unit ? 0 : 1, acc);
        named_barrier_sync(1 + cw, 128);
        // Pieces of unit t: CTAs cta_of(first k-tile) .. cta_of(last k-tile).
        auto pieces = [&](int t) { return ts.cta_of((t + 1) * ktiles - 1) - ts.cta_of(t * ktiles) + 1; };
        bool held_last = false, last_last = false;
        if (wg_tid == 0) {  // one release, both counts in flight together, acquire if either is final
          fence_acq_rel_gpu();
          const int before_held = held_unit >= 0 ? atomic_add_relaxed_gpu(ts.counters + held_unit * Cfg::kConsumers + cw, 1) : -1;
          const int before_last = last_unit >= 0 ? atomic_add_relaxed_gpu(ts.counters + last_unit * Cfg::kConsumers + cw, 1) : -1;
          held_last = held_unit >= 0 && before_held == pieces(held_unit) - 1;
          last_last = last_unit >= 0 && before_last == pieces(last_unit) - 1;
          if (held_last || last_last) fence_acq_rel_gpu();
        }
        // The last piece of unit t in: every piece from memory, in CTA order, then D. The
        // loads of up to kAhead pieces are issued together (one round trip, not one a piece).
        auto sum_and_store = [&](int t) {
          // Up to 16 float4 of loads in flight a thread (4 pieces at BN = 16, 2 at 64, one at a
          // time at 128, beside its 64 accumulators).
          constexpr int kAhead = kVec <= 2 ? 4 : kVec <= 8 ? 2 : 1;
          const int lo = ts.cta_of(t * ktiles), hi = ts.cta_of((t + 1) * ktiles - 1);
          for (int g0 = lo; g0 <= hi; g0 += kAhead) {
            Acc4 v[kAhead][kVec];
#pragma unroll
            for (int q = 0; q < kAhead; ++q) {
              const int g = g0 + q;
              if (g > hi) continue;
              // CTA g's piece of unit t is its first unless its range starts before unit t.
              const Acc4* src = piece_of(g, ts.range_start(g) / ktiles == t ? 0 : 1);
#pragma unroll
              for (int j = 0; j < kVec; ++j) v[q][j] = __ldcg(src + j * 128);
            }
#pragma unroll
            for (int q = 0; q < kAhead; ++q) {
              if (g0 + q > hi) continue;
#pragma unroll
              for (int j = 0; j < kVec; ++j) {
                Acc* a = acc + 4 * j;
                const bool first = g0 + q == lo;
                a[0] = first ? v[q][j].x : a[0] + v[q][j].x;
                a[1] = first ? v[q][j].y : a[1] + v[q][j].y;
                a[2] = first ? v[q][j].z : a[2] + v[q][j].z;
                a[3] = first ? v[q][j].w : a[3] + v[q][j].w;
              }
            }
          }
          epilogue(t);
        };
        if (named_barrier_or(1 + cw, 128, held_last)) sum_and_store(held_unit);
        if (named_barrier_or(1 + cw, 128, last_last)) sum_and_store(last_unit);
#ifdef CLO_DEV_STAMPS
        if (dev_on) dev_fix_ns += dev_now() - dev_mark;
#endif
      }
#ifdef CLO_DEV_STAMPS
      if (dev_on) {
        dev_stamp[3] = dev_now();
        dev_stamp[4] = dev_loop_ns;
        dev_stamp[5] = dev_fix_ns;
      }
#endif
      }
    } else {
    for (int unit = first_unit; unit < ts.dp_units; unit += unit_stride) {
      mainloop(ktiles);
      epilogue(unit);
    }
    }
    if ((!kSkinny || (wide_split && cw < live_consumers)) && kCluster == 1 && blockIdx.x < ts.tail_units * ts.splits) {
      // This CTA's chunk of a tail unit (the family's last wave, the wide tile's split): store it,
      // count it in; the unit's last chunk sums all of them in chunk order and stores D.
      const int t = blockIdx.x % ts.tail_units, c = blockIdx.x / ts.tail_units;
      mainloop((c + 1) * ktiles / ts.splits - c * ktiles / ts.splits);
      constexpr int kVec = Cfg::kAccum / 4;
      // This warpgroup's float4 column of chunk `chunk` (a warp's 512 bytes contiguous).
      auto chunk_of = [&](int chunk) {
        return reinterpret_cast<Acc4*>(ts.partials) +
               ((size_t(chunk * ts.tail_units + t) * Cfg::kConsumers + cw) * kVec) * 128 + wg_tid;
      };
      Acc4* mine = chunk_of(c);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        __stcg(mine + j * 128, Acc4{acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]});
      }
      named_barrier_sync(1 + cw, 128);
      bool last = false;
      if (wg_tid == 0) last = atomic_add_acq_rel_gpu(ts.counters + t * Cfg::kConsumers + cw, 1) == ts.splits - 1;
      if (named_barrier_or(1 + cw, 128, last)) {
        // Every chunk from memory, this one's too, in as few rounds of loads as registers
        // allow (the sum is bound by the bytes in flight: ~3 us per 128 KB chunk in 4 rounds
        // of 8 float4 per thread, ~1.5 in 2 of 16). Beside 128 accumulators, 2 rounds of 16
        // made ptxas spill into the whole-unit loop; 3 rounds of 11 do not.
        constexpr int kRounds = kVec > 16 ? 3 : 1;
        constexpr int kChunk = (kVec + kRounds - 1) / kRounds;
#pragma unroll
        for (int j0 = 0; j0 < kVec; j0 += kChunk) {
          for (int chunk = 0; chunk < ts.splits; ++chunk) {
            const Acc4* src = chunk_of(chunk) + j0 * 128;
            Acc4 v[kChunk];
#pragma unroll
            for (int j = 0; j < kChunk; ++j) {
              if (j0 + j < kVec) v[j] = __ldcg(src + j * 128);
            }
#pragma unroll
            for (int j = 0; j < kChunk; ++j) {
              if (j0 + j >= kVec) break;
              Acc* a = acc + 4 * (j0 + j);
              a[0] = chunk == 0 ? v[j].x : a[0] + v[j].x;
              a[1] = chunk == 0 ? v[j].y : a[1] + v[j].y;
              a[2] = chunk == 0 ? v[j].z : a[2] + v[j].z;
              a[3] = chunk == 0 ? v[j].w : a[3] + v[j].w;
            }
          }
        }
        epilogue(ts.dp_units + t);
      }
    }
    if (tma_store && wg_tid == 0) tma::store_wait_all();  // the buffer stays valid until read
  }
  // No CTA may exit while its peer can still arrive on its barriers or write its ring.
  if constexpr (kCluster > 1) cluster::sync();
#endif
}

// Whether a launch of the family is a PDL secondary (gemm.h, kGemmPdl*): under the default the
// skinny tile, but not its token tiles of units above 64 weight rows (6144 rows in 96-row
// units, 64-256 tokens: 1-10% slower; those of 64 rows faster), and never the large tiles (no
// gain: NOTES.md "PDL").
inline bool wgmma_pdl(int mode, bool skinny, const WgmmaTailSplit& ts) {
  if (mode == kGemmPdlAll) return true;
  return mode == kGemmPdlDecode && skinny && !(ts.tiles_n > 1 && ts.row_step > 64);
}

template <typename T, bool kTransA, bool kTransB, int BN, int Stages, int kCluster, bool kSkinny = false>
inline cudaError_t launch_wgmma_cfg(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream) {
  const bool persistent = sch.persistent, tma_store = sch.tma_store;
  using Cfg = WgmmaConfig<BN, Stages, sizeof(T), kSkinny>;
  CUtensorMap map_a, map_b;
  // Tensor maps over the stored matrices: dim0 is the contiguous one, boxes of 128-byte rows
  // (kRow elements). A cluster's CTAs each fetch 1/kCluster of a K-major B tile.
  // (map_a and map_b, whose box heights the skinny tile's plan decides, are encoded below.)
  // The skinny tile streams its operands once (no L2 reuse to keep): tma::stream_l2_promotion
  // (H200: M=16 N=12288 K=4096 b [K, N] 29.9 -> 26.4 us, M=1 / 16 b [N, K] 26.9 / 27.0 ->
  // 26.0 / 26.2; csrc/gemm/NOTES.md, "L2 promotion"). The large tiles keep 256 B.
  constexpr uint32_t kRow = Cfg::BK, kElem = sizeof(T);
  const CUtensorMapL2promotion promo = kSkinny ? tma::stream_l2_promotion() : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  constexpr CUtensorMapSwizzle kSw128 = CU_TENSOR_MAP_SWIZZLE_128B;
  cudaError_t err = cudaSuccess;
  CUtensorMap map_d{};
  if (tma_store) {
    const uint32_t elem = static_cast<uint32_t>(elem_size(p.out_dtype));  // boxes of 128-byte rows
    err = encode_tensor_map_2d(&map_d, p.out_dtype, p.d, p.N, p.M, p.ldd * elem, 128 / elem, 64);
    if (err != cudaSuccess) return err;
  }
  auto kernel = gemm_wgmma_sm90_kernel<T, kTransA, kTransB, BN, Stages, kCluster, kSkinny>;
  err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const long long units = (long long)div_ceil(div_ceil(p.M, Cfg::BM), kCluster) * div_ceil(p.N, Cfg::BN);
  long long clusters = units;
  if (persistent) {
    // Co-resident clusters: one CTA per SM for single CTAs (cached per device by
    // device_sm_count); for pairs the occupancy query, cached per device.
    long long resident = device_sm_count();
    if constexpr (kCluster > 1) {
      static int cluster_slots[64] = {0};
      const int dev = current_device_slot();
      if (cluster_slots[dev] == 0) {
        cluster_slots[dev] = cluster::max_active_clusters(kernel, kCluster, Cfg::kThreads, Cfg::kSmemBytes);
      }
      resident = cluster_slots[dev];
    }
    if (resident > 0) clusters = std::min<long long>(units, resident);
  }
  if (clusters * kCluster > 0x7fffffffLL) return cudaErrorInvalidValue;
  WgmmaTailSplit ts;
  ts.dp_units = static_cast<int>(units);  // every unit whole
  if constexpr (kSkinny) {
    // Token tiles, whole units of fewer rows or stream-K (plan_skinny_deal); stream-K without
    // the workspace: one CTA per 128-row unit.
    const int ktiles = div_ceil(p.K, Cfg::BK);
    clusters = device_sm_count();
    constexpr bool kS8 = std::is_same_v<T, int8_t>;  // int8's deals (plan_skinny_deal: short waves, no 16-wide tiles)
    if (!plan_skinny_deal(p.M, p.N, BN, ktiles, !kTransA, clusters, kS8, ts)) return cudaErrorNotSupported;
    const size_t bytes = skinny_stream_k_workspace_bytes<Cfg>(ts, clusters);
    if (bytes > 0 && (p.workspace == nullptr || p.workspace_bytes < bytes)) {
      clusters = 0;
      ts = plan_skinny(p.M, ktiles, !kTransA, clusters, kS8, skinny_split_units(BN, !kTransA));
    } else if (bytes > 0) {
      const size_t counter_bytes = tail_split_counter_bytes<Cfg>(ts);
      ts.counters = static_cast<int*>(p.workspace);
      ts.partials = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + counter_bytes);
      err = cudaMemsetAsync(p.workspace, 0, counter_bytes, stream);
      if (err != cudaSuccess) return err;
    }
    ts.a_stride = static_cast<uint32_t>((ts.row_step + 7) / 8) * 1024;  // (the fallback re-plans)
    ts.ring = static_cast<int>(std::min<size_t>(Stages, Cfg::kRingBytes / (ts.a_stride + Cfg::kBBytes)));
    // Dev knob CLO_GEMM_SKINNY_RING: at most that many slots (unset or 0: as many as fit).
    static bool dev_ring = std::getenv("CLO_GEMM_SKINNY_RING") != nullptr;
    const int ring_cap = dev_knob("CLO_GEMM_SKINNY_RING", dev_ring, 0);
    if (ring_cap > 0) ts.ring = std::min(ts.ring, ring_cap);
    if (ts.tile_n == 0) ts.tile_n = BN;  // one tile of every token, or tiles of the kernel's width
  } else if (kCluster == 1 && persistent) {
    const WgmmaTailSplit plan = wgmma_tail_split(p, sch);
    // The binding sized the workspace by the same plan (wgmma_workspace_bytes); without it, whole units.
    if (plan.tail_units > 0 && p.workspace != nullptr && p.workspace_bytes >= tail_split_workspace_bytes<Cfg>(plan)) {
      ts = plan;
      if (ts.dp_units == 0) clusters = static_cast<long long>(ts.tail_units) * ts.splits;  // a split short wave
      const size_t counter_bytes = tail_split_counter_bytes<Cfg>(ts);
      ts.counters = static_cast<int*>(p.workspace);
      ts.partials = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + counter_bytes);
      err = cudaMemsetAsync(p.workspace, 0, counter_bytes, stream);
      if (err != cudaSuccess) return err;
    }
  }
  // A K-major B in boxes of `rows` rows: a cluster CTA's share of the tile, or the skinny tile's
  // token tile (tile_n rows, even tiles narrower than the kernel) and its clipped last one.
  auto encode_b_k_major = [&](CUtensorMap* map, uint32_t rows) {
    return encode_tensor_map_2d(map, p.in_dtype, p.b, p.K, p.N, p.ldb * kElem, kRow, rows, kSw128, promo);
  };
  err = kTransB ? encode_b_k_major(&map_b, kSkinny ? static_cast<uint32_t>(ts.tile_n) : Cfg::BN / kCluster)
                : encode_tensor_map_2d(&map_b, p.in_dtype, p.b, p.N, p.K, p.ldb * kElem, kRow, Cfg::BK, kSw128, promo);
  if (err != cudaSuccess) return err;
  const uint32_t a_box_rows = kSkinny ? static_cast<uint32_t>(ts.row_step) : Cfg::BM;
  err = kTransA ? encode_tensor_map_2d(&map_a, p.in_dtype, p.a, p.M, p.K, p.lda * kElem, kRow, Cfg::BK, kSw128, promo)
                : encode_tensor_map_2d(&map_a, p.in_dtype, p.a, p.K, p.M, p.lda * kElem, kRow, a_box_rows, kSw128, promo);
  if (err != cudaSuccess) return err;
  CUtensorMap map_b_last{};  // the skinny tile's last token tile, its box clipped to the tokens
  if constexpr (kSkinny && kTransB && kCluster == 1) {
    // A box's rows past the tensor, which TMA fills with zeros, measured costlier than rows read:
    // 4096 rows at M = 72 (a second token tile of 8 tokens in a 64-row box) 23.2 us against 17.4
    // at M = 128 on the same deal (NOTES.md "Stop 126"). Dev knob CLO_GEMM_SKINNY_BOX_CLIP: 0 off.
    static bool dev_clip = std::getenv("CLO_GEMM_SKINNY_BOX_CLIP") != nullptr;
    const int last_tokens = p.N - (ts.tiles_n - 1) * ts.tile_n;  // the swapped problem's N: the tokens
    const int rows = std::min(ts.tile_n, (last_tokens + 7) / 8 * 8);
    if (dev_knob("CLO_GEMM_SKINNY_BOX_CLIP", dev_clip, 1) != 0 && rows < ts.tile_n) {
      err = encode_b_k_major(&map_b_last, static_cast<uint32_t>(rows));
      if (err != cudaSuccess) return err;
      ts.b_last_rows = rows;
    }
  }
  CUtensorMap map_a32{};  // the skinny tile's 32-row boxes of an M-major A (96-row units)
  if (skinny_m_major_32_box<kSkinny, kTransA>(ts)) {
    err = encode_tensor_map_2d(&map_a32, p.in_dtype, p.a, p.M, p.K, p.lda * kElem, 32, Cfg::BK,
                               CU_TENSOR_MAP_SWIZZLE_64B, promo);
    if (err != cudaSuccess) return err;
  }
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = cluster::launch_config(dim3(static_cast<unsigned>(clusters * kCluster)), Cfg::kThreads,
                                                       Cfg::kSmemBytes, stream, kCluster, attr,
                                                       wgmma_pdl(sch.pdl_mode, kSkinny, ts));
  err = cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, map_d, map_a32, map_b_last, make_kernel_args(p),
                           tma_store ? 1 : 0, sch.raster, ts);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

// Tiles: "wgmma" 128x256x64 x 4 stages (192 KB), "wgmma_n128" 128x128x64 x 6 stages
// (192 KB) for problems with less than a wave of wide tiles, and the skinny tile for decode
// shapes, swapped, as wide as the rows of a it takes (or a token tile of them), 16, 32, 64,
// 128 or 192, in a 225 KB ring of slots of its unit's rows (64-128 of the weight) and BN rows of a:
// 18, 14 and 9 slots at 64-row units, 11, 9 and 7 at 128; the decode tile (16 wide) keeps 10
// (deeper rings measured slower there: NOTES.md "Token tiles").
template <int BN>
constexpr int skinny_wgmma_stages() {
  return BN == 16 ? 10 : static_cast<int>(WgmmaConfig<BN, 1, 2, true>::kRingBytes / (64 * 128 + BN * 128));
}
template <int BN>  // the workspace's shape only (BM, BN, consumers): the same for every element size
using SkinnyWgmmaConfig = WgmmaConfig<BN, skinny_wgmma_stages<BN>(), 2, true>;
template <typename T, bool kTransA, bool kTransB>
inline cudaError_t launch_wgmma_layout(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream) {
  if (sch.skinny) {  // a swapped problem whose B is K-major (launch_gemm_wgmma_skinny)
    if constexpr (kTransB) {
      if (sch.bn == 16) return launch_wgmma_cfg<T, kTransA, true, 16, skinny_wgmma_stages<16>(), 1, true>(p, sch, stream);
      if (sch.bn == 32) return launch_wgmma_cfg<T, kTransA, true, 32, skinny_wgmma_stages<32>(), 1, true>(p, sch, stream);
      if (sch.bn == 64) return launch_wgmma_cfg<T, kTransA, true, 64, skinny_wgmma_stages<64>(), 1, true>(p, sch, stream);
      if (sch.bn == 128) return launch_wgmma_cfg<T, kTransA, true, 128, skinny_wgmma_stages<128>(), 1, true>(p, sch, stream);
      if constexpr (sizeof(T) == 2) {
        if (sch.bn == 192) return launch_wgmma_cfg<T, kTransA, true, 192, skinny_wgmma_stages<192>(), 1, true>(p, sch, stream);
      }
    }
    return cudaErrorNotSupported;
  }
  if (sch.cluster == 2) {
    return sch.bn == 256 ? launch_wgmma_cfg<T, kTransA, kTransB, 256, 4, 2>(p, sch, stream)
                         : launch_wgmma_cfg<T, kTransA, kTransB, 128, 6, 2>(p, sch, stream);
  }
  return sch.bn == 256 ? launch_wgmma_cfg<T, kTransA, kTransB, 256, 4, 1>(p, sch, stream)
                       : launch_wgmma_cfg<T, kTransA, kTransB, 128, 6, 1>(p, sch, stream);
}

template <typename T>
inline cudaError_t launch_wgmma_typed(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream) {
  if (p.trans_a) {
    return p.trans_b ? launch_wgmma_layout<T, true, true>(p, sch, stream)
                     : launch_wgmma_layout<T, true, false>(p, sch, stream);
  }
  return p.trans_b ? launch_wgmma_layout<T, false, true>(p, sch, stream)
                   : launch_wgmma_layout<T, false, false>(p, sch, stream);
}

// Per-dtype instantiations (gemm_wgmma_sm90_f16.cu / _bf16.cu); sch.skinny takes the skinny
// tile, whose problem the caller has swapped (launch_gemm_wgmma_skinny).
cudaError_t launch_gemm_wgmma_f16(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream);
cudaError_t launch_gemm_wgmma_bf16(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream);
// int8 -> int32 (gemm_wgmma_sm90_int8.cu): A [M, K], B stored [N, K] only; and the [K, N] ->
// [N, K] copy of a row-major B (K, N multiples of 16) that the family then reads.
cudaError_t launch_gemm_wgmma_s8(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream);
cudaError_t launch_transpose_int8_to_nk(const void* b, void* bt, int K, int N, int64_t ldb, cudaStream_t stream);

}  // namespace cuda_llm_ops::gemm
