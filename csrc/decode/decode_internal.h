// Declarations shared by the decode .cu files: the per-(dtype, head_dim, layout)
// instantiations live in separate files so ninja compiles them in parallel.
#pragma once

#include <cuda_fp8.h>

#include <algorithm>

#include "decode/decode.h"
#include "decode/split_merge.cuh"  // split_keys, split_count_holding_keys: the split-count rules

namespace cuda_llm_ops::decode {

// Dev knob CLO_DECODE_VARIANT (NOTES.md, "Kernel choice"): which decode kernel runs.
// Unset when the process's first decode call runs: always the automatic choice, and the
// environment is never read again. Set then (to anything, e.g. 0): read again on every
// call, so one process can switch between calls (os.environ in Python; a CUDA graph
// keeps what it captured). 0 (or unknown): automatic; 1: the cp.async kernel; 2: the
// TMA kernel wherever it can run (sm_90, a cache TMA can describe), else the cp.async one.
constexpr int kDecodeKernelAuto = 0;
constexpr int kDecodeKernelCpAsync = 1;
constexpr int kDecodeKernelTma = 2;
int decode_dev_kernel();
// Dev knob CLO_DECODE_PDL, read like CLO_DECODE_VARIANT: kDecodePdlOff launches the decode
// kernels without programmatic dependent launch, kDecodePdlOn with it on every grid;
// anything else: where it pays (decode_pdl_pays; sm_90 only).
constexpr int kDecodePdlOff = 0, kDecodePdlOn = 1, kDecodePdlAuto = 2;
int decode_dev_pdl();
// Whether the attention kernel should launch with PDL (its blocks made resident behind the
// previous kernel's early trigger, waiting there). Graph replays of back-to-back calls
// (NOTES.md v39, v40): one partial wave or less (blocks <= sms) gains 0.5-2 us everywhere
// measured. Beyond, the waiting blocks take the free slots of SMs still running the
// previous grid, which can land the grid unevenly; measured per kernel family:
//  - 16-bit, kernel head dim 128 or less: lost 3-13% from 1.09 to 1.7 blocks per SM (1
//    split, 2 even splits), gained 3% at 1.03 (paged B=17/1K) and 0.7-1.5% from 1.94;
//  - FP8 caches at kernel head dim 128: gained 4% at 1.21, level at 1.45-1.7, lost 1.3-3%
//    at 1.94-3.88; at 64 (the small grids' two splits, 1.94 blocks per SM) PDL off cost
//    8-9% (B=16/2K 18.3 -> 19.9 us, B=1/16K 14.7 -> 16.0), so other FP8 head dims follow
//    the 16-bit rule;
//  - the balanced schedule at two blocks per SM (contiguous D = 64): lost 6%;
//  - the 256 kernel holds one block per SM, so nothing waits on a busy SM: ~1% gained at
//    1.45-1.94. So do two-row-tile blocks (`wide_rows`, decode_wide_rows_pay): `--wide-beyond`
//    (stop 72, 1 split at 1.52-1.7 units per SM, PDL off -> on, us): Nq 8 GQA 32/8 paged
//    B=25/8K 240.1 -> 238.5, B=28/4K 128.2 -> 126.7, contiguous B=25/8K 230.7 -> 229.3; one
//    token at Hq 32 / Hkv 1 B=200/4K paged 128.4 -> 126.8, contiguous 123.2 -> 121.9.
//  - the spread tail (1.2-1.5 blocks per SM: one whole unit per SM, the pieces beside them):
//    gained 0.6-1.5 us at every grid measured (stop 63).
// The TMA kernel's schedules (its kSchedule, and `schedule` here): the even grid
// (decode_block_work), the balanced schedule (decode_streamk_piece), the spread tail
// (decode_spread_work).
constexpr int kDecodeEvenGrid = 0, kDecodeBalanced = 1, kDecodeSpreadTail = 2;
inline bool decode_pdl_pays(int64_t blocks, int sms, int kernel_head_dim, bool fp8, int schedule,
                            bool wide_rows = false) {
  if (blocks <= sms || schedule == kDecodeSpreadTail || wide_rows) return true;
  if (schedule == kDecodeBalanced) return false;
  const bool past_band = grid_past_pdl_band(blocks, sms);
  if (fp8 && kernel_head_dim == 128) return !past_band;
  return kernel_head_dim == 256 || blocks * 100 <= int64_t(sms) * 105 || past_band;
}
// Dev knob CLO_DECODE_TMA_STAGES, read like CLO_DECODE_VARIANT: the TMA kernel's pipeline
// depth (2, 3 or 4 where it fits in shared memory; 0 or unset: the automatic choice).
int decode_dev_tma_stages();
// Dev knob CLO_DECODE_PACK, read like CLO_DECODE_VARIANT: 0 never pairs KV heads, 2 pairs
// them wherever legal (decode_packs_head_pairs), anything else: the automatic rule.
int decode_dev_pack();
// Dev knob CLO_DECODE_PAIR_KERNEL, read like CLO_DECODE_VARIANT: 256 runs 16-bit head pairs of
// head dims 72-80 on the D = 256 kernel (the kernel before stop 74; the pairing rule and split
// count stay the automatic ones); anything else: the D = 160 one (decode_pair_kernel_head_dim).
int decode_dev_pair_kernel();
// Dev knob CLO_DECODE_STREAMK, read like CLO_DECODE_VARIANT: kDecodeStreamKOff runs 2-split
// calls as even splits where the balanced schedule would run (decode_streamk_blocks);
// kDecodeStreamKByCapacity plans it by capacity on paged caches too; anything else
// (kDecodeStreamKByLength, the default): by length for paged 16-row blocks, by capacity for
// two-row-tile blocks (stop 83; their kernel holds no other plan since stop 84) and on
// contiguous caches; kDecodeStreamKSharedLines: by length, also where units read common cache
// lines that the automatic choice runs as even splits (decode_streamk_pays_shared_reads).
constexpr int kDecodeStreamKOff = 0, kDecodeStreamKByLength = 1, kDecodeStreamKByCapacity = 2,
              kDecodeStreamKSharedLines = 3;
int decode_dev_streamk_mode();
// Dev knob CLO_DECODE_SPREAD, read like CLO_DECODE_VARIANT: kDecodeSpreadOn runs every split
// call of the 16-bit D = 128 TMA kernel whose grid holds one to two units per SM as the
// spread tail (decode_spread_tail_pieces) in the call's num_splits pieces (2-split calls
// there still run the balanced schedule), kDecodeSpreadOff never; anything else: the
// automatic choice.
constexpr int kDecodeSpreadOff = 0, kDecodeSpreadOn = 1, kDecodeSpreadAuto = 2;
int decode_dev_spread();
// Dev knob CLO_DECODE_WIDE_ROWS, read like CLO_DECODE_VARIANT: kDecodeWideRowsOff keeps
// every block at one 16-row tile, kDecodeWideRowsOn runs two row tiles per block wherever
// the kernel can (decode_wide_rows_pay), as an even grid at every count; kDecodeWideRowsBalanced
// as On, and any 2-split call of half a unit to two 32-row units per SM runs them as the balanced
// schedule (decode_wide_rows_streamk_blocks; the automatic rule: 1-1.35 units per SM,
// decode_wide_rows_runs_balanced;
// always by capacity (stop 83; its kernel holds no other plan since stop 84);
// CLO_DECODE_STREAMK=0 leaves it an even grid); anything else: the
// automatic choice. A call that runs two row tiles does not reach the 16-row balanced schedule
// or the spread tail: CLO_DECODE_SPREAD acts on a count the two-tile rule takes only with this
// knob at 0.
constexpr int kDecodeWideRowsOff = 0, kDecodeWideRowsOn = 1, kDecodeWideRowsAuto = 2, kDecodeWideRowsBalanced = 3;
int decode_dev_wide_rows();
// Dev knob CLO_DECODE_MERGE_APART, read like CLO_DECODE_VARIANT: kDecodeMergeApartOff keeps the
// split merge in the last split block of each unit, kDecodeMergeApartOn runs it as its own
// kernel wherever it can (decode_merge_apart_pays); anything else: the automatic choice.
constexpr int kDecodeMergeApartOff = 0, kDecodeMergeApartOn = 1, kDecodeMergeApartAuto = 2;
int decode_dev_merge_apart();
// Whether a split call of the TMA kernel merges its splits in a kernel of its own rather than
// in the last split block of each unit, whose `block_threads` fold `block_rows` x kernel_head_dim / 4
// items, as many per L2 round trip as it has threads (~1.9 us each on the H200 at the end of a
// call): where that takes `min_round_trips` or more. The even grid (decode_split_merge_kernel)
// from two (H200, graph replays, cold L2, fused -> apart: B=1/16K GQA 32/8 Nq 2 23.9 -> 22.7 us,
// Nq 4 28.2 -> 23.6, Nq 8 31.4 -> 26.0; MQA B=8/16K 31.5 -> 26.2; D = 64 Nq 4 18.6 -> 16.7,
// D = 256 one token 39.9 -> 38.8; one round trip, one token at D = 128: 21.9 -> 22.2; NOTES.md
// "Stop 70"). The balanced schedule (decode_balanced_merge_kernel; its math warps fold) from
// three, since only its cut units merge (NOTES.md "Stop 82": four round trips, MQA B=136/2K 57.9
// -> 56.5, B=150/4K 104.6 -> 103.5, Nq 8 B=17/4K 91.8 -> 89.9, Nq 4 B=20/4K 103.4 -> 101.2; two,
// D = 256 one token B=18/2K 81.6 -> 83.5, B=20/8K 312.9 -> 314.5). Measured on the H200 only;
// the rule is the round-trip count, not the part. It counts one round trip per item a thread
// folds, the fold before stop 105; the fold now takes a thread's items together at head_dim 128
// and more over few splits (decode_epilogue), and on the H100 that fused fold and the merge
// kernel read within 1-2 us either way on 32-row units at 2-3 splits (NOTES.md "Stop 105"), so
// the rule is unchanged.
inline bool decode_merge_apart_pays(int num_splits, int block_rows, int kernel_head_dim, int block_threads,
                                    int min_round_trips) {
  const int knob = decode_dev_merge_apart();
  if (num_splits <= 1 || knob == kDecodeMergeApartOff) return false;
  return knob == kDecodeMergeApartOn || block_rows * (kernel_head_dim / 4) > (min_round_trips - 1) * block_threads;
}
// The most splits of a unit that run as one thread-block cluster (decode_split_cluster_pays).
constexpr int kDecodeMaxClusterSplits = 4;
// Dev knob CLO_DECODE_SPLIT_CLUSTER, read like CLO_DECODE_VARIANT: the most splits
// (kDecodeMaxClusterSplits at most) that run as split clusters, 0 or 1 none; anything else
// (unset, or out of range): the automatic choice (decode_split_cluster_pays).
constexpr int kDecodeSplitClusterAuto = -1;
int decode_dev_split_cluster();
// Whether a split call of the TMA kernel's even grid runs each unit's splits as one
// thread-block cluster that merges them through distributed shared memory
// (DecodeKernelParams::split_cluster; the launcher runs it only where one wave of such clusters
// at one block per SM holds the grid, and its kernel only at head_dim 128 and more:
// decode_runs_split_clusters): at 2-4 splits. It removes the split merge's hand-off between
// blocks (the merge kernel's ~5 us gap, or the last block's count and L2 round trips) and the
// partials' stores. H100, graph replays, cold L2, us, without -> with (cuDNN), NOTES.md "Stop
// 106": `--cluster-pair` (2 splits): paged MQA (Hq 32 / Hkv 1) B=66/2K 34.6 -> 31.1 (28.2),
// B=66/4K 56.8 -> 53.2 (50.4), B=66/8K 102.1 -> 98.8 (94.9), B=50/4K 45.9 -> 43.0 (44.0), B=60/4K
// 52.6 -> 49.3 (47.4), contiguous B=66/4K 55.4 -> 52.4 (50.3); GQA 32/8 Nq 8 B=8/4K 54.5 ->
// 51.1, contiguous B=8/8K 96.6 -> 93.7; one token B=8/8K 91.6 -> 90.8; FP8 MQA B=32/4K 31.5 ->
// 30.1. `--split-clusters` (3-4 splits, where a wave of them held the grid): MQA B=24/4K at
// its automatic 4 26.9 -> 25.0 (25.0), FP8 MQA B=12/8K 4 splits 32.0 -> 29.3, 3 splits 39.6 ->
// 37.1, B=16/8K 3 splits 40.3 -> 37.9; GQA 32/8 B=2/16K 3 and 4 splits 78.4 -> 77.6, 59.9 ->
// 59.2, Nq 4 64.1 -> 63.2; no row lost. (The H100's GPCs of 16 and 18 SMs hold 66 clusters of
// 2, 42 of 3, 32 of 4 at one block per SM: most automatic counts of 3-4 splits fill more.) Not
// measured on HBM3e parts (the H200); the rule is the hand-off it removes, not the part.
inline bool decode_split_cluster_pays(int num_splits) {
  const int knob = decode_dev_split_cluster();
  const int most = knob >= 0 && knob <= kDecodeMaxClusterSplits ? knob : kDecodeMaxClusterSplits;
  return num_splits >= 2 && num_splits <= most;
}
// Dev knob CLO_DECODE_HEAD_CLUSTER, read like CLO_DECODE_VARIANT: 0 never runs head clusters,
// 2 wherever the launcher can (below); anything else (unset): decode_head_clusters_pay.
constexpr int kDecodeHeadClusterOff = 0, kDecodeHeadClusterOn = 2;
int decode_dev_head_cluster();
// decode_merge_apart_pays' min_round_trips: the even grid's, the balanced schedule's
constexpr int kEvenGridMergeApartTrips = 2, kBalancedMergeApartTrips = 3;
// Dev knob CLO_DECODE_PLANE_BOXES, read like CLO_DECODE_VARIANT: 0 has the TMA kernel issue
// a box per 64-column plane (into the plain planes layout), 2 one box over every plane
// of its rows wherever the head dim is whole planes, and paged 16-bit D = 96 block-16 pages as
// the tail spans (encode_decode_tma_maps); anything else: the automatic choice
// (decode_row_boxes_pay; two-row-tile blocks decode_wide_row_boxes_pay).
constexpr int kDecodePlaneBoxesOff = 0, kDecodePlaneBoxesOn = 2;
int decode_dev_plane_boxes();
// Whether the TMA kernel's grid of `blocks` takes one box over every 64-column plane of its
// rows (half the boxes of a two-plane tile, its planes grouped by box height) rather than one
// per plane (NOTES.md "Stop 64"). Beyond one block per SM, where the
// TMA unit's per-box cost shows (H200, graph replays, cold L2, per plane -> spanning: paged
// GQA 32/8 B=46/8K block 16 405.3 -> 378.8 us, block 8 461.9 -> 393.7; MHA B=64/1K 255.3 ->
// 249.2; contiguous MHA B=64/4K 949.5 -> 941.4; paged D = 256 B=64/2K/GQA 261.5 -> 250.3,
// D = 192 213.9 -> 203.6; the spread tail B=17/1K 21.1 -> 20.8). At one block per SM or
// fewer the larger boxes lost (contiguous B=16/1K/GQA 19.7 -> 21.7, paged B=1/16K 21.9 ->
// 22.4, B=16/1K 20.1 -> 20.3): fewer boxes in flight per SM there. Measured on the H200
// only: other parts (`hbm3e` false: the H100's 3.35 TB/s needs fewer boxes a microsecond)
// keep a box per plane until measured.
inline bool decode_row_boxes_pay(int64_t blocks, int64_t sms, bool hbm3e) {
  const int knob = decode_dev_plane_boxes();
  if (knob == kDecodePlaneBoxesOff || knob == kDecodePlaneBoxesOn) return knob == kDecodePlaneBoxesOn;
  return hbm3e && blocks > sms;
}
// The two-row-tile kernel (decode_wide_rows_pay) on paged caches takes them at one wave too
// where a block's share of the keys is 2048 or more (head_dim 96: 512, below) (`block_keys`: the table's capacity, or
// the window, over the splits, as the split count reads it; a table sized far past its
// lengths spans where 1024-key blocks measured 2% better with a box per plane): its 32 rows'
// math per tile leaves a box per plane short of bytes in flight on the 16-row layout of a KV
// head's block (rows 2 KB apart at Hkv 8). `--one-wave-boxes` (stop 71, H200, graph replays, cold L2, us, per plane ->
// spanning): GQA 32/8 Nq 8 B=8/16K 149.9-159.2 -> 132.4-132.8 (contiguous 130.5-136.1),
// B=4/16K 76.0-80.1 -> 71.3, B=8/8K 78.2-81.2 -> 73.6, B=16/4K 73.6-76.8 -> 69.0, B=8/4K
// (2048 keys a block) 44.0 -> 43.1, B=2/16K (2048) 42.4 -> 41.7; MQA (Hq 32 / Hkv 1) B=32/16K
// 76.4 -> 74.1, B=16/16K (2048) 42.5 -> 42.4, but B=8/16K (1024 keys a block) 26.2 -> 26.8,
// B=4/16K (512) level. One row tile keeps a box per plane (GQA Nq 4 B=16/4K 66.7 -> 67.9,
// B=1/16K 23.5 -> 24.1; one token B=16/4K 65.0 -> 66.3); contiguous caches too (level).
// Paged 16-bit head_dim 96 in block-16 pages takes them as the tail spans (three 32-column
// planes under one box a page, decode_runs_tail_spans; the even grid only) where this holds:
// `--tail-spans-confirm` (stop 93, H200, graph replays, cold L2, GQA 32/8, us, a box per plane
// -> tail spans; contiguous beside): Nq 5 B=16/4K 69.2 -> 59.8 (60.0), B=8/16K 138.7 -> 116.7
// (118.0), B=4/16K 73.5 -> 64.6, B=16/2K 37.2 -> 32.9, B=8/4K 39.9 -> 35.7, B=2/16K 39.3 ->
// 35.4; Nq 8 B=8/16K 140.2 -> 117.5, B=16/4K 71.9 -> 63.7; beyond one wave Nq 5 B=12/8K 108.5
// -> 100.0 (98.8), B=24/4K 110.7 -> 102.5 (101.3), B=20/8K 181.1 -> 166.7 (163.2); B=16/1K,
// 16-row blocks then. One row tile keeps a box per plane (one token
// B=16/4K 54.7 -> 52.5 but in-order pages 51.3 -> 51.6; B=46/8K 308.2 -> 331.1).
// The tail spans from 512 keys a block (`head_dim` 96; `--wide-1k`, stop 94, two-tile blocks
// under 2048 keys, a box per plane -> tail spans, us: 1024 keys a block B=16/1K 20.7 -> 19.2,
// B=12/1K 20.4 -> 18.6, B=8/1K 19.9 -> 17.9, B=16/1536 28.8 -> 26.1, Nq 8 B=16/1K 21.5 -> 19.9;
// 512 keys B=8/1K 15.3 -> 15.0, B=2/1K 13.4 -> 12.6, B=4/1K 13.9 -> 13.3; but 256 keys B=4/1K
// 11.0 -> 11.5, B=2/1K 9.6 -> 9.8).
constexpr int64_t kWideRowBoxesMinKeys = 2048, kTailSpansMinKeys = 512;
// Other sm_90 parts take paged head_dim 96's tail spans alike since stop 101 (beyond one wave, or
// from 512 keys a block; head_dim 128 keeps a box per plane there, not measured): H100,
// `--wide-d64-d96-h100`, graph replays, cold L2, GQA 32/8 Nq 5, us, a box per plane -> tail spans:
// B=10/2K 35.6 -> 31.6, B=18/2K (beyond one wave) 71.6 -> 67.1, B=18/8K 200.9 -> 193.1, B=14/16K
// 259.4 -> 251.6, B=16/4K 75.8 -> 74.0, Nq 8 B=9/8K 104.6 -> 98.0; one token at Hq 32 / Hkv 1
// B=48/4K 39.2 -> 37.1; lost 2-3% at B=3/8K 33.3 / 34.2 and MQA B=24/4K 21.6 / 22.1; `--wide-1k`
// at 1024 keys a block B=12/1K 19.7 -> 18.0.
inline bool decode_wide_row_boxes_pay(int head_dim, bool paged, int64_t blocks, int64_t sms, int64_t block_keys,
                                      bool hbm3e) {
  if (decode_row_boxes_pay(blocks, sms, hbm3e)) return true;
  if (decode_dev_plane_boxes() == kDecodePlaneBoxesOff || !paged || (!hbm3e && head_dim != 96)) return false;
  return blocks > sms || block_keys >= (head_dim == 96 ? kTailSpansMinKeys : kWideRowBoxesMinKeys);
}
// Dev knob CLO_DECODE_NARROW, read like CLO_DECODE_VARIANT: kDecodeNarrowOff keeps every unit
// on the 16-row math tile (decode_warp_tile); anything else: the automatic choice
// (decode_narrow_rows_pay).
constexpr int kDecodeNarrowOff = 0, kDecodeNarrowAuto = 1;
int decode_dev_narrow();
// Whether a unit of `rows` query rows runs the narrow math tile (decode_warp_tile_narrow:
// the keys as the MMA's M dimension, for at most 8 rows) where the kernel has it
// (decode_runs_narrow: 16-bit caches, every one-row-tile kernel and schedule).
constexpr int kNarrowMaxRows = 8;
inline bool decode_narrow_rows_pay(int rows) {
  return rows <= kNarrowMaxRows && decode_dev_narrow() != kDecodeNarrowOff;
}
// The calls stop 77's small-grid rules measured and apply to (the split count,
// decode_small_grid_two_blocks_splits, and its depths and D = 96's 4 stages in
// decode_tma_stages_for): 16-bit caches (the callers' check) at head_dim exactly 64 or 96,
// one new token in units of at most kNarrowMaxRows rows (GQA 32/8 and MHA measured), on
// HBM3e Hopper parts.
inline bool decode_small_grid_rule_units(int head_dim, int seq_len_q, int rows_per_kv_head) {
  return (head_dim == 64 || head_dim == 96) && seq_len_q == 1 && rows_per_kv_head > 0 &&
         rows_per_kv_head <= kNarrowMaxRows && device_is_hopper_hbm3e();
}
#ifdef CLO_DEV_STAMPS
constexpr int kDecodeDevStamps = 21;  // per block (DecodeKernelParams::dev_stamps)
unsigned long long* decode_dev_stamps();
void decode_dev_set_stamps(unsigned long long* p);
#endif

// Pipeline stages of both kernels on one block per SM: 4 (D = 64), 3 (D = 96, 128), 2
// (D = 256). Deeper pipelines (6 stages at D = 128) were 5-20% slower on every shape
// (NOTES.md v4); the TMA kernel at D = 128 runs 3 rather than 2 on small grids (v7).
constexpr int decode_pipeline_stages(int head_dim) { return head_dim <= 64 ? 4 : (head_dim <= 128 ? 3 : 2); }

// Kernel choice (NOTES.md, "Kernel choice", v8, v23): the TMA kernel's pipeline depth for a
// grid of `blocks` thread blocks, or 0 for the cp.async kernel. Where the TMA kernel runs
// is measured per head dim (H100, same-call sweeps):
//  - D = 64 and 256: every grid; 2 stages beyond one block per SM (D = 64: 3.9 and 15.5
//    blocks per SM, paged 97.8 / 369.0 us vs the cp.async kernel's 117.3 / 387.0; D = 256:
//    361.9 / 1406.9 vs 375.9 / 1448.6), but 4 at D = 64 up to 1.25 blocks per SM (v25,
//    paged GQA 32:8 B=17/2K 34.1 -> 29.1 us, B=20 36.8 -> 33.1, MHA B=5 35.9 -> 32.4) and
//    on contiguous caches beyond 2 and up to 3 (v27);
//  - D = 128: paged caches on at most one block per SM (3 stages); every grid beyond one
//    block per SM, either layout, with 2 stages (v23, graph replays: paged GQA 32/8
//    B=48/1K 79.9 -> 73.3 us, B=64/1K 96.3 -> 93.7, B=64/4K 360.1 -> 353.5, MHA B=8/2K
//    94.5 -> 90.6, B=16/1K 95.2 -> 92.9; contiguous B=64/1K/GQA 93.0 -> 91.4; B=64/4K/MHA
//    1336-1339 vs 1351-1367, v7);
//  - D = 96: paged caches on at most one block per SM (3 stages); beyond, 96-column paged
//    rows (row_cols; not 80 or less on this kernel) unpaired (decode_packs_head_pairs) on
//    2 stages up to 1.5 blocks per SM, 3 beyond, but the cp.async kernel for tables of 8192
//    keys or more and for one split of at most 2 units per SM (v36); the cp.async kernel for contiguous caches
//    (v24, graph replays, paged GQA 32/8 N=2K: B=20 54.8 -> 48.1 us,
//    B=24 59.4 -> 54.7, B=48 123.2 -> 111.0, MHA B=5 54.2 -> 47.1; contiguous B=64 136.7
//    vs 136.0 at 3 stages; D = 80 B=64 125.7 vs 133.0). Before the tail plane
//    (decode_kv_offset) the TMA kernel was slower there at every depth (v8, v23);
//  - narrower rows on the D = 96 kernel (measured at 80 columns), paged or contiguous: 2
//    stages up to 1.5 blocks per SM, where the cp.async kernel fell far behind (v30, GQA
//    32/8 N=4K, paged / contiguous: B=17 106.9 / 85.3 -> 73.7 / 81.2 us, B=24 108.7 /
//    113.1 -> 91.3 / 109.1); 3 stages where one split's grid (blocks / splits) holds 2-3
//    units per SM, 1 or 2 splits (v31, auto before -> after, paged / contiguous: 2 splits
//    B=36/2K 99.4 / 92.5 -> 89.8 / 87.3, B=40/4K 185.0 / 177.6 -> 168.8 / 172.4, B=44/4K
//    186.6 / 191.2 -> 183.2 / 188.5; 1 split B=48/2K 116.2 / 105.4 -> 101.4 / 103.0,
//    B=48/4K 229.0 / 206.6 -> 220.4 / 191.2); the cp.async kernel elsewhere (1 split at
//    1.7-1.9 units per SM: B=28/4K paged 115.1 against TMA 3's 133.9; beyond 3: B=64
//    paged 242.9 against 300.0);
//  - 16-bit head pairs of D = 88-96 (the D = 256 kernel over 176-192-column rows, `pairs`):
//    3 stages (v24 at 96: B=64/8K/GQA 578.2 -> 564.5 us, MHA B=32/2K 280.2 -> 279.0; the H200
//    rules at 72-88, NOTES.md "H200 rules"); of 72-80 (the D = 160 kernel): below.
// The caller also needs sm_90 code and a cache TMA can describe. The split heuristic asks
// the same question (a large grid on the TMA kernel runs 1 split).
// FP8 caches (paged): the TMA kernel on every grid, 4 stages on at most one block per SM,
// 3 beyond (NOTES.md v19: B=16/1K/GQA 16.2 us vs the cp.async kernel's best 21.5, B=1/16K
// 18.2 vs 22.8, B=16/16K 188.9 vs 200.8, B=64/1K 55.8 at 3 stages vs 57.2 at 4 and 62.8,
// B=64/4K/MHA 732.6 vs 749.8 and 768.0).
// head_dim: the kernel's; row_cols: the cache rows' real columns (0: head_dim); blocks: the
// whole grid's, `splits` splits of the sequences; max_kv_len: decode_read_kv_len (the keys a
// block may read: the table capacity or Nk, or a sliding window's span, as the split
// heuristic sizes for; 0: unknown); seq_len_q: the new tokens per sequence; rows_per_kv_head:
// the query rows a unit holds (0: unknown).
// The 16-bit D = 96 TMA kernel's shared memory at 4 stages (decode_tma_smem_bytes; checked
// beside it)
constexpr int64_t kDecodeD96FourStageSmem = 102720;
inline int decode_tma_stages_for(int head_dim, bool paged, int64_t blocks, int64_t sms, bool fp8 = false,
                                 int row_cols = 0, bool pairs = false, int splits = 1, int64_t max_kv_len = 0,
                                 int seq_len_q = 1, int rows_per_kv_head = 0) {
  if (device_cc_major() < 9) return 0;
  const bool small_grid = blocks <= sms;
  if (fp8) return small_grid ? 4 : 3;
  if (pairs && head_dim == 256) return 3;
  // D = 160 (head pairs of 72-80; NOTES.md "Stop 74"): 2 stages (86 KB: two blocks per SM)
  // beyond one block per SM (D = 80 MHA B=64/2K 342.4 us at 3, 343.1 at 4, 318.5 at 2; GQA
  // 32/8 B=56/2K 87.4 / 87.3 / 77.4), 3 up to one (GQA B=32/4K 84.5 at 3, 86.8 at 4, 89.0 at 2)
  if (pairs && head_dim == 160) return small_grid ? 3 : 2;
  // HBM3e parts, 16-bit 128-column rows (NOTES.md "Pipeline depth and kernel on the H200"):
  // one more stage in flight on small grids, paged (4: B=16/1K/GQA 19.4 -> 19.1 us, B=1/16K
  // 21.8 -> 21.4, B=16/4K 64.1 -> 63.3) and contiguous (the TMA kernel at 3 stages, where
  // the H100 ran cp.async: B=16/1K 20.1 -> 18.8, B=1/16K 22.4 -> 21.0, B=16/4K 65.2 ->
  // 61.9), and on paged grids of up to 1.35 blocks per SM (3: B=17/1K 24.8 -> 23.5, B=20/1K
  // 27.3 -> 25.2; contiguous ones there keep 2, 22.1 against 23.5). Paged small grids at any
  // Nq (stop 68, `--nq-tiles`, two rounds, 3 / 4 stages: Nq 2 B=16/4K 65.9 / 64.9, Nq 4
  // B=16/4K 67.0 / 66.0, B=1/16K 28.3 / 27.8, B=8/8K 71.9 / 71.1; Nq 8 B=1/16K 40.6 / 40.3,
  // B=2/16K 70.5 / 70.1; v25's loss at Nq 4, 67.2 -> 74.2 us, was before the kernel's later
  // changes); contiguous small grids run TMA 3 at any Nq (stop 67, Nq 2 and 4 at GQA 32/8: the
  // cp.async kernel read Nq 2 B=12/16K at 1 split in 243.5 us, TMA 3 188.0, TMA 4 218.6).
  const bool rows128 = head_dim == 128 && !pairs && (row_cols == 0 || row_cols == 128);
  const bool hbm3e_rows128 = rows128 && device_is_hopper_hbm3e();
  if (small_grid && hbm3e_rows128) return paged ? 4 : 3;
  // Other sm_90 parts (the H100): contiguous small grids of 128-column rows take TMA 3 too
  // since stop 108 (`--h100-contig-small`, 253c149, GQA 32/8, us, cp.async / TMA 3 / TMA 4
  // at the count then automatic): one block per unit, 16K keys, B=9 311.7 / 195.7 / 240.7,
  // B=12 312.0 / 257.8 / 287.2, B=14 316.6 / 301.7 / 312.7, B=16 341.9 / 339.0 / 338.7; B=12
  // 4K 81.8 / 67.5 / 74.5, 2K 43.4 / 35.8 / 39.4; split small grids B=1/16K (16 splits) 28.6 /
  // 27.6 / 27.8, B=2 (8) 49.1 / 48.5 / 48.4, B=6 (2) 159.8 / 141.1 / 146.6, B=8 (2) 176.3 /
  // 173.6 / 173.5; MHA B=1/16K (4) 90.7 / 89.5 / 89.6, B=2 (2) 176.5 / 173.5 / 173.1. The
  // cp.async kernel's one block per SM is bound by its bytes in flight (B=9-14 at 1 split read
  // 16K keys a unit in the same ~312 us).
  if (small_grid && rows128 && !paged) return 3;
  // HBM3e parts, 16-bit 96-column rows, small grids, one new token in units of at most
  // kNarrowMaxRows rows (the GQA 32/8 units measured): 4 stages on both layouts where they fit
  // (NOTES.md "Stop 77", paged 3 -> 4, us: B=16/4K 58.9 -> 58.4, B=12/4K 58.5 -> 57.8, B=16/16K
  // 224.8 -> 222.7, B=2/16K 33.3 -> 32.9; contiguous, cp.async -> TMA 4 (TMA 3): B=16/4K 52.4 ->
  // 49.8 (50.7), B=12/4K 50.4 -> 44.8 (45.0), B=8/8K 54.0 -> 51.0 (52.3), B=16/16K 189.8 ->
  // 178.6 (180.6), B=2/16K 30.7 -> 29.1 (29.8), B=1/16K 18.7 -> 18.1 (18.2)).
  // (head pairs never run the 64 / 96 kernels: their rows are 128 columns or more)
  const bool small_grid_rule =
      (row_cols == 0 || row_cols == head_dim) && decode_small_grid_rule_units(head_dim, seq_len_q, rows_per_kv_head);
  if (small_grid && small_grid_rule && head_dim == 96 && smem_budget_per_block() >= kDecodeD96FourStageSmem) return 4;
  if (small_grid) return paged || head_dim == 64 || head_dim == 256 ? decode_pipeline_stages(head_dim) : 0;
  if (hbm3e_rows128 && seq_len_q == 1 && paged && 20 * blocks <= 27 * sms) return 3;
  // Paged D = 64 / 96 split to about two blocks per SM on HBM3e parts (decode_small_grid_two_blocks_splits,
  // NOTES.md "Stop 77"): 3 / 2 stages (D = 64 B=16/4K at 2 splits 2 / 3 / 4 stages 38.6 / 36.3 /
  // 46.5 us, B=12/4K 35.5 / 31.2 / 31.0, B=8/8K at 4 38.6 / 36.4 / 46.7; D = 96 B=16/4K 52.5 /
  // 55.8 / 58.6, B=8/8K at 4 52.4 / 55.8 / 58.5, B=16/16K 192.0 / 210.8 / 229.0, cp.async 206.3).
  // The same units only (a forced count elsewhere keeps the depths below).
  if (paged && splits > 1 && blocks <= 2 * sms && small_grid_rule) return head_dim == 64 ? 3 : 2;
  // D = 64 up to 1.25 blocks per SM (unpaired there, decode_packs_head_pairs): most SMs
  // hold one block, whose 128-byte rows need the small grids' 4 stages in flight (v25).
  // Contiguous caches beyond 2 and up to 3 blocks per SM too: the SMs holding three blocks
  // set the time, and 4 stages feed them faster (v27, GQA 32/8 N=2K: B=36 63.5 -> 60.9 us,
  // B=38 66.4 -> 63.1, B=40 67.7 -> 65.2, B=44 70.9 -> 68.2, B=48 75.7 -> 71.0; B=44/4K
  // 138.3 -> 130.4, B=48/8K 291.1 -> 268.9; MHA B=10/2K 67.6 -> 64.6, B=11/4K 137.6 ->
  // 129.4, B=12/1K 39.9 -> 38.0; at 1.9 and 3.2 blocks per SM 4 stages lose: B=32 47.3 ->
  // 55.1, B=52 81.1 -> 83.5, MHA B=13 80.8 -> 83.7). Paged ones there run head pairs;
  // narrower rows on this kernel were not measured there.
  if (head_dim == 64) {
    const bool contiguous_band =
        !paged && (row_cols == 0 || row_cols == 64) && blocks > 2 * sms && blocks <= 3 * sms;
    return 4 * blocks <= 5 * sms || contiguous_band ? 4 : 2;
  }
  if (head_dim != 96) return 2;  // beyond one block per SM
  const bool narrow_rows = row_cols != 0 && row_cols != 96;
  if (narrow_rows) {
    if (2 * blocks <= 3 * sms) return 2;
    // Paged tables of 8192 keys or more stay on cp.async (v34, D = 80 GQA at 8K, 2 splits:
    // B=40 385.8 -> 354.6, B=44 408.6 -> 352.2, B=48 453.5 -> 364.3; 1 split B=48 520.4 ->
    // 451.0). TMA 3 to 3.05 units per SM (v34: paged B=50/4K GQA, 3.03, 2 splits 240.6 ->
    // 207.6 us: the cp.async kernel's 2-split grid no longer fits one wave; 1 split level).
    if (paged && max_kv_len >= 8192) return 0;
    const int64_t units = blocks / (splits > 0 ? splits : 1);
    return units > 2 * sms && 20 * units <= 61 * sms ? 3 : 0;
  }
  if (!paged) return 0;
  if (2 * blocks <= 3 * sms) return 2;
  // 96-column paged rows beyond 1.5 blocks per SM (v36, GQA 32/8): tables of 8192 keys or
  // more on cp.async, as narrower rows above (2 splits B=46/8K 437.1 -> 412.3 us, B=48
  // 460.8 -> 429.9; 1 split B=26 272.5 -> 239.6, B=52 531.9 -> 499.2); so is a 1-split grid
  // up to 2 units per SM (B=26/4K 133.7 -> 121.1, B=28/2K 70.4 -> 67.1 in v24; at 2 splits
  // there TMA 3 led, 123.7 against 128.2).
  return max_kv_len >= 8192 || (splits <= 1 && blocks <= 2 * sms) ? 0 : 3;
}

// The kernel head dims whose 16-bit TMA kernel has the balanced schedule (NOTES.md v28,
// v29, v32, v33; decode_runs_streamk), per layout: 128 and 256, and 64 and 96 on contiguous
// caches. On paged caches it measured slower than the even 2-split grid at 96 (v29: B=20/2K
// GQA 64.5 vs 58.1 us) and slower than 3 even splits at 64 (v33: GQA 28/7 B=45/2K 73.9 vs
// 66.0); paged 64 with head pairs runs the 128 kernel's.
constexpr bool decode_balanced_head_dim(int kernel_head_dim, bool paged) {
  return kernel_head_dim == 128 || kernel_head_dim == 256 || (!paged && (kernel_head_dim == 64 || kernel_head_dim == 96));
}
// Blocks per SM of the balanced schedule: two at kernel head dim 64, whose blocks hold too
// few bytes in flight for one per SM to feed an SM (v29: one per SM at 1.2 units per SM,
// B=20/2K, 40.4 vs 32.9 us unsplit); one elsewhere.
constexpr int decode_streamk_blocks_per_sm(int kernel_head_dim) { return kernel_head_dim == 64 ? 2 : 1; }
// The balanced schedule (decode_streamk_piece): a 2-split call of a 16-bit TMA kernel at a
// decode_balanced_head_dim with `units` (batch x KV heads x row tiles) between one and two
// per balanced block runs per_sm blocks per SM (decode_streamk_blocks_per_sm; 3 stages, 2
// at D = 64 and 256: decode_streamk_stages), the blocks sharing the units' tiles equally, instead
// of an even grid. Returns that block count, or 0. (At D = 128 two blocks per SM over 2-3
// units per SM measured no faster than even 2-split grids: v28.)
inline int64_t decode_streamk_blocks(int64_t units, int64_t sms, int per_sm) {
  const int64_t blocks = per_sm * sms;
  return units > blocks && units < 2 * blocks ? blocks : 0;
}
// Two-row-tile blocks' balanced schedule (decode_wide_rows_runs_balanced): one block per SM over
// one to two 32-row units per SM as above, and also over half a unit to one unit per SM, where
// an even grid leaves SMs idle (a unit then in at most three pieces: decode_streamk_piece), if
// the units' 64-key slots of the table's capacity (`capacity`: decode_max_kv_len) are at least
// as many as the blocks: fewer (a table of one slot) would leave some blocks an empty range,
// whose piece writes its unit's output as an unsplit one beside the block that reads it.
// Returns the block count, or 0.
inline int64_t decode_wide_rows_streamk_blocks(int64_t units, int64_t sms, int64_t capacity) {
  if (units * div_ceil<int64_t>(capacity, kTileTokens) < sms) return 0;
  return 2 * units >= sms && units < sms ? sms : decode_streamk_blocks(units, sms, 1);
}
// Whether a 128-byte line of the K or V cache can hold the rows of two units (batch x KV
// head, or head pair; `elem_bytes` per cache element). No line is shared where every row
// starts on one (the base and every stride multiples of 128 bytes), and few where one unit's
// rows lie back to back (the token stride is the row: paged caches of one KV head, or one head
// pair, whose pages hold whole lines from 4 keys on; contiguous [B, Hkv, N, D]): only at the
// ends of its run or pages. Shared: paged heads of 104-120 and 136-248 columns but 192 (and head
// pairs of 88, 352-byte rows) beside other KV heads, token-major strided caches whose head
// stride is not a multiple of 128 bytes.
inline bool decode_units_share_lines(const DecodeAttentionArgs& a, int elem_bytes) {
  constexpr int64_t kLine = 128;
  const int64_t row = static_cast<int64_t>(a.head_dim) * elem_bytes;
  auto shares = [&](const void* base, int64_t token, int64_t head, int64_t batch) {
    if (token == row) return false;
    return reinterpret_cast<uintptr_t>(base) % kLine != 0 || token % kLine != 0 || head % kLine != 0 ||
           batch % kLine != 0;
  };
  if (a.paged) {
    const int64_t token = a.num_kv_heads * row;
    return shares(a.k, token, row, token * a.block_size) || shares(a.v, token, row, token * a.block_size);
  }
  return shares(a.k, a.k_stride_n * elem_bytes, a.k_stride_h * elem_bytes, a.k_stride_b * elem_bytes) ||
         shares(a.v, a.v_stride_n * elem_bytes, a.v_stride_h * elem_bytes, a.v_stride_b * elem_bytes);
}
// Whether the TMA kernel's even grid runs KV heads 2k and 2k + 1 as a thread-block cluster
// (DecodeKernelParams::head_cluster; cluster (2, 1, 1), where the grid's x holds whole pairs and
// one block fills an SM): 16-bit paged rows that share lines (decode_units_share_lines) on the
// D = 256 kernel off HBM3e, at 3 splits or more, and at 1-2 from 4096 keys. Paged head_dim 224
// puts one 128-byte line across heads 2k and 2k + 1 of every token row; launched together, the
// pair's second read of it finds it in L2 more often. H100, NOTES.md "Stop 110"
// (`--h100-d224-long`, GQA 32/8 block 16, us, even splits without -> with): D = 224 B=20 3
// splits 16K 878.8 -> 838.1, 32K 1868.7 -> 1744.1, 8 splits 16K 821.9 -> 810.3, 32K 1747.3 ->
// 1641.7; B=22/32K 8 1919.8 -> 1801.0; B=17/32K 8 1498.0 -> 1443.9; D = 240 B=20/32K 8 1931.8 ->
// 1852.8; B=40/16K 8 1650.9 -> 1629.5; at 4096-8192 keys and D = 144-176 level (within 0.5%).
// "Stop 111" (`--h100-shared-lines-confirm`, `--hbm3e-shared-lines` run on the H100): 1 split
// D = 224 B=10 4K 115.1 -> 108.4, 8K 221.3 -> 210.6; B=128/16K 6484.2 -> 5733.7; B=12/16K
// 512.1 -> 506.4; D = 176 B=64/6K 782.8 -> 764.4; 2 splits B=24/4K 253.3 -> 250.3, B=40/4K
// 417.3 -> 412.6, B=64/4K 663.7 -> 655.9, B=6/8K 132.6 -> 131.8; at the counts
// decode_tail_splits now gives (2-16) 0.2-2.7% (B=96/16K 3950.7 -> 3846.2). Below 4096 keys at
// 1-2 splits level: `--h100-shared-lines-final` read B=40/2K 220.9 -> 219.0, B=10/2K 59.8 ->
// 58.8, `--h100-shared-lines-short` (with them at every length, none / with) B=10/2K 57.2 /
// 58.0, B=64/2K 316.0 / 313.5, B=40/1K 112.0 / 111.0, nine more rows within 0.6%: not taken.
// Measured from 0.12 units per SM (B=2/32K) up; at one block per SM the pairs fit the H100's
// 66 clusters of 2.
inline bool decode_head_clusters_pay(const DecodeAttentionArgs& a, int kernel_head_dim, bool hbm3e) {
  const int knob = decode_dev_head_cluster();
  if (knob == kDecodeHeadClusterOff || knob == kDecodeHeadClusterOn) return knob == kDecodeHeadClusterOn;
  return a.paged && !a.kv_fp8 && kernel_head_dim == 256 && !hbm3e && decode_units_share_lines(a, 2) &&
         (a.num_splits >= 3 || decode_max_kv_len(a) >= kLargeGridMinKeys);
}
// Whether the balanced schedule's `blocks` (decode_streamk_blocks) over `units` of `row_tiles`
// row tiles each (16- or 32-row) pay where units read the same cache lines: units of one KV
// head's row tiles (every line), or rows that share lines (decode_units_share_lines). The
// schedule lays the units end to end and cuts them into one range per block, so a block
// starts each unit (units / blocks - 1) of a unit later than its neighbour's block started the
// one before: past a tenth of a unit apart, two units read a common line further apart than
// L2 keeps it, and each fetches it from DRAM. ncu (NOTES.md "Stop 87", H200, one launch,
// paged GQA 32/8 block 16, 1.2-1.33 units per SM): D = 112 (224-byte rows) B=22/8K 1.18 GB read
// for 646 MB of keys (888 MB without L2 promotion), 681 MB under even 2 splits, whose units'
// splits stream the same keys at the same time, 649 MB at 1 split (D = 128 balanced: 675 MB for
// 671); Nq 5 (two row tiles) B=10/8K 675 MB for 336 MB, even 2 splits 340 MB. The launchers
// run the other calls' 2 splits as an even grid. Within a tenth of a unit the lines are still
// in L2 (D = 224 B=17, 1.03 units per SM, balanced / even 2 splits: 2K 75.0 / 96.5 us, 16K
// 637.8 / 663.2).
constexpr int64_t kStreamKSharedReadsTop10ths = 11;  // units per block, in tenths
inline bool decode_streamk_pays_shared_reads(const DecodeAttentionArgs& a, int elem_bytes, int row_tiles,
                                             int64_t units, int64_t blocks) {
  if (row_tiles == 1 && !decode_units_share_lines(a, elem_bytes)) return true;
  return 10 * units <= kStreamKSharedReadsTop10ths * blocks;
}
// Where the split heuristic takes 2 splits for 16-bit caches on sm_90 instead of 1 (on HBM3e
// parts, at head_dim 96, 128, 192 and 256, other bands and counts: below)
// (kernel_head_dim: decode_kernel_head_dim; v28, v29, v32), for sequences of at least 2048 keys:
// - a tail of SMs holding a second unit: 1.1-1.35 units per SM at D = 128, 1-1.35 at
//   D = 256 (one block per SM fits there, so the tail runs after the first wave, not
//   beside it, from the first extra unit on), 1.06-1.35 at D = 96 (and 80) on contiguous
//   caches. The balanced schedule gives every SM the same share instead (D = 256 GQA
//   B=18/2K contiguous 117.5 -> 106.9 us, paged block 16 144.1 -> 109.6; D = 128 B=20
//   67.7 -> 62.4; contiguous D = 96 B=18/4K 92.7 -> 80.0, B=20/2K 51.2 -> 48.9, D = 80
//   B=18/4K 83.0 -> 70.9; at 1.03, B=17/2K, 41.3 -> 42.2);
// - a second wave of whole units on some SMs: 2.1-2.5 units per SM at D = 128, 2-2.7 at
//   D = 96 (and 80 on its kernel): even 2 splits make half-unit blocks that the SMs pick
//   up as they free (D = 96 B=36/2K contiguous 95.0 -> 89.0, D = 80 B=36/4K 175.8 -> 158.2);
//   2-3.05 for paged caches on the D = 96 kernel from 4096 keys (v34, D = 80 block 16: GQA
//   B=46/4K 213.0 -> 187.6, B=48 216.5 -> 199.1, B=48/8K 500.9 -> 431.2, MHA B=12/4K 219.7
//   -> 196.6; at 2048 keys 1 split stays ahead, B=48 101.1 vs 105.0; v36, D = 96: B=46/4K
//   227.1 -> 211.4, B=48/4K 230.4 -> 220.6, B=50/4K 238.9 -> 229.9, B=48/8K 491.1 -> 429.9).
// - contiguous caches on the D = 96 kernel (head_dim 72-96) from 4096 keys: the whole of
//   1.06-2.95 units per SM (v35, GQA 32/8 graph replays, 1 -> 2 splits: D = 96 B=24/4K
//   112.4 -> 105.8 us, B=26 120.1 -> 115.8, B=46 207.2 -> 198.9, B=24/8K 220.3 -> 201.6,
//   B=28/8K 247.0 -> 235.8, B=46/8K 411.9 -> 386.3, B=24/16K 438.9 -> 396.6; D = 80
//   B=24/4K 108.9 -> 93.4, B=30/4K 133.1 -> 113.7, B=26/8K 226.8 -> 193.1; at exactly 2
//   units per SM, B=33, whole waves, 2 splits lose: D = 96 4K 139.1 -> 142.9, D = 80 8K
//   273.1 -> 277.5; at 3.03 D = 96 B=50/4K lost once, 214.1 -> 216.7, and won in a rerun).
// Elsewhere 1 split measured faster or level (on the H100: D = 128 at 1.03, 1.45-1.7 and 2.7
// units per SM; 1024 keys; D = 64 at both bands; D = 256 at 1.45 and 2.2; D = 96 at 1.2, paged;
// contiguous D = 96 at 1.45 and 2048 keys gains 1%, 58.1 -> 57.3, not taken).
// The spread tail (NOTES.md "Stop 63"; the TMA kernel's kDecodeSpreadTail schedule, run
// where a call's num_splits equals this count): on Hopper HBM3e parts, one new token (or
// Nq > 1 up to four row tiles: decode_rule_spec_rows) of 16-bit head_dim 128 whose grid
// holds a little more than one unit (batch x KV heads x row tiles) per SM, from
// kSpreadTailMinKeys keys: to 1.34 units per SM on paged caches, 1.1 on contiguous ones. An unsplit grid there runs the SMs' second units after the first
// wave (or beside it, two blocks per SM sharing an SM's bandwidth), an even split grid
// splits every unit; the spread tail runs the first SM-count units whole, one block each,
// and every other unit in P even pieces whose blocks sit beside them (3 stages: two blocks
// fit per SM), merged like splits. P = SMs / (units - SMs), at most 8 (and the by-length
// cap): every SM holds a whole unit and at most one piece. GQA 32/8 block 16, graph
// replays, cold L2, automatic count -> spread (pieces): paged B=17 1K / 2K / 4K 23.1 /
// 43.9 / 85.1 -> 22.0 / 37.8 / 69.6 (8; cuDNN 21.4 / 37.6 / 69.0), B=18 23.5 / 41.5 / 78.3
// -> 23.4 / 39.9 / 74.2 (8), B=20 25.8 / 46.4 / 85.3 -> 25.2 / 44.2 / 82.0 (4); contiguous
// B=17 22.0 / 40.5 / 77.0 -> 21.8 / 37.1 / 68.0 (8), B=18 23.4 / 40.5 / 74.7 -> 22.8 / 39.4
// / 71.8 (8). Paged B=21 and 22 (1.27 and 1.33) at 3 pieces, each SM then holding at most
// one (stop 64): 1K / 2K / 4K 26.8 / 49.0 / 90.5 -> 25.8 / 47.0 / 89.4 and 27.9 / 50.4 /
// 94.4 -> 27.2 / 49.5 / 93.7; more pieces than free slots lose (B=22 at 4-16: 50.8-56.3
// at 2K). Contiguous ones there, and B=23-24 at 2-3 pieces, level or lost (contiguous B=21/1K
// 25.5 -> 29.3 at 3). Returns P, or 0.
// The HBM3e D = 128 rules (the spread tail, the partial wave, the one-tail band's 3 splits and
// the wave top) were measured on one new token (at any group); at stop 67 (`--bands-next`,
// `--nq-rules`) on 2 and 4 speculative tokens at GQA 32/8 (8 and 16 query rows per unit: one
// row tile), which read like one token in every band but the wave top's 4096-key end
// (decode_tail_splits); at stop 68 (`--nq-tiles`) on Nq 8 (32 rows: two row tiles, whose
// blocks read the same keys) and, in the partial wave, Nq 16 (64 rows: four), which take
// their own tops and counts (decode_rule_multi_tile), as one new token does whose group spans
// two tiles (`--mqa-tiles`, Hq 32 / Hkv 1). What those rules read of the query rows per unit:
// 0 for one new token within one row tile (or beyond four: one token keeps one tile's rules
// at any group, not measured there), the rows up to four row tiles, -1 (the rules off: not
// measured) for Nq > 1 beyond.
constexpr int kRuleMaxSpecRows = 4 * kRowsPerBlock;
inline int decode_rule_spec_rows(int seq_len_q, int rows_per_kv_head) {
  if (rows_per_kv_head > kRowsPerBlock && rows_per_kv_head <= kRuleMaxSpecRows) return rows_per_kv_head;
  if (seq_len_q == 1) return 0;
  return rows_per_kv_head <= kRowsPerBlock ? rows_per_kv_head : -1;
}
// Whether a unit's query rows span more than one row tile: one block per SM then
// streams its keys slower than one tile's unit does (its tiles' blocks share them through L2
// but each SM's stream stays bound by its bytes in flight), so splits pay further than one
// token's (stop 68, NOTES.md).
constexpr bool decode_rule_multi_tile(int spec_rows) { return spec_rows > kRowsPerBlock; }
// Two 16-row tiles per block (the TMA kernel's even grid, decode_runs_wide_rows: 16-bit, on
// the head_dim 64, 96 and 128 kernels, sm_90): a KV head's rows in 32-row units, each one block
// of 8 math warps over the same K/V stages, where 16-row blocks stream the same keys once per
// tile (NOTES.md "Stop 69"). Such a block takes 288 threads at ~160 registers: one per SM,
// so its grid must fill its waves (at D = 64 its launch bounds hold it to 96 registers at 2-3
// stages, two per SM: the D = 64 rule below runs twice the D = 96 counts, as measured; stop
// 89). On Hopper HBM3e parts (and since stop 99 on other sm_90 parts, after the measurements
// below) at head_dim exactly 128 with 17-32 query rows per KV head (one 32-row unit), splits of
// at least kWideRowsSplitKeys keys, `units` (batch x KV heads) run:
//  - up to one unit per SM, SMs / units splits (rounded down) where that fills 90% of the SMs
//    (70% off HBM3e: decode_wide_rows_fill_splits); off HBM3e above half a unit per SM from
//    2048 keys instead 2 splits as the balanced schedule in its low band
//    (decode_wide_rows_balanced_band, stop 104), else 1;
//  - 1-1.35 units per SM (off HBM3e on paged caches 1.55) from 2048 keys, 2 splits run as the balanced schedule
//    (decode_wide_rows_balanced_band);
//  - up to two, 1 split where the two waves are 75% full, else (1.35-1.5 units per SM, their
//    three waves at least 90% full) 2 even splits;
// at head_dim 64 and 96 decode_wide_rows_d64_d96_splits' count (below).
// H200, graph replays, cold L2, us, the 16-row blocks at their automatic count -> this (splits); Nq
// 8 at GQA 32/8 (`--wide-rows`): paged B=1/16K 32.5 -> 31.3 (16; contiguous 32.1 -> 30.9), B=2/16K
// 48.9 -> 46.6 (8), B=4/16K 84.1 -> 79.1 (4), B=8/16K 153.4 -> 146.8 (2; contiguous 149.2 ->
// 132.5), B=16/4K 76.5 -> 74.7 (1; contiguous 74.0 -> 65.8), B=21/16K (1.27 units per SM: balanced
// since stop 73) 450.5 -> 380.8 (2; contiguous 439.9 -> 368.8; 1 split 465.0), B=33/4K (2.0) 161.0
// -> 138.2 (1; contiguous 158.7 -> 133.3); `--wide-rows-confirm`: B=25/8K (1.52) 270.5 -> 240.4
// (1), B=21/4K 130.7 -> 120.1 (2; balanced since stop 73), B=30/4K (1.82) 149.7 -> 128.1 (1),
// B=16/1K 24.3 -> 23.3 (1); one token at Hq 32 / Hkv 1: paged B=8/16K 33.2 -> 31.3 (16), B=64/4K
// 48.5 -> 45.7 (2), B=66/8K 90.2 -> 79.4 (2); `--wide-three` (stop 72, 3 splits at 1.06-1.25 units
// per SM): one token at Hq 32 / Hkv 1 paged B=140/4K 121.9 -> 112.0 (cuDNN 111.1), B=150/4K 122.5
// -> 114.0, B=165/4K 127.0 -> 117.0, B=150/8K 219.8 -> 193.6, contiguous B=150/4K 115.7 -> 109.2;
// Nq 8 paged B=19/4K 121.3 -> 113.8, B=20/8K 221.3 -> 195.0, B=19/16K 408.6 -> 358.2, contiguous
// B=20/4K 118.9 -> 110.7 (the balanced band took these over in stop 73). Lost, so left to the
// 16-row rules (spread tail, partial wave): a wave 61-76% full (Nq 8 B=10/4K 57.8 against 72.8,
// B=6/16K 135.8 against 144.3 at 2, B=12/4K 69.0 against 72.4 at 1, MQA B=80/4K 58.7 against 72.3,
// B=100/4K 69.0 against 72.5; contiguous MQA B=48/16K gained at 73%, 129.4 -> 118.3), 128-key
// splits (Nq 8 B=1/2K 15.4 against 16.9 at 16), and Nq 16 (64 rows, two units per KV head: B=4/16K
// 130.3 against 145.5, B=8/4K 65.5 against 73.1). Returns the count, or 0.
constexpr int64_t kWideRowsSplitKeys = 1024;
// Where decode_wide_rows_splits's 2 splits run as the balanced schedule (one block per SM, each
// an equal share of every unit's keys: decode_streamk_blocks at one block per SM) rather than an
// even grid: more than one 32-row unit per SM up to 1.35, tables of 2048 keys or more. H200,
// graph replays, cold L2, us, the automatic count before (3 splits from 3072 keys at 1-1.26,
// even 2 beyond, the 16-row rules below 3072) -> balanced (`--wide-balanced`,
// `--wide-balanced-band`, stop 73), one token at Hq 32 / Hkv 1: paged B=136/2K 73.1 -> 57.1
// (cuDNN 56.9), B=140/2K 74.1 -> 58.5, B=140/4K 111.0 -> 97.7, B=150/4K 112.7 -> 103.1, B=160/4K
// 115.9 -> 108.8, B=170/4K (1.29) 118.3 -> 114.3, B=140/8K 192.5 -> 169.6, B=140/16K 351.8 ->
// 330.8, B=170/2K 73.6 -> 72.5, B=170/8K 208.4 -> 207.7, contiguous B=136/2K 69.4 -> 52.7,
// B=170/4K 114.6 -> 110.4; Nq 8 at GQA 32/8 paged B=17/4K 109.6 -> 90.3, B=17/16K 350.5 ->
// 317.3, B=20/4K 115.6 -> 109.7, B=22/4K (1.33) 118.1 -> 111.5, contiguous B=22/4K 113.7 ->
// 106.5. Lost: 1024 keys (B=136 39.5 against 41.5, B=170 42.4 against 53.1), and from 1.4 units
// per SM (even 2 / 1 split ahead: B=185/4K 121.3 against 123.4, B=195/4K 126.7 against 128.6,
// B=200/2K 70.1 against 79.9, Nq 8 B=24/8K 219.5 against 232.1, B=200/16K 487.0 against 518.2;
// mixed at 1.5-1.7 on 8192 keys: B=200/8K 246.8 -> 231.7, B=230/8K 261.8 against 273.5).
// The H100 takes it too since stop 100 (its figures at decode_wide_rows_runs_balanced), on paged
// caches since stop 101 to 1.55 units per SM (NOTES.md "Stop 101", `--h100-mqa-band`, graph
// replays, cold L2, us, the automatic count (even 2 to 1.5, 1 beyond) -> balanced; cuDNN): one
// token at Hq 32 / Hkv 1 B=180 (1.36) 2K 93.9 -> 84.0 (76.7), 4K 155.2 -> 146.7 (145.2), 8K 281.8
// -> 273.0 (284.5); B=190 2K 96.9 -> 86.2, 4K 161.7 -> 153.4, 8K 294.2 -> 286.0; B=200 (1.52) 2K
// 89.2 / 89.1, 4K 166.8 -> 161.2 (147.9), 8K 321.3 -> 300.3 (290.2); Nq 8 at GQA 32/8 B=23 (1.39)
// 4K 157.7 -> 152.0, 8K 283.2 -> 280.2; B=25 (1.52) 4K 168.2 -> 161.8, 8K 324.7 -> 301.3. Lost
// from 1.59 (B=210 2K 90.0 against 93.3, B=220 4K 169.6 against 173.6, Nq 8 B=27 4K 169.7
// against 173.1) and on contiguous caches from 1.5 (B=200 150.1 against 156.7; B=180 149.5 ->
// 142.9 gained, one point).
// Off HBM3e below one unit per SM since stop 104, above half a unit per SM: to 0.62 units per SM
// on paged tables of kLargeGridMinKeys keys or more, to 0.67 from twice that, to 0.69 from four
// times that on either layout (decode_wide_rows_streamk_blocks: a unit in up to three pieces),
// where an even grid's one wave leaves 30-50% of the SMs idle, and so does 1 split of two-row-tile
// blocks. H100, graph replays, cold L2, us, the automatic count before (16-row blocks below 70%,
// 1 split from there) -> balanced (1 split; cuDNN), `--h100-low-band-rule`, `--h100-low-band-confirm`
// (NOTES.md "Stop 104"): one token at Hq 32 / Hkv 1 paged B=70 (0.53) 4K 75.9 -> 64.9 (72.4;
// 58.4), 8K 143.3 -> 112.9 (138.0; 110.2), 16K 286.7 -> 207.0 (275.4; 214.0); B=80 (0.61) 4K 78.3
// -> 72.6 (72.4), 8K 139.3 -> 126.5 (138.9; 116.0), 16K 263.2 -> 234.2 (272.0; 226.6); B=84 (0.64)
// 8K 139.2 -> 131.5, 16K 272.4 -> 246.0; B=90 (0.68) 16K 276.3 -> 262.4 (248.2); contiguous B=76
// 16K 253.3 -> 223.4 (228.3), B=80 16K 243.3 -> 230.2, B=90 16K 264.5 -> 256.4; Nq 8 at GQA 32/8
// paged B=9 (0.55) 4K 77.4 -> 67.1, 8K 146.7 -> 116.6, 16K 286.8 -> 216.2; B=11 (0.67) 8K 141.8
// -> 135.6, 16K 277.5 -> 252.8; contiguous B=10 16K 245.4 -> 229.8; Nq 5 paged B=10 4K 75.3 ->
// 71.2, 16K 256.5 -> 239.8. Lost to 1 split (which takes them, decode_wide_rows_splits): 2048 and
// 3072 keys (B=76 39.0 against 42.0, 3K 56.2 / 56.8), paged 4096 keys past 0.62 (B=84 72.7
// against 74.6, B=90 73.7 against 78.1, Nq 8 B=11 74.6 against 78.6), 8192 keys past 0.67 (B=90
// 140.6 / 139.3, B=91 142.0 against 144.9), contiguous 4096 keys (Nq 8 B=10 67.5 against 69.3,
// B=76 62.3 against 68.1), and from 0.76 units per SM (B=100/16K 295.7 against 297.8; stop 103,
// 8K: B=100 151.2 against 157.4). Contiguous 8192 keys, left to 1 split: B=90 level (137.5 /
// 137.3), B=80 126.2 against 123.4 balanced.
constexpr int64_t kWideRowsBalancedTopPct = 135, kWideRowsBalancedTopPctPagedOther = 155;
// the low band's top (% of the SMs) by table length, paged from 4096 keys and from 8192, either
// layout from 16384
constexpr int64_t kWideRowsLowBandTopPct = 62, kWideRowsLowBandTopPct8K = 67, kWideRowsLowBandTopPct16K = 69;
inline bool decode_wide_rows_balanced_band(int64_t units, int64_t sms, int64_t max_kv_len, bool hbm3e, bool paged) {
  if (units <= sms) {
    const int64_t top = hbm3e                                                   ? 0
                        : max_kv_len >= 4 * kLargeGridMinKeys                   ? kWideRowsLowBandTopPct16K
                        : !paged                                                ? 0
                        : max_kv_len >= 2 * kLargeGridMinKeys                   ? kWideRowsLowBandTopPct8K
                        : max_kv_len >= kLargeGridMinKeys                       ? kWideRowsLowBandTopPct
                                                                                : 0;
    return 2 * units > sms && 100 * units <= top * sms;
  }
  const int64_t top = !hbm3e && paged ? kWideRowsBalancedTopPctPagedOther : kWideRowsBalancedTopPct;
  return 100 * units <= top * sms && max_kv_len >= 2 * kWideRowsSplitKeys;
}
// 16-row tiles of a KV head's rows (at least one): the units of decode_attention_num_splits.
constexpr int decode_row_tiles(int rows_per_kv_head) {
  return rows_per_kv_head > kRowsPerBlock ? (rows_per_kv_head + kRowsPerBlock - 1) / kRowsPerBlock : 1;
}
// 32-row units of a KV head's rows: the grid's x extent per KV head at two row tiles per block.
constexpr int decode_wide_row_tiles(int rows_per_kv_head) {
  return (rows_per_kv_head + 2 * kRowsPerBlock - 1) / (2 * kRowsPerBlock);
}
// A KV head's rows span exactly two 16-row tiles (17-32 rows): one two-row-tile unit.
constexpr bool decode_two_tile_rows(int rows_per_kv_head) {
  return rows_per_kv_head > kRowsPerBlock && rows_per_kv_head <= 2 * kRowsPerBlock;
}
// Up to one unit per SM, the fewest splits whose grid fills 90% of the SMs on HBM3e parts, 70%
// on other sm_90 parts (decode_wide_rows_splits, stop 100): the rule's count switches on at this
// many kWideRowsSplitKeys keys (decode_attention_workspace_floats_upto reads that length too).
constexpr int64_t kWideRowsFillPctHbm3e = 90, kWideRowsFillPctOther = 70;
constexpr int64_t decode_wide_rows_fill_splits(int64_t units, int64_t sms, bool hbm3e) {
  const int64_t pct = hbm3e ? kWideRowsFillPctHbm3e : kWideRowsFillPctOther;
  return (pct * sms + 100 * units - 1) / (100 * units);
}
// Head dims 64 and 96 (NOTES.md "Stop 88", "Stop 89"): their 16-row blocks of one KV head's two
// tiles read its keys once per tile, and their split rules were measured with one new token. Two
// row tiles per block below 0.45 units per SM as the paragraph after the measurements says;
// `units` (batch x KV heads) from 0.45 per SM, at the count of 1-4 (splits of
// kWideRowsSplitKeys keys or more, from 2048 keys) whose waves are fullest (the
// smaller count where two are level): up to one unit per SM, and at head_dim 96 to 1.5; on
// head_dim 64 twice that count, at most 4 (contiguous caches measured ahead in stop 88; paged
// ones since their blocks run two per SM, stop 89, below). H200, graph replays, cold L2, GQA 32/8 Nq 5 (20 rows), us, the
// automatic count of 16-row blocks -> this (splits; `--wide-d64-d96`): paged D = 96 B=8 (0.48)
// 4K 66.3 -> 39.9 (2), 16K 228.1 -> 137.0; B=12 (0.73) 4K 71.1 -> 63.3 (4), 16K 264.8 -> 199.1,
// 2K 38.9 -> 36.4 (1: 2048 keys cap it at 2); B=16 (0.97) 4K 103.2 -> 69.6 (1), 16K 396.3 ->
// 264.6; B=20 (1.21) 4K 113.6 -> 105.3 (4), 16K 526.5 -> 333.9, 2K 65.8 -> 63.9 (2); B=24
// (1.45) 4K 118.5 -> 111.5 (2), 16K 606.0 -> 394.5; contiguous D = 96 B=8 16K 188.0 -> 116.3,
// B=12 16K 286.2 -> 182.0, B=16 4K 85.3 -> 60.9, 16K 322.5 -> 238.0, B=20 16K 445.6 -> 311.5,
// B=24 16K 485.3 -> 384.9; paged D = 64 B=8 4K 52.3 -> 30.4, 16K 161.4 -> 97.0, B=12 16K 216.2
// -> 149.4, B=16 4K 59.2 -> 49.0, 16K 222.0 -> 183.2; contiguous D = 64 B=8 4K 37.9 -> 24.7 (4),
// 16K 140.0 -> 73.1, B=12 16K 189.1 -> 116.8 (4), B=16 4K 55.1 -> 41.7 (2), 16K 194.9 -> 139.7.
// Below 0.45 units per SM (NOTES.md "Stop 89", `--wide-small`): one wave of splits,
// SMs // units (head_dim 64: twice that; paged: see stop 90 below), of kWideRowsSmallGridSplitKeys keys or more;
// the automatic 16-row call -> this, us: contiguous D = 64 B=1/16K 22.7 -> 17.8 (32), B=1/4K
// 9.8 -> 9.4 (16: 256 keys; 32 splits 11.1), B=2/16K 39.9 -> 24.8 (16), B=4/16K 74.5 -> 41.0
// (8), B=6/16K 140.8 -> 72.0 (4); paged D = 64 B=1/16K 25.4 -> 17.6 (16; 32 splits 23.4 before the launch bounds below), B=2/4K
// 15.4 -> 11.7 (8), B=6/16K 161.3 -> 96.7 (2); contiguous D = 96 B=1/4K 13.4 -> 11.6 (16),
// B=4/16K 99.6 -> 62.7 (4); paged D = 96 B=2/16K 62.3 -> 39.5 (8), B=6/4K 60.3 -> 39.3 (2).
// Head_dim 64 past one unit per SM to 1.35, from 4096 keys: 3 splits (contiguous: `--wide-mid`,
// GQA 32/8 Nq 5, the 16-row call's even 2 / 16-row 1 split -> wide 3): B=17 (1.03) 4K 65.0 /
// 57.3 -> 53.6, 16K 225.2 / 213.5 -> 182.6; B=20 (1.21) 4K 66.2 / 57.9 -> 56.2, 8K 118.1 /
// 110.8 -> 99.2; B=22 (1.33) 16K 249.0 / 239.0 -> 188.4; at 2048 keys the 16-row 1 split leads
// (B=20 31.7 against wide 3 34.9; decode_d64_tail_splits).
// Paged head_dim 64 alike since its two-tile blocks run two per SM (their launch bounds, stop 89:
// the paged instance had taken 112 registers, one block per SM, and trailed contiguous ones 10-40%
// wherever a second wave of splits ran beside the first). `--wide-paged-d64`, H200, GQA 32/8 Nq
// 5, us, the paged count before (one wave; 1-4 from 0.45; 16-row blocks past one unit per SM) ->
// the contiguous one, 3 stages: B=2/16K 29.9 -> 26.5 (16), B=4/16K 53.2 -> 43.9 (8), B=6/8K 53.0
// -> 42.8 (4), B=8/16K 141.1 -> 79.2 (4), B=16/16K 191.2 -> 148.9 (2), B=12/2K 27.4 -> 25.5 (2),
// B=22/8K 147.7 -> 109.7 (3), B=20/16K 214.5 -> 199.9, B=20/4K 64.1 -> 61.3, B=18/4K level 59.8;
// at 2048 keys past one unit per SM level (B=20 39.0 / 38.6 at wide 3): the 16-row rules keep it.
// Paged head_dim 64 below 0.45 units per SM takes the second wave only where one wave's splits
// would hold more than kWideRowsSplitKeys keys (NOTES.md "Stop 90", `--wide-short-confirm`, GQA
// 32/8 Nq 5, us, two waves -> one): B=1/8K 14.2 -> 11.8 (16), B=1/16K 18.9 -> 17.5 (16), B=2/3K
// 11.7 -> 10.3 (8), B=3/4K 15.9 -> 15.2 (5), B=4/2K 12.9 -> 11.9 (4), MQA B=24/4K 16.5 -> 15.8
// (5), Nq 8 B=2/4K 13.8 -> 12.0 (8); level at 1024 keys (B=2/8K 17.6 / 17.4, B=4/4K 17.6 / 17.6);
// beyond, two waves lead (B=2/16K 26.6 against 28.8, B=3/8K 22.9 / 24.6, B=5/4K 20.6 / 21.9,
// B=6/4K 25.5 / 28.7). Contiguous caches keep both waves (MQA B=24/4K 15.4 against 15.8).
// From 1024 to 2047 keys (NOTES.md "Stop 94", `--wide-1k`; the 16-row blocks read each KV head's
// keys twice there, and paged D = 96 ran its cp.async kernel): up to one unit per SM SMs // units
// splits where that is 4 or fewer (256 keys or more each at every length of the band; head_dim 64
// not doubled), one split from there to 1.5 units per SM at head_dim 96, else 0. H200, graph
// replays, cold L2, GQA 32/8 Nq 5 at 1024 keys, us, the 16-row call -> this (splits): paged
// D = 96 B=4 13.5 -> 11.0 (4), B=8 18.2 -> 15.0 (2, tail spans), B=12 22.8 -> 18.6 (1), B=16
// 30.0 -> 19.2 (1; 1536 keys 42.3 -> 26.1), B=20 39.1 -> 36.2 (1), B=24 40.3 -> 36.7; contiguous
// D = 96 B=4 12.8 -> 11.4, B=8 16.1 -> 14.9, B=12 23.6 -> 18.6, B=16 23.2 -> 19.3, B=20 41.6 -> 35.8,
// B=24 42.5 -> 36.1; paged D = 64 B=4 10.7 -> 9.4, B=8 13.4 -> 12.4, B=12 18.9 -> 15.4, B=16 18.4
// -> 15.6; contiguous D = 64 B=4 10.3 -> 9.5, B=12 17.1 -> 15.3, B=16 16.9 -> 15.7; Nq 8 paged
// D = 96 B=16 30.4 -> 19.9. Left to the 16-row rules: B=2 (8 splits would fill the wave: D = 64
// 7.8 against 8.3 at 4) and head_dim 64 past one unit per SM (paged B=20 22.8 / 22.6, contiguous
// 18.6 against 20.9). Contiguous head_dim 64 where one wave holds 2 splits (45-66 units at 132
// SMs) takes twice that, 4: two blocks per SM (NOTES.md "Stop 98", `--wide-1k-d64-contig`, us,
// 2 splits / 16-row blocks -> 4, Nq 5: B=6/1536 14.8 / 16.6 -> 13.7, B=7/1900 17.0 / 19.9 ->
// 15.7, B=8/2047 22.5 / 21.1 -> 16.8, B=6/1K 11.9 / 12.2 -> 11.5; Nq 8 B=7/2047 22.9 / 21.1 ->
// 16.9; MQA B=64/2047 23.1 / 21.2 -> 17.8); lost at 1024 keys from 56 32-row units, where the
// 16-row blocks' one split leads (Nq 8 B=8 12.6 against 13.4, MQA B=64 12.6 against 13.5;
// level from 1152 keys).
// Other sm_90 parts (the H100) since stop 101 (NOTES.md "Stop 101"; 16-row blocks before), the
// same counts but at head_dim 64 one wave where HBM3e parts run two below 0.45 units per SM, and
// from 0.45 the fullest waves of two blocks per SM, not doubled (B=12: 2 splits where HBM3e parts
// take 4), and past one unit per SM up to 1.5 1 split where HBM3e parts keep 16-row blocks (at
// 2048 keys, and from 1.35 units per SM). H100, `--wide-d64-d96`, `--wide-small`, `--wide-1k`,
// graph replays, cold L2, GQA 32/8 Nq 5, us, the 16-row call -> two row tiles at this count
// (splits): paged D = 96 B=8/16K 220.5
// -> 138.3 (2), B=16/4K 103.2 -> 71.6 (1), B=20/16K 606.5 -> 361.7 (4), B=24/16K 592.9 -> 419.0
// (2), B=6/16K 219.1 -> 131.5 (2), B=1/16K 34.2 -> 24.8 (16), B=16/1K 30.0 -> 22.3 (1);
// contiguous D = 96 B=12/16K 290.4 -> 208.4 (4), B=16/16K 320.2 -> 262.9 (1); paged D = 64 B=8/16K
// 157.2 -> 98.7 (4), B=12/4K 58.4 -> 44.7 (2; 4: 52.4), B=12/16K 216.9 -> 151.4 (2; 4: 169.0),
// B=6/16K 155.8 -> 78.9 (4), B=2/16K 43.4 -> 29.7 (8; two waves, 16: 32.1), B=20/16K 252.1 ->
// 238.2 (3), B=20/2K 43.6 -> 39.6 (1), B=24/4K 83.4 -> 78.9 (1), B=24/16K 319.7 -> 295.6 (1);
// contiguous D = 64 B=12/16K 194.2 -> 141.9 (2; 4: 158.7), B=1/16K 22.6 -> 18.5 (16; 32: 20.5),
// B=20/16K 286.1 -> 228.3 (3), B=20/2K 46.5 -> 36.2 (1), B=24/4K 83.1 -> 73.0 (1), B=24/16K 318.6
// -> 274.6 (1); `--wide-d64-d96-h100` (the rule against the 16-row rules at 156 rows, NOTES.md
// "Stop 101"): 1.0-2.2x, but at 2048 keys contiguous D = 64 B=8 22.5 against 20.9 and B=1 8.4
// against 7.7, and at 1024 keys as on HBM3e parts (contiguous D = 64 B=8 12.4 against 13.7 at 4,
// D = 96 B=8 15.8 against 16.2 at 2). Contiguous head_dim 64 there where one wave of one block per
// SM holds 2 splits (45-66 units at 132 SMs) takes 4 from 2048 keys too, as from 1024 (stop 98):
// one wave at two blocks per SM, where the counts above left 2 below 0.45 units per SM, and at
// 2048-4095 keys the fill loop's 1024-key cap 2-3 (NOTES.md "Stop 103", `--wide-d64-2k-h100`, H100,
// graph replays, cold L2, us, the automatic count (2) -> 4): Nq 5 at GQA 32/8 B=6 2K 17.3 -> 16.7,
// 4K 28.1 -> 25.1, B=8 2K 22.1 -> 19.3; Nq 8 B=7 2K 22.3 -> 19.0, 4K 37.0 -> 29.3; one token at
// Hq 32 / Hkv 1 B=48 4K 28.5 -> 26.2, B=56 4K 37.0 -> 29.2, B=64 2K 22.8 -> 19.9; level at Nq 5
// B=7 (2K 17.8 / 18.3, 4K 29.3 / 28.4). Returns the count, or 0.
constexpr int64_t kWideRowsNarrowDimMinUnitsPct = 45;
constexpr int64_t kWideRowsSmallGridSplitKeys = 256;
constexpr int64_t kWideRowsShortMaxSplits = kWideRowsSplitKeys / kWideRowsSmallGridSplitKeys;
inline int decode_wide_rows_d64_d96_splits(int head_dim, int64_t units, int64_t sms, int64_t max_kv_len,
                                           bool paged, bool hbm3e) {
  const bool d64 = head_dim == 64;
  if (max_kv_len < kWideRowsSplitKeys) return 0;
  // contiguous head_dim 64 where one wave holds 2 splits: 4 (above; stop 98 to 2047 keys, off
  // HBM3e from 2048 too since stop 104)
  if (d64 && !paged && sms / units == 2 && (!hbm3e || max_kv_len < 2 * kWideRowsSplitKeys)) return 4;
  if (max_kv_len < 2 * kWideRowsSplitKeys) {
    if (units > sms) return !d64 && 2 * units <= 3 * sms ? 1 : 0;
    const int64_t one_wave = sms / units;
    return one_wave <= kWideRowsShortMaxSplits ? static_cast<int>(one_wave) : 0;
  }
  if (100 * units < kWideRowsNarrowDimMinUnitsPct * sms) {
    const int64_t cap = std::min<int64_t>(kMaxSplits, max_kv_len / kWideRowsSmallGridSplitKeys);
    const int64_t one_wave = sms / units;
    const bool two_waves = d64 && hbm3e && (!paged || max_kv_len > kWideRowsSplitKeys * one_wave);
    return static_cast<int>(std::min<int64_t>(cap, (two_waves ? 2 : 1) * one_wave));
  }
  if (d64 && units > sms) {
    if (100 * units <= 135 * sms && max_kv_len >= kLargeGridMinKeys) return 3;
    return !hbm3e && 2 * units <= 3 * sms ? 1 : 0;  // off HBM3e to 1.5 units per SM: 1 (stop 101)
  }
  if (units > sms && 2 * units > 3 * sms) return 0;
  const int64_t cap = std::min<int64_t>(kMaxSplits, max_kv_len / kWideRowsSplitKeys);
  // the waves' fill at k splits: (k x units) / (its whole waves x slots), compared across k
  // exactly; a wave is one block per SM, at head_dim 64 off HBM3e two (below)
  const int64_t wave = d64 && !hbm3e ? 2 * sms : sms;
  int64_t splits = 1, blocks = units, slots = div_ceil(units, wave) * wave;
  for (int64_t k = 2; k <= std::min<int64_t>(4, cap); ++k) {
    const int64_t k_blocks = k * units, k_slots = div_ceil(k_blocks, wave) * wave;
    if (k_blocks * slots > blocks * k_slots) splits = k, blocks = k_blocks, slots = k_slots;
  }
  return static_cast<int>(d64 && hbm3e ? std::min<int64_t>({2 * splits, 4, cap}) : splits);
}
// Other sm_90 parts (the H100) since stop 99 at head_dim 128 only, the same counts (the band's 2
// splits as the balanced schedule since stop 100, an even grid before:
// decode_wide_rows_runs_balanced) and 3 stages everywhere (decode_wide_rows_stages): H100,
// `--wide-rows` (two row tiles per block forced on at the rule's counts), graph replays, cold L2,
// us, the 16-row blocks' automatic count -> this (splits): Nq 8 at GQA 32/8 paged B=1/16K 36.2 ->
// 32.0 (16), B=2/16K 66.1 -> 54.0 (8), B=4/16K 146.3 -> 98.2 (4), B=8/16K 245.7 -> 187.8 (2;
// contiguous 243.0 -> 186.6), B=16/4K 100.2 -> 95.4 (1), B=21/16K (1.27) 666.2 -> 519.2 (even 2;
// contiguous 589.5 -> 481.9; balanced, stop 100: 490.6 / 472.8), B=33/4K (2.0) 210.7 -> 194.0 (1);
// one token at Hq 32 / Hkv 1 paged B=8/16K 36.9 -> 32.6 (16), B=64/4K 64.9 -> 56.4 (2). Below the
// 90% fill the H100 takes them from 70% (stop 100, `--wide-rows-h100-fill`, the 16-row blocks'
// automatic count -> two row tiles): Nq 8 paged B=6/16K (73%) 242.8 -> 147.7 (2), B=12/4K (73%)
// 82.6 -> 75.6 (1); one token at Hq 32 / Hkv 1 B=48/16K (73%) paged 243.7 -> 150.8, contiguous
// 237.5 -> 144.8 (2; cuDNN 158.9), B=100/4K (76%) 85.7 -> 79.2 (1). At 61% the lengths disagree (Nq
// 8 B=10/4K 78.2 -> 73.8, MQA B=80/4K 79.5 -> 73.8, but Nq 8 B=10/16K 262.4 against 273.9): 16-row
// blocks there. Since stop 104 above half a unit per SM from 2048 keys the balanced 2 in its low
// band (decode_wide_rows_balanced_band; Nq 8 B=10/16K above: 258.3 -> 235.7), else 1 split (the
// 16-row blocks -> 1 split, `--wide-low-band` (stop 103) and `--h100-low-band-rule` /
// `--h100-low-band-confirm` (stop 104), one token at Hq 32 / Hkv 1 paged: B=70 (53%) 2K 42.1 ->
// 39.1, B=76 (58%) 3K 60.2 -> 56.7, B=80 (61%) 2K 42.0 -> 39.1, B=84 4K 80.7 -> 72.7, B=90 (68%)
// 2K 43.9 -> 40.5, 4K 80.5 -> 74.3, 8K 152.6 -> 141.8; contiguous B=76/4K 67.7 -> 62.3, B=80/4K
// 69.4 -> 66.5; Nq 8 paged B=11/4K 82.6 -> 74.6, Nq 5 B=11/4K 81.1 -> 73.2; one point lost,
// contiguous B=90/8K 134.7 against 137.4). Head dims 64 and 96 there since stop 101:
// decode_wide_rows_d64_d96_splits.
inline int decode_wide_rows_splits(int head_dim, int rows_per_kv_head, int64_t units, int64_t sms,
                                   int64_t max_kv_len, bool hbm3e, bool paged) {
  if ((head_dim != 64 && head_dim != 96 && head_dim != 128) || !decode_two_tile_rows(rows_per_kv_head) ||
      units <= 0 || sms <= 0)
    return 0;
  if (head_dim != 128) return decode_wide_rows_d64_d96_splits(head_dim, units, sms, max_kv_len, paged, hbm3e);
  const int64_t cap = std::min<int64_t>(kMaxSplits, max_kv_len / kWideRowsSplitKeys);
  if (cap < 1) return 0;
  if (units <= sms) {
    if (decode_wide_rows_balanced_band(units, sms, max_kv_len, hbm3e, paged)) return 2;
    if (!hbm3e && 2 * units > sms && max_kv_len >= 2 * kWideRowsSplitKeys) return 1;  // stop 104, above
    const int64_t splits = std::min(cap, sms / units);
    return splits >= decode_wide_rows_fill_splits(units, sms, hbm3e) ? static_cast<int>(splits) : 0;
  }
  if (units > 2 * sms) return 0;
  if (decode_wide_rows_balanced_band(units, sms, max_kv_len, hbm3e, paged)) return 2;
  if (4 * units >= 3 * 2 * sms) return 1;
  return cap >= 2 ? 2 : 0;
}
// Whether a call of `splits` splits runs two row tiles per block: the automatic count's
// (decode_wide_rows_splits; the CLO_DECODE_WIDE_ROWS knob forces it off, or on for any
// count wherever the rows span two tiles).
inline bool decode_wide_rows_pay(int head_dim, int rows_per_kv_head, int64_t units, int splits,
                                 int64_t sms, int64_t max_kv_len, bool hbm3e, bool paged) {
  const int knob = decode_dev_wide_rows();
  if (knob == kDecodeWideRowsOff || rows_per_kv_head <= kRowsPerBlock) return false;
  return knob == kDecodeWideRowsOn || knob == kDecodeWideRowsBalanced ||
         splits == decode_wide_rows_splits(head_dim, rows_per_kv_head, units, sms, max_kv_len, hbm3e, paged);
}
// Whether a two-row-tile call of `splits` splits (decode_wide_rows_pay) asks for the balanced
// schedule: 2 splits in the automatic rule's band (decode_wide_rows_balanced_band), or any 2-split
// call under the kDecodeWideRowsBalanced dev knob (decode_wide_rows_streamk_blocks then takes those
// of half a unit to two units per SM); never under kDecodeWideRowsOn (the even grid at any count).
// (The launcher asks only where that kernel is instantiated: decode_runs_wide_rows_balanced, D = 128.)
// Every sm_90 part: on the H100 (stop 100, `--wide-rows-h100`, graph replays, cold L2, us, the
// band's 2 splits as an even grid -> balanced) Nq 8 at GQA 32/8 paged B=17/4K 148.1 -> 112.1,
// B=21/4K 151.4 -> 139.4, B=22/4K 153.0 -> 140.7, B=21/16K 518.9 -> 490.6 (contiguous 482.2 ->
// 472.8), Nq 5 B=17/4K 143.1 -> 109.4; one token at Hq 32 / Hkv 1 paged B=136/2K 85.9 -> 64.0
// (cuDNN 70.0), B=150/4K 149.3 -> 124.7 (cuDNN 144.5), B=170/4K 153.3 -> 140.6 (cuDNN 144.8),
// contiguous B=150/4K 137.4 -> 123.6.
inline bool decode_wide_rows_runs_balanced(int64_t units, int splits, int64_t sms, int64_t max_kv_len, bool hbm3e,
                                           bool paged) {
  const int knob = decode_dev_wide_rows();
  if (splits != 2 || knob == kDecodeWideRowsOn) return false;
  return knob == kDecodeWideRowsBalanced || decode_wide_rows_balanced_band(units, sms, max_kv_len, hbm3e, paged);
}
// The wide-row kernel's pipeline depth (PDL on every grid, decode_pdl_pays; the row boxes
// decode_wide_row_boxes_pay, spanning beyond one wave as the 16-row rule: `--wide-beyond`, stop
// 72, a box per plane -> spanning, paged Nq 8 B=25/8K 290.9 -> 240.1 us, MQA B=200/4K 152.3 ->
// 128.4, contiguous level): on one wave, 4 stages on paged caches and 3 on contiguous ones
// (`--wide-rows`, 4 / 3: paged B=1/16K 31.3 / 32.0, B=4/16K 79.1 / 81.2, B=8/16K 146.8 /
// 150.7; contiguous B=8/16K 132.5 / 130.7, MQA B=48/16K 118.3 / 117.2), as the 16-row small grids (decode_tma_stages_for); 3
// beyond (its smem plan fits four stages but, at D = 96 and 128, a second block per SM does not
// fit its registers either way; at D = 64 two fit at 2-3 stages, stop 89). Those 4 stages were measured with a box per plane; where the boxes span every
// plane (`spans_planes`, decode_wide_row_boxes_pay) 3 (`--wide-boxes-depth`, stop 71, 4 / 3
// stages under spanning boxes, us: Nq 8 B=16/4K 67.8 / 67.3, B=8/4K 42.7 / 42.3, B=2/16K
// 40.5 / 40.3, B=8/16K 131.3 / 131.9, B=4/16K 70.1 / 70.2; MQA B=16/16K 41.6 / 40.9, B=32/16K
// 72.8 / 71.2); D = 96's tail spans likewise (stop 93, 4 / 3: Nq 5 B=16/4K 58.6 / 59.9, B=8/16K
// 118.7 / 117.8).
// Other sm_90 parts take 3 everywhere at head_dim 128 (stop 99, H100 `--wide-rows`, 4 / 3 stages
// at one wave, paged, us: Nq 8 B=1/16K 33.0 / 32.0, B=2/16K 55.7 / 54.0, B=4/16K 100.8 / 98.2,
// B=8/16K 192.3 / 187.8, B=16/4K 97.7 / 95.4; MQA B=8/16K 34.1 / 32.6, B=64/4K 59.7 / 56.4; 4 ahead
// only at counts the rule does not take, B=10/4K 72.2 / 73.6, B=80/4K 71.8 / 73.1); at 64 and 96
// the HBM3e depths (stop 101 measured its counts at these).
inline int decode_wide_rows_stages(int head_dim, bool paged, int64_t blocks, int64_t sms, bool spans_planes,
                                   bool hbm3e) {
  return (hbm3e || head_dim != 128) && blocks <= sms && paged && !spans_planes ? 4 : 3;
}
constexpr int kSpreadTailMinKeys = 1024;
// A length edge of several rules (kSplitRuleLengthEdges): the partial wave below, the H100
// spread tail's contiguous top (just below), the tail bands.
constexpr int kPartialWaveMinKeys = 2048;
// Units of more than one row tile (decode_rule_multi_tile) run the spread tail to 1.34 units
// per SM on contiguous caches too, in 4 pieces wherever it runs (one token at Hq 32 / Hkv 1,
// contiguous B=80/4K (1.21): 1 split 64.9, spread 4 56.1; stop 68, `--nq-tiles`, Nq 8
// at GQA 32/8, us, 1 split / 3 even / spread 4 / spread 8; the balanced 2 splits these bands
// ran before): paged B=9/4K (1.09) 67.2 / 61.6 / 51.6 / 52.4, B=10/4K (1.21; balanced 100.1)
// 67.9 / 64.3 / 58.1 / 65.0, B=10/2K (60.0) 37.8 / 40.8 / 32.6 / 35.7, B=11/4K (1.33, where
// SMs / (units - SMs) is 3) 68.6 / 68.1 / 66.2 / 69.1 (`--nq-tiles-confirm`: spread 3 68.7,
// 4 65.9), B=10/16K (329.3) 247.8 / 206.2 / 214.3 / 245.6; contiguous B=10/4K (1.21; 87.6)
// 64.8 / 62.1 / 56.6 / 62.8, B=9/16K 232.0 / 188.1 / 178.9 / 182.7. Nq 16 (four tiles)
// alike: B=5/4K (1.21) paged 1 split / balanced 2 / 3 even / spread 4 64.8 / 99.4 / 56.8 /
// 50.8, contiguous 61.6 / 84.8 / - / 49.0. (From 16384 keys 3 even splits read 2-4% ahead
// of the 4 pieces: contiguous B=10/16K 199.6 / 204.3.)
// Other sm_90 parts (the H100, stop 119) run it for one new token of one row tile only, up to
// 1.1 units per SM, where every SM but a few holds one whole unit and the pieces come to 8;
// contiguous caches below 2048 keys only to 1.05 (stop 120). H100, NOTES.md "Stop 119"
// (`--h100-spread-low`, GQA 32/8 block 16, graph replays, cold L2; 1 split -> 8 pieces, us):
// B=17 (1.03) paged 1K / 4K / 16K 27.8-28.0 / 99.2 / 386.0 -> 27.6-27.7 / 98.1 / 382.6,
// contiguous 28.5 / 101.8 / 396.5 -> 27.5-28.0 / 95.9 / 372.3; B=18 (1.09) paged 29.9-30.2 /
// 104.8 / 404.6 -> 29.3-29.5 / 103.6 / 400.9, contiguous 2K / 16K 54.1 / 399.7 -> 53.1 /
// 392.7, but 1K 29.6-29.7 -> 29.8-30.2 (four rounds; hence the 1.05 edge). B=19 (1.15, 6
// pieces) gained at most 1.6% paged and lost 8% contiguous at 1K; 4 pieces lost (B=19/1K paged
// 31.5 -> 34.2, stop 99's B=20/1K 32.7 -> 35.1).
inline int decode_spread_tail_pieces(int head_dim, bool paged, int64_t units, int64_t sms, int64_t max_kv_len,
                                     bool hbm3e, int spec_rows) {
  const bool multi_tile = decode_rule_multi_tile(spec_rows);
  const int64_t top_100ths = hbm3e ? (paged || multi_tile ? 134 : 110)
                                   : (paged || max_kv_len >= kPartialWaveMinKeys ? 110 : 105);
  if (spec_rows < 0 || (!hbm3e && spec_rows != 0) || head_dim != 128 || max_kv_len < kSpreadTailMinKeys ||
      units <= sms || 100 * units > top_100ths * sms)
    return 0;
  static_assert(kSpreadTailMinKeys / kMinTokensPerSplit >= 4, "4 pieces fit the by-length cap from the band's keys");
  const int64_t pieces =
      multi_tile ? 4 : std::min<int64_t>({8, sms / (units - sms), max_kv_len / kMinTokensPerSplit});
  return pieces >= 3 ? static_cast<int>(pieces) : 0;
}
// On Hopper HBM3e parts at head_dim exactly 128 (16-bit, one new token or Nq > 1 up to four
// row tiles: decode_rule_spec_rows), a grid of more than
// half and up to 0.9 units (batch x KV heads x row tiles) per SM on paged sequences of 2048
// keys or more (to 1.0 from 8192 keys; contiguous: to 0.7 from 4096, below): the splits that
// fill the SMs at up to two blocks each in one wave, 2 * SMs / units (2 or 3: 1.33-2 blocks
// per SM), instead of 1 split, which left 10-50% of
// the SMs idle (stop 65, `--sustained-splits`, GQA 32/8 block 16, cool GPU; us, 1 / 2 / 3
// splits, cuDNN on the same keys contiguous): B=10/16K
// (0.61) 245.5 / 169.2 / 162.0 (165.0), B=12/4K (0.73) 63.7 / 52.7 / 65.0 (50.0; 3 takes a
// second wave); at 0.97 (B=16) 1 split stays below 8192 keys (4K 64.4 / 65.5, 1K 19.3 / 21.4).
// From 8192 keys the paged band runs to 1.0 (2 splits): one block per SM slows with the SM
// clock, which an H200 streaming decode drops within a second at its 700 W cap (stop 65),
// while two blocks per SM keep ours with cuDNN (stop 66, `--one-wave-long`, 1 / 2 splits
// (cuDNN), cool then after 600 ms of the same calls): B=16/16K (0.97) cool 247.6 / 248.5
// (240.7), at the cap 268-269 / 248.6 (243); B=16/8K 126.2 / 128.4 (123.0), 133-135 / 128.0
// (125); B=15/16K (0.91) 244.7 / 243.0 (227.2), 257-263 / 243.8 (230); B=15/8K 124.3 / 124.4,
// 126.3 / 124.2; at 4096 keys level or behind either way (B=16 cool 64.9 / 66.7, at the cap
// 67.6-69.1 / 66.7-67.0). Contiguous caches (3 TMA stages on their small grids) to 0.7 units
// per SM from 4096 keys (stop 66, `--contig-partial-wave`, `--wave-top-confirm`; 1 split / the count
// (cuDNN)): B=9/4K (0.55) 48.2 / 41.6 (46.4), B=9/16K 174.7 / 142.6 (162.0), B=10/4K 47.1 /
// 46.3 (46.2), B=10/16K 173.5 / 164.7 (167.3; 2 splits 159.9), B=11/8K (0.67) 90.8 / 87.7
// (91.4); they lose past 0.7 (B=12/16K (0.73) 186.2 / 187.4 at 2, B=12/4K 49.9 / 52.9, B=14/16K
// 212.9 / 220.1) and at 2048 keys (B=11 26.3 / 27.2; B=9 25.9 / 24.7). At 0.61 (B=10) 2 splits
// led 3 (16K 159.9 / 164.7, 4K 45.9 / 46.3). Nq 2 and 4 alike (stop 67, 1 / the count: paged
// B=10/16K 243.7 / 164.3, B=12/4K Nq 4 65.3 / 58.0, B=9/2K Nq 2 34.4 / 26.6; contiguous B=9/4K
// 63.3 / 43.3; B=15/4K keeps 1, 65.4 / 66.4 at 2). Units of more than one row tile
// (decode_rule_multi_tile) to 1.0 on both layouts (stop 68, `--nq-tiles`, Nq 8 at GQA 32/8,
// 1 / 2 / 3 splits): paged B=8/4K (0.97) 65.4 / 47.5 / 59.6, B=7/4K 65.3 / 45.8 / 57.8, B=5/4K
// 65.3 / 43.5 / 35.5, B=6/2K 35.2 / 28.8 / 36.4, B=7/16K 245.2 / 141.6 / 187.5, B=8/8K 125.0 /
// 82.7 / 102.7; contiguous B=6/16K (0.73) 173.7 / 130.8 / 179.1, B=7/16K 173.9 / 135.3 /
// 182.5, B=8/16K 177.0 / 157.0 / 195.8 (stop 67), B=5/4K 47.3 / 41.8 / 34.3, B=8/4K 47.9 /
// 47.7 / 57.1; Nq 16 (four tiles) paged B=3/16K 245.2 / 128.9 / 166.2, B=4/8K 125.2 / 71.3 /
// 93.0, contiguous B=3/16K 173.7 / 122.9 / 158.0.
// Those units take the count (two blocks per SM) on smaller grids too, where the generic
// count is SMs / units, one block per SM (stop 68, `--nq-small-splits`, GQA 32/8, us,
// SMs / units / 1.5x / 2x splits): Nq 8 paged B=1/16K 40.4 / 35.8 / 32.6, B=2/16K 70.1 / 55.5
// / 49.5, B=4/4K 40.0 / 33.8 / 30.3; contiguous B=1/16K 32.4 / 35.1 / 32.2, B=2/16K 53.5 /
// 53.6 / 48.7, B=4/4K 32.0 / 32.9 / 30.1; Nq 16 paged B=1/16K 70.2 / 52.1 / 42.1, B=2/8K
// 70.0 / 51.1 / 41.8, contiguous 52.7 / 49.9 / 40.7 and 52.4 / 49.1 / 40.3. One token at Hq 32
// / Hkv 1 (two tiles, `--mqa-tiles`, the old count / this one): paged B=8/16K 40.4 / 33.1, B=64/4K
// (0.97) 65.1 / 48.7, contiguous B=48/16K (0.73) 175.0 / 131.3, B=8/16K 32.3 / 32.1.
// Returns the count (at most 3 where units > SMs / 2; the caller caps it by the length and
// kMaxSplits), or 0.
// From these lengths: the contiguous partial wave and the wave top (decode_tail_splits), and
// the paged partial wave's top of 1.0 units per SM
constexpr int kHbm3eD128LongKeys = 4096;
constexpr int kPartialWaveFullWaveKeys = 8192;
inline int decode_partial_wave_splits(int head_dim, bool paged, int64_t units, int64_t sms, int64_t max_kv_len,
                                      bool hbm3e, int spec_rows) {
  const bool multi_tile = decode_rule_multi_tile(spec_rows);
  const int64_t min_keys = paged ? kPartialWaveMinKeys : kHbm3eD128LongKeys;
  const int64_t top_tenths = multi_tile || (paged && max_kv_len >= kPartialWaveFullWaveKeys) ? 10 : paged ? 9 : 7;
  if (!hbm3e || spec_rows < 0 || head_dim != 128 || max_kv_len < min_keys || (2 * units <= sms && !multi_tile) ||
      10 * units > top_tenths * sms)
    return 0;
  return static_cast<int>(2 * sms / units);
}
// The lengths (keys) at which a rule of decode_attention_num_splits changes its answer,
// besides the by-length cap (kMinTokensPerSplit), which only grows with the length: the
// spread tail (kSpreadTailMinKeys), the partial wave above (kPartialWaveMinKeys: 2048, also
// the H100 spread tail's contiguous top, the tail bands' first edge below and
// decode_d64_tail_splits'; kHbm3eD128LongKeys and
// kPartialWaveFullWaveKeys), the tail bands' 4096 (also the HBM3e wave top's) and 8192 (also
// the HBM3e pair band's, kPairBandLongKeys) and
// the large-grid rule (kLargeGridMinKeys); two-row-tile blocks beyond one unit per SM at
// kWideRowsSplitKeys (as kSpreadTailMinKeys) and twice that (as kPartialWaveMinKeys), at head
// dims 64 / 96 from twice that at any grid (below 0.45 units per SM their count then grows with
// the length) and on head_dim 64 past one unit per SM from kLargeGridMinKeys.
// decode_attention_workspace_floats_upto reads them (and, per batch size, where two-row-tile
// blocks first fill the SMs up to one unit per SM, and where head pairs of 72-80 below 0.35
// pairs per SM reach their most splits): a rule that tests another length must add it here.
// On Hopper HBM3e parts (`hbm3e`: device_is_hopper_hbm3e) at head_dim exactly 128
// the D = 128 bands take their own counts (NOTES.md "H200 rules", stop 60; GQA 32/8, one
// new token, graph replays, cold L2); the H100's trailed other counts at every point of
// both bands measured on the H200:
// - the one-tail band, one new token or Nq > 1 up to four row tiles (decode_rule_spec_rows;
//   stop 67: Nq 2 and 4 lost 5-21% at the H100's 2 balanced splits; stop 68: Nq 8 33-59%,
//   paged B=10/2K 60.0 against 37.8 at 1 split), beyond the spread tail's band: 1 split on paged tables below 4096 keys
//   and contiguous caches (paged B=20/2K 51.2 -> 48.7 us, contiguous B=20/4K 83.7 -> 81.3),
//   3 even splits on paged ones from 4096 keys (B=20/4K 89.9 -> 86.9, B=22/4K 96.6 -> 94.0)
//   instead of the balanced 2-split schedule;
// - past 2.5 units per SM to just under 3, from 4096 keys: 2 even splits instead of 1, 3 to
//   2.67 from 8192 keys (stops 66, 67; the rows' bounds and figures at the rule below);
// - from the first unit past two per SM to 2.5: 3 even splits instead of 2 (B=36-40/4K
//   3-4%: B=36 170.1 -> 163.5, contiguous 160.8 -> 154.5; paged 2048 keys level) and, at
//   2.06 where the H100's band has not begun, instead of 1 (B=34/4K 188.9 -> 158.2, B=34/2K
//   98.4 -> 89.8). Like the H100's band it holds for both layouts and any number of new
//   tokens (neither moves a D = 128 count there); contiguous 2048 keys were level with 2
//   splits at stop 61 (B=36 85.4 vs 86.0, B=40 89.8 vs 89.4); Nq > 1 was not measured.
// The H100's bands at head_dim 256 and 96 measured on the H200 (stop 61, `--band-check-wide`,
// `--hbm3e-band-edges`, `-confirm`, `-edges2`, `-final`; GQA 32/8, block 16; us, the H100's
// count -> this one), at exactly those head dims and contiguous 192 (others keep the
// H100's counts):
// - D = 256: the balanced band to 1.7 units per SM on paged caches, 1.55 on contiguous ones
//   (B=24/2K 120.8 -> 106.3, B=24/4K 231.4 -> 200.6, B=24/8K 452.8 -> 383.0, B=26/4K 230.2
//   -> 213.8, B=27/4K 229.5 -> 216.6, B=28/2K 121.2 -> 120.1; contiguous B=24/4K 196.5 ->
//   188.4, B=25/4K 196.2 -> 191.7; 1 split ahead at paged B=29-33 and contiguous B=26-28);
//   contiguous D = 192 to 1.83 (B=25/2K 93.9 -> 82.8, B=26/4K 182.0 -> 161.1; stop 62,
//   `--hbm3e-band-tops`: B=28 2K / 4K / 8K 96.5 / 184.9 / 364.3 -> 90.9 / 173.1 / 343.2, B=30
//   98.1 / 187.9 -> 95.9 / 185.7; 1 split ahead from 1.88, B=31/8K 373.5 vs 378.6, B=32/4K
//   197.7 vs 199.2), and from 4096 keys past two units per SM to 2.5 2 even splits
//   (`--hbm3e-band-tops-confirm`, 1 -> 2: B=34 4K / 8K 253.2 / 498.7 -> 239.3 / 455.0, B=36
//   254.5 / 502.0 -> 242.6 / 461.6, B=38 258.7 / 509.9 -> 255.4 / 490.2, B=40 264.8 / 521.9
//   -> 259.6 / 496.4; stop 63, `--hbm3e-contig-192-fill`: B=41 at 2.48 272.9 / 540.5 -> 262.7
//   / 505.6; 3 splits were ahead at B=34 and 38, behind at 36 and 40, ahead by 1-3% at
//   8192 keys to B=44 in one run; at 2048 keys and at B=42, 2.55, 1 split led, 131.3 vs
//   133.4 at B=34/2K, 280.2 vs 288.8 at B=42/4K; one new token measured, like the D = 128
//   second-wave band it holds for any). Paged
//   D = 160 / 192 keep 1.35 (D = 192 B=24 level, B=27/2K 100.9 unsplit vs 106.7; D = 160
//   B=24 94.5 vs 99.0), contiguous D = 80 / 88 keep D = 96's H100 band (D = 88 B=20/2K 41.2
//   -> 39.8 split);
// - paged D = 96 from 4096 keys, past two units per SM to 2.65: 3 even splits instead of 2
//   (4K B=34-43 129.0 / 141.9 / 143.6 / 145.3 -> 123.4 / 134.4 / 137.4 / 144.6), from 8192
//   keys 4 to 2.5 (B=36/8K 302.8 -> 272.1, B=37/16K 579.8 -> 518.7; stop 62, B=41 at 2.48:
//   8K 285.6 -> 277.9, 16K 552.6 -> 539.8), 3 beyond (B=42/8K 286.0 against 318.6 at 4;
//   B=43/8K 318.9 at 2, 318.6 at 4 -> 287.9; B=43/16K 606.6 at 4 -> 552.4); at 2.67 (B=44) 2
//   stays ahead;
// - paged D = 96 below 4096 keys: the second wave's 2 splits to 2.95 instead of 2.7 (B=45
//   87.9 -> 82.3, B=47 88.5 -> 85.3, B=48 87.8 -> 85.5);
// - contiguous D = 96 below 4096 keys: the one-tail band ends at 1.15 instead of 1.35
//   (B=20/2K 39.2 -> 38.5, B=21 40.0 -> 38.3, B=22 40.9 -> 39.0, B=21/3K 55.7 -> 55.4;
//   B=18-19 keep 2 splits).
// Returns the split count: 1 to 4, and on paged rows that share lines off HBM3e up to
// kSharedLinesMostSplits.
static_assert(kPartialWaveMinKeys == 2048, "the edge list holds 2048 once, as kPartialWaveMinKeys");
static_assert(kHbm3eD128LongKeys == kLargeGridMinKeys && kPartialWaveFullWaveKeys == 8192,
              "the HBM3e D = 128 rules' lengths are in the edge list");
static_assert(kWideRowsSplitKeys == kSpreadTailMinKeys && 2 * kWideRowsSplitKeys == kPartialWaveMinKeys,
              "the two-tile rule's edges beyond one unit per SM (1024, 2048 keys) are in the edge list");
static_assert(kLargeGridMinKeys == 4096, "D = 64 two-tile blocks past one unit per SM start at an edge");
// Paged rows that share lines on the D = 256 kernel off HBM3e: the keys of a split and the most
// splits (decode_tail_splits), and below one unit per SM the length from which they split so.
// The count grows with the length (below one unit per SM from the small grid's SMs // units up), so the
// workspace's longest length stands for its interval (decode_attention_workspace_floats_upto).
constexpr int64_t kSharedLinesSplitKeys = 2048;
constexpr int kSharedLinesMostSplits = 16;
constexpr int64_t kSharedLinesSmallGridMinKeys = 16384;
constexpr int kSplitRuleLengthEdges[] = {kSpreadTailMinKeys, kPartialWaveMinKeys, kLargeGridMinKeys, 8192};
// `shared_lines`: paged rows that are not whole 128-byte lines beside other KV heads
// (decode_units_share_lines), units of one row tile. `one_row_units`: one query row a KV head
// (MHA, one new token).
inline int decode_tail_splits(int head_dim, bool paged, int64_t units, int64_t sms, int64_t max_kv_len, bool hbm3e,
                              int spec_rows, bool shared_lines, bool one_row_units) {
  if (max_kv_len < 2048) return 1;
  const int kernel_head_dim = decode_kernel_head_dim(head_dim);
  // from the first extra unit at D = 256, from 1.06 units per SM at D = 96, 1.1 at D = 128
  const bool past_first_wave = kernel_head_dim == 256  ? units > sms
                               : kernel_head_dim == 96 ? 100 * units > 106 * sms
                                                       : 10 * units > 11 * sms;
  // The one-tail band's top, in 100ths of a unit per SM: 1.35, but on HBM3e parts at
  // D = 256 1.7 (paged) and 1.55 (contiguous), contiguous D = 192 1.83, on contiguous D = 96
  // caches below 4096 keys 1.15 (stops 61, 62).
  const bool hbm3e_d96 = hbm3e && head_dim == 96;
  const int64_t one_tail_top_100ths = hbm3e && head_dim == 256                 ? (paged ? 170 : 155)
                                      : hbm3e && head_dim == 192 && !paged         ? 183
                                      : hbm3e_d96 && !paged && max_kv_len < 4096 ? 116
                                                                                 : 135;
  // balanced schedules of one block per SM only (two at 64 start at 2 units per SM:
  // decode_d64_tail_splits)
  const bool one_tail = decode_balanced_head_dim(kernel_head_dim, paged) &&
                        decode_streamk_blocks_per_sm(kernel_head_dim) == 1 && past_first_wave &&
                        100 * units <= one_tail_top_100ths * sms;
  // Paged rows narrower than the D = 128 kernel's (head_dim 104-120 on it), units of up to
  // four row tiles (spec rows, as the D = 128 rule below): 1 split in the one-tail band, on
  // every sm_90 part (the H100 since stop 99, `--h100-tails`, 2 even / 1 / 3 splits, us: D = 112
  // B=20 2K 64.3 / 56.8 / 60.7, 16K 556.1 / 437.4 / 493.3; D = 104 B=20/16K 653.4 / 571.1 /
  // 577.9; D = 120 B=20/16K 698.5 / 597.6 / 644.5; at 1.33 units per SM 3 led: B=22/4K D = 104
  // 141.5 / 141.5 / 125.5, D = 112 128.3 / 126.5 / 121.4, D = 120 154.9 / 154.0 / 140.4, not
  // taken: one length read). On HBM3e parts the balanced 2 splits took 25-77% longer (NOTES.md "Stop 86", GQA 32/8 block 16,
  // 1 / 2 balanced splits, us: D = 112 B=20/2K 41.7 / 62.4, B=22/2K 44.0 / 73.3, B=20/4K 77.9 /
  // 132.7, B=22/8K 160.2 / 282.9, Nq 2 B=20/4K 78.4 / 135.6; D = 120 B=20/4K 89.9 / 145.3;
  // D = 104 B=20/2K 49.8 / 62.0; units of 17-64 rows not measured). Contiguous caches keep 2:
  // 1 split wins only D = 112 below 8192 keys (1 / 2: B=20/2K 40.1 / 43.5, B=20/4K 73.7 / 75.9),
  // 2 from there (B=20/8K 141.8 / 140.5, B=22/16K 302.6 / 294.8) and at D = 104 and 120 (B=20/4K
  // 86.6 / 82.0 and 86.7 / 81.8; D = 120 16K 325.8 / 297.5).
  if (paged && kernel_head_dim == 128 && head_dim != 128 && one_tail && spec_rows >= 0) return 1;
  // HBM3e parts, shared_lines on the D = 256 kernel (head_dim 136-248 but 192) in the one-tail
  // band: 3 even splits past kStreamKSharedReadsTop10ths units per SM, or from 8192 keys; else
  // the band's 2 (balanced: decode_streamk_pays_shared_reads). There the balanced schedule
  // re-reads the lines two KV heads share and even 2 splits leave half a wave (NOTES.md "Stop
  // 87", GQA 32/8 block 16, us, 2 balanced / 2 even / 3 splits: D = 224 B=20 2K 105.3 / 96.1 /
  // 93.1, 4K 200.3 / 175.8 / 164.0, 16K 767.0 / 657.8 / 597.7; B=22 2K 111.2 / 96.5 / 98.5, 4K
  // 208.2 / 176.5 / 175.4, 16K 807.6 / 658.4 / 637.4; B=17 (1.03) 2K 75.0 / 96.5 / 91.7, 4K
  // 146.9 / 178.0 / 163.4, 16K 637.8 / 663.2 / 597.5, 8K balanced / 3: 299.7 / 304.2; D = 176
  // B=20 2K 93.6 / 82.5 / 81.2, 16K 680.9 / 541.1 / 494.2; D = 144 B=20/4K 157.2 / 140.1 /
  // 132.0; D = 160 163.4 / 143.9 / 135.0).
  // Other sm_90 parts (the H100, stop 99, `--misaligned-band` and `--h100-tails`, 2 (the
  // rule's) / 3 splits, us): 3 from 4096 keys at any point of the band (D = 224 B=17 (1.03) 4K
  // 221.4 / 197.4, 8K 481.6 / 382.8, 16K 1003.3 / 782.7; B=18 4K 214.2 / 204.2, 8K 427.7 / 404.5;
  // B=20 4K 224.9 / 214.0, 8K 452.1 / 422.0, 16K 953.9 / 883.7; B=22 4K 233.9 / 234.3, 8K 477.6 /
  // 465.2, 16K 995.2 / 967.5; D = 176 B=17/4K 178.7 / 168.2, B=22/4K 187.4 / 190.4, B=20/16K 710.4 /
  // 660.6; D = 144 B=20/4K 158.7 / 151.6), 2 below (B=17/2K 104.1 / 108.9, B=21/2K 119.7 / 121.8,
  // B=22/2K 123.5 / 127.9; B=18/2K 130.3 / 112.8, B=19/2K 117.7 / 114.1 and B=20/2K 118.8 / 117.0
  // the exceptions).
  // From 8192 keys off HBM3e a split of kSharedLinesSplitKeys each, to kSharedLinesMostSplits
  // (stop 110, `--h100-d224-splits`, flash / 3 / 4 / 8 splits: D = 224 B=20 8K 400.8 / 421.9 /
  // 415.1 / 420.0, 16K 785.6 / 880.7 / 856.4 / 824.1; B=17/16K 711.2 / 782.8 / 746.9 / 720.1;
  // B=18/16K 721.6 / 840.2 / 800.2 / 740.9; B=22/16K 851.8 / 976.7 / 983.3 / 908.2; D = 240
  // B=20/16K 926.0 / 969.8 / 948.6 / 903.8; D = 176 B=20/16K level, 630.3 / 655.4 / 645.3 / 653.1;
  // at 4096 keys 3 stays: B=20 211.2 / 214.0 / 215.4 / 231.4; `--h100-d224-long`, 32K keys,
  // flash / 3 / 8 / 16: B=17 1396.8 / 1636.2 / 1498.0 / 1403.9, B=20 1561.6 / 1868.7 / 1747.3 /
  // 1648.1, B=22 1686.8 / 2073.3 / 1919.8 / 1802.9, D = 240 B=20 1768.6 / 2076.7 / 1931.8 /
  // 1821.9; behind 3 once, B=22/8K 462.7 at 3, 473.0 at 4). Contiguous D = 224 reads 100% of
  // the copy at 2 (B=20/16K 771.1): the loss is the lines that two KV heads' rows share
  // (decode_head_clusters_pay).
  // The same rows outside the band off HBM3e: splits of kSharedLinesSplitKeys each as well,
  // from 4096 keys past it; below one unit per SM from 16384 keys where the small grid's own
  // count (SMs // units, below) leaves splits of more than twice that. Their head pairs launch
  // as clusters (decode_head_clusters_pay). H100, NOTES.md "Stop 111"
  // (`--h100-shared-lines-bands`, paged D = 224 GQA 32/8 block 16, us, flash / 1 (the rule's
  // then) / 2 / 4 / 8 splits): B=24 (1.45 units per SM) 4K 245.9 / 272.6 / 254.0 / 256.7 /
  // 275.1, 8K 472.7 / 563.6 / 524.2 / 493.3 / 504.7, 16K 927.6 / 1163.3 / 1103.8 / 982.3 / 974.7;
  // B=40 4K 558.1 / 452.0 / 419.8 / 423.6 / 440.1, 8K 1048.3 / 940.2 / 854.5 / 813.8 / 826.3,
  // 16K 2110.8 / 1995.7 / 1824.1 / 1639.6 / 1626.4; B=64 (3.9) 4K 620.3 / 676.6 / 662.0 / 667.3
  // / 688.4, 8K 1228.0 / 1441.0 / 1382.2 / 1304.2 / 1306.6, 16K 2477.2 / 3131.4 / 2987.7 /
  // 2651.5 / 2572.6; B=32 and 48 alike (within 0.6% of the best count, 3 once 1.3%); D = 176 and
  // 240 B=40/16K 1518.1 / 1347.4 / 1286.0 / 1302.2 and 2161.3 / 2032.9 / 1850.6 / 1759.0 (16:
  // 1738.8). Below one unit per SM (2 / 3 / 4 / 8 splits; the rule's then: 2 at B=6, 1 at
  // B=10-14): B=6 16K 266.0 / 340.5 / 273.4 / 251.8, B=10 16K 533.9 / 427.5 / 440.7 / 411.9
  // (1: 448.8), B=14 16K 618.0 / 606.3 / 609.5 / 571.1 (1: 645.8); at 8192 keys 4 splits lost
  // at B=6 (132.1 at 2, 137.1 at 4) and B=10 (222.3 at 1, 223.8; 1 with head clusters 210.6),
  // so 16384 keys it is. `--h100-shared-lines-confirm` (the rule then / the count before):
  // B=12/16K 493.1 / 512.1, B=16/16K 653.0 / 788.4, but where SMs // units already cut splits
  // of 4096 keys 2048-key splits lost: B=4/16K 171.0 / 167.3, B=2/32K 172.1 / 168.1 (B=4/32K,
  // splits of 8192 keys, level: 331.5 / 331.8); past the band (1 before) B=96/16K 3846.2 /
  // 4817.2, B=128/16K 5102.3 / 6484.2, MHA (Hkv 32) B=10/16K 1608.3 / 1987.6, D = 176 B=64/6K
  // level (782.5 / 782.8).
  if (shared_lines && paged && kernel_head_dim == 256) {
    if (hbm3e) {
      if (one_tail)
        return 10 * units > kStreamKSharedReadsTop10ths * sms || max_kv_len >= kSplitRuleLengthEdges[3] ? 3 : 2;
    } else {
      const int by_keys =
          static_cast<int>(std::min<int64_t>(max_kv_len / kSharedLinesSplitKeys, kSharedLinesMostSplits));
      if (one_tail) return max_kv_len < kLargeGridMinKeys ? 2 : std::max(by_keys, 3);
      const bool small_grid_long_splits =
          max_kv_len >= kSharedLinesSmallGridMinKeys && max_kv_len > sms / units * 2 * kSharedLinesSplitKeys;
      if (units > sms ? max_kv_len >= kLargeGridMinKeys : small_grid_long_splits) return by_keys;
    }
  }
  if (kernel_head_dim == 96) {
    // contiguous caches from 4096 keys: one band from the first extra unit to 2.95, but for
    // whole waves (no tail to spread; exactly 2 units per SM lost 1-3%, v35)
    if (!paged && max_kv_len >= 4096) return past_first_wave && 20 * units <= 59 * sms && units % sms != 0 ? 2 : 1;
    // Paged head_dim 96 from 4096 keys, past two units per SM: on HBM3e parts to 2.65, 3 even
    // splits (from 8192 keys 4 to 2.5); on other sm_90 parts 3 to 2.5, from 8192 keys to 2.7,
    // where the 2 below had run since v36 (the H100 at 5cd2324, NOTES.md "Stop 107",
    // `--h100-bands-next`, GQA 32/8 block 16, us, 2 / 3 splits (cuDNN): B=34 (2.06) 4K 163.8 /
    // 158.9 (177.3), 8K 369.9 / 340.8 (342.8), 16K 743.5 / 674.0 (677.7); B=37 4K 184.8 / 177.4,
    // 16K 760.7 / 698.9 (709.9); B=40 (2.42) 4K 187.6 / 183.6, 8K 383.8 / 361.1, 16K 776.0 /
    // 721.2 (768.7); MHA B=10 4K 185.7 / 180.4, 16K 774.8 / 721.2; at 2.55, B=42, 4K 192.1 /
    // 193.5 but 8K 386.5 / 373.7, 16K 785.7 / 749.3; at 2.67, B=44, 4K 200.5 / 202.4, 8K 397.9 /
    // 395.8, 16K 808.6 / 791.2; at 2.91, B=48/8K, 431.0 / 445.1; at 2048 keys level or behind:
    // B=36 93.6 / 95.5, B=40 99.2 / 100.9).
    if (head_dim == 96 && paged && max_kv_len >= 4096 && units > 2 * sms) {
      if (hbm3e && 20 * units <= 53 * sms) return max_kv_len >= 8192 && 2 * units <= 5 * sms ? 4 : 3;
      if (!hbm3e && (max_kv_len >= 8192 ? 20 * units <= 54 * sms : 2 * units <= 5 * sms)) return 3;
    }
    // the second wave to 2.7 units per SM (2.95 on HBM3e's paged head_dim 96); on paged
    // caches from 4096 keys to 3.05 (v34 at head_dim 72-88, v36 at 96), from 8192 keys to
    // 3: their cp.async kernel (decode_tma_stages_for) fits 6 blocks per SM, and at 3.03
    // its 2-split grid takes a second wave (v36, B=50/8K D = 96 492.4 -> 510.9 us, D = 80
    // 448.6 -> 466.9)
    const int64_t top_20ths = !paged                ? 54
                              : max_kv_len < 4096   ? (hbm3e_d96 ? 59 : 54)
                              : max_kv_len < 8192   ? 61
                                                    : 60;
    return one_tail || (units > 2 * sms && 20 * units <= top_20ths * sms) ? 2 : 1;
  }
  const bool second_wave_top = kernel_head_dim == 128 && 2 * units <= 5 * sms;
  // HBM3e, contiguous head_dim 192 from 4096 keys, past two units per SM to 2.5: 2 even
  // splits (stops 62, 63)
  if (hbm3e && head_dim == 192 && !paged && max_kv_len >= 4096 && units > 2 * sms && 2 * units <= 5 * sms)
    return 2;
  // Head_dim 128 in the one-tail band, one new token or spec rows: on HBM3e parts 1 split, 3 on
  // paged caches from 4096 keys. Other sm_90 parts took the balanced 2 splits (v28) until stop
  // 99, when the H100's 1 split had caught up with them (`--h100-tails`, GQA 32/8 block 16, us,
  // balanced 2 / 1 / 3 splits; v28's 1 split: B=20/4K 131.1): paged B=20 2K 66.4 / 60.4 / 64.2,
  // 4K 121.9 / 114.9 / 118.4, 16K 451.9 / 442.8 / 448.2; B=22 4K 131.5 / 125.9 / 128.2, 16K
  // 492.3 / 487.5 / 485.1; MHA B=5/4K 119.2 / 115.0 / 116.9; Nq 2 B=20/4K 125.4 / 116.2 /
  // 120.8. There units of several row tiles (Nq 5: two) take 3 on paged caches from 4096 keys
  // (B=10 4K 93.4 / 78.2 / 75.2, 16K 334.4 / 303.7 / 256.6; B=11/4K 94.4 / 79.8 / 81.4; 2K
  // 52.8 / 42.7 / 44.7), contiguous ones 1 (B=10 4K 82.2 / 69.6 / 72.5, 16K 290.0 / 256.5 /
  // 251.5; B=11/16K 297.0 / 267.3 / 270.8); contiguous units of one tile keep the balanced 2
  // from 8192 keys (B=22 8K 245.2 / 251.5 / 244.4, 16K 481.4 / 500.0 / 479.7; B=20/16K 439.6 /
  // 442.3 / 439.2; B=22/4K 125.9 / 128.1, B=20 4K 116.8 / 114.0, 2K 63.4 / 59.9: 1 below).
  if (head_dim == 128 && one_tail && spec_rows >= 0) {
    const bool several_tiles = decode_rule_multi_tile(spec_rows);
    if (paged) return (hbm3e || several_tiles) && max_kv_len >= kLargeGridMinKeys ? 3 : 1;
    return !hbm3e && !several_tiles && max_kv_len >= kSplitRuleLengthEdges[3] ? 2 : 1;
  }
  if (hbm3e && head_dim == 128) {
    if (second_wave_top && units > 2 * sms) return 3;
    // From 4096 keys, past 2.5 units per SM to just under 3: 2 even splits, both
    // layouts (stop 66, `--wave-top`, `--wave-top-confirm`; GQA 32/8 block 16, cold L2, us,
    // 1 / 2 splits (cuDNN)): paged B=42 (2.55) 4K 185.9 / 172.8 (178.8), 16K 729.0 / 650.1
    // (699.5); B=44/8K 372.9 / 344.2 (363.5); B=46 (2.79) 4K 191.6 / 185.5 (187.8), 16K 749.3 /
    // 696.3 (730.8); B=47/8K (2.85) 381.0 / 363.0 (377.4); contiguous B=42 4K 181.9 / 168.2
    // (178.3), 16K 714.9 / 637.7 (705.7), B=46 186.6 / 181.5, 735.9 / 690.4. At the power cap
    // (600 ms warm) the same: paged B=42/16K 737 / 659 (709), B=46/16K 762 / 700 (748). At
    // 3.03 (B=50) 1 split leads on both (paged 4K 200.0 / 216.3, 16K 786.0 / 817.0); at 2048
    // keys 2 splits are level or behind (B=44 97.9 / 97.6, B=47 99.9 / 101.7). `--wave-top-edge`:
    // B=48 (2.91) paged 4K 191.4 / 187.7 (187.4), 16K 749.4 / 709.0 (733.0), 8K 383.6 / 370.0,
    // contiguous 187.3 / 184.8, 732.8 / 701.0; B=49 (2.97) paged 194.7 / 191.3, 756.8 / 718.9,
    // contiguous 188.6 / 187.6, 738.7 / 711.1. Exactly 3 units per SM (whole waves: no tail to
    // spread; not measured, at D = 96 exactly 2 lost, v35) keeps 1.
    // From 8192 keys its low end, to 2.67 units per SM, takes 3 (stop 67, `--nq-rules`, 2 / 3
    // splits: one token paged B=42/16K 637.1 / 622.4, B=44/16K 660.7 / 649.8, B=42/8K 324.0 /
    // 320.0, contiguous B=42/16K 637.7 / 628.2; Nq 2 paged B=42/16K 642.3 / 628.8, Nq 4 648.9 /
    // 638.2; at 2.79, B=46/16K, 680.6 / 705.7; at 4096 keys level, B=42 169.8 / 169.4).
    // Speculative units of 9-16 query rows (Nq 4 at GQA 32/8) end it at 2.75 below 8192 keys
    // (Nq 4 paged 4K, 1 / 2 splits: B=42 187.2 / 182.0, B=46 (2.79) 192.5 / 193.5, B=48 196.5 /
    // 198.9, B=49 197.9 / 201.9; from 8192 keys the gain holds to 2.91: B=48/8K 382.6 / 373.2);
    // one new token within one row tile (or beyond four) keeps stop 66's top at any group.
    // Units of more than one row tile (decode_rule_multi_tile) take 2 splits to 2.8 at any
    // length from 4096 keys, no 3 at the low end (stop 68, `--nq-tiles`, Nq 8 at GQA 32/8, 1 / 2 /
    // 3 splits): paged B=21/16K (2.55) 507.5 / 466.7 / 471.9 (stop 67), B=21/4K 135.9 / 130.6 /
    // 128.9, B=22/8K (2.67) 259.9 / 238.5 / 239.5, B=23 (2.79) 4K 138.0 / 134.3 / 153.8, 16K 497.2
    // / 473.9 / 537.2; contiguous B=21/16K 495.9 / 456.4 / 460.9, B=22/16K 495.6 / 451.1 / 462.7;
    // at 2.91 (B=24) 16K 484.8 / 533.9 (1 ahead), but 8K 267.2 / 250.1 and 4K 139.6 / 136.6 (2
    // ahead), contiguous 4K 133.8 / 133.4: the top between stays at 2.8 until more lengths are
    // read. One new token over two to four tiles (decode_rule_spec_rows) by analogy: its wave
    // top was not measured (`--mqa-tiles` read the partial wave, the spread tail and small grids).
    const bool multi_tile = decode_rule_multi_tile(spec_rows);
    const bool wave_top_end = multi_tile ? 20 * units <= 56 * sms
                                         : spec_rows <= kRowsPerBlock / 2 ||
                                               max_kv_len >= kPartialWaveFullWaveKeys || 20 * units <= 55 * sms;
    const bool wave_top = spec_rows >= 0 && max_kv_len >= kHbm3eD128LongKeys && 2 * units > 5 * sms &&
                          units < 3 * sms && wave_top_end;
    if (wave_top)
      return !multi_tile && max_kv_len >= kPartialWaveFullWaveKeys && 3 * units <= 8 * sms ? 3 : 2;
  }
  // Other sm_90 parts (the H100), head_dim 128 from 2.1 units per SM to 2.5: 2 even splits
  // (v29), 3 from 4096 keys on units of 2-16 query rows (one row tile: GQA, Nq 2-4) past two
  // units per SM, as HBM3e parts take (stop 108, `--h100-d128-band`, fc81a2b; GQA 32/8 block 16,
  // us, 2 / 3 splits (cuDNN)): paged B=35 (2.12) 8K 407.2 / 397.5 (419.1), 16K 800.0 / 775.6
  // (837.7); B=37 8K 439.6 / 423.5, 16K 871.4 / 836.6; B=39 8K 448.7 / 437.9, 16K 886.7 /
  // 864.4; B=41 (2.48) 8K 461.1 / 458.1, 16K 910.9 / 899.2; B=38/4K 226.5 / 220.5; Nq 2
  // B=38/16K 882.4 / 852.6; contiguous B=35 8K 389.0 / 385.1, 16K 769.9 / 758.4, B=37 431.5 /
  // 417.2, 851.0 / 820.9, B=39 439.5 / 430.9, 866.9 / 847.6, B=41 453.1 / 451.9, 895.2 / 888.5,
  // B=38/4K 221.3 / 217.0; at 2048 keys level or behind (stop 107, B=41 paged 124.3 / 125.9,
  // contiguous 120.6 / 122.6). One-row units (MHA) keep 2: B=9 (2.18) lost 3-4% on both
  // layouts (paged 8K 408.0 / 420.1, 16K 802.8 / 832.8; contiguous 396.8 / 411.1, 789.4 /
  // 813.5) where B=10 (2.42) gained 1-2% (paged 451.1 / 440.7, contiguous 440.3 / 435.2).
  // The band's 3 starts past two units per SM (as on HBM3e parts), where 1 split ran before:
  // B=34 (2.06) 1 / 2 / 3 splits paged 8K 449.6 / 402.0 / 386.9 (cuDNN 404.8), 16K 893.4 /
  // 789.6 / 755.3 (805.9), contiguous 8K 416.8 / 383.3 / 375.1, 16K 824.6 / 752.4 / 736.4;
  // exactly 2 (B=33: whole waves) keeps 1 (paged 16K 720.1 / 723.9 / 726.0). And from 8192
  // keys past 2.5 to 2.8 (HBM3e's wave top, 2 or 3 there), 3 where 1 ran: 16K paged B=42
  // (2.55) 993.9 / 930.4 / 920.2 (cuDNN 967.4), B=44 1010.9 / 965.2 / 963.9, B=46 (2.79)
  // 1038.4 / 1010.5 / 1006.1; contiguous B=42 962.0 / 913.2 / 913.9, B=44 982.2 / 951.9 /
  // 954.4, B=46 1011.7 / 998.0 / 994.8 (`--h100-d128-next`, 326e717).
  const bool second_wave_3 = !hbm3e && head_dim == 128 && !one_row_units && spec_rows >= 0 &&
                             !decode_rule_multi_tile(spec_rows) && max_kv_len >= kLargeGridMinKeys;
  if (second_wave_3 && second_wave_top && units > 2 * sms) return 3;
  // Past 2.8 to just under 3, 2 (B=48 (2.91)/16K 1 / 2 / 3 splits: paged 1047.9 / 1016.9 /
  // 1047.9 (cuDNN 1026.6), contiguous 1028.9 / 1011.3 / 1025.0; 253c149, `--h100-d128-confirm`;
  // 828bb2f, `--h100-wave-top`: B=47 (2.85) 8K paged 528.0 / 520.7 / 543.2, 16K 1056.0 /
  // 1031.0 / 1079.1, B=49 (2.97) 16K 1089.3 / 1069.8 / 1084.9, contiguous B=49/16K 1070.0 /
  // 1057.8 / 1080.1); exactly 3 (whole waves) keeps 1.
  if (second_wave_3 && max_kv_len >= kPartialWaveFullWaveKeys && 2 * units > 5 * sms && units < 3 * sms)
    return 5 * units <= 14 * sms ? 3 : 2;
  return one_tail || (second_wave_top && 10 * units > 21 * sms) ? 2 : 1;
}

// 16-bit head_dim 64 (exactly: narrower rows on its kernel are not measured) on sm_90 at
// 2-3 blocks per SM, sequences of at least 2048 keys (NOTES.md v31; the tail rule above
// takes no splits at 64). The split count, or 1:
// - paged, in head pairs (decode_packs_head_pairs), off HBM3e: 1 split. v31 gave the pairs'
//   band (1.06-1.35 pairs per SM, 2.1-2.7 unpaired blocks) the balanced 2 splits on the D = 128
//   kernel (decode_streamk_blocks; GQA 32/8 block 16, 1 -> 2: B=36/2K 63.1 -> 58.3 us, B=40
//   69.5 -> 66.7, MHA B=9/2K 63.1 -> 56.6); the 1-split kernel has since gained 11-12% (the row
//   boxes, stop 99's D = 128 band) and the balanced one has not: the H100 at 03a70b4
//   (NOTES.md "Stop 107", `--h100-pairs`, us, balanced 2 / 1 / 3 / spread 4; cuDNN): B=36/2K
//   59.6 / 56.2 / 61.5 / 55.8 (53.4), B=40/2K 68.9 / 61.6 / 66.7 / 61.0 (59.3), B=42/2K 71.1 /
//   63.7 / 69.1 / 65.6, B=44/2K 71.9 / 66.5 / 71.8 / 68.0, B=40/4K 123.6 / 116.1 / 121.6 / 115.9,
//   B=40/8K 235.2 / 227.3 / 232.7 / 227.5, B=44/8K 255.3 / 248.6 / 249.8 / 253.6, MHA B=10/2K
//   65.7 / 59.9 / 64.2 / 59.4: 1 split ahead of the balanced 2 on all 16 rows of the band
//   (2-11%), within 0.6 us of the spread tail where that leads;
// - contiguous: 2 splits at 2-2.7 blocks per SM, run as the balanced schedule at two
//   blocks per SM (decode_streamk_blocks_per_sm; v33, against 1 split and v31's 3 even
//   splits: B=34/2K 59.1 / 54.8 -> 54.1, B=36 61.1 / 58.0 -> 55.8, B=40 64.6 / 62.8 ->
//   61.3, B=44 67.6 / 67.9 -> 66.0, B=36/4K 116.7 / 106.7 -> 104.4, B=44/4K 129.3 / 127.4
//   -> 125.9, MHA B=9/2K 60.5 / 56.6 -> 54.9; at 2.91, B=48, 70.7 -> 72.3). Off HBM3e units
//   of one row tile take v31's 3 even splits again below 8192 keys (the H100 at 5cd2324,
//   NOTES.md "Stop 107", `--h100-bands-next`, us, balanced 2 / 3 (cuDNN): B=34 2K 56.3 / 54.3
//   (51.8), 4K 102.8 / 100.1; B=37/2K 61.0 / 58.6; B=40 2K 64.6 / 62.7 (60.0), 4K 118.8 /
//   116.2; B=42 2K 69.6 / 64.9, 4K 125.8 / 121.6; B=44 2K 68.2 / 67.4, 4K 127.7 / 127.6; MHA
//   B=9/2K 57.0 / 56.0), the balanced 2 from there (8K level: B=35 198.7 / 198.5, B=40 225.4 /
//   225.3; 16K B=37 408.2 / 415.1, B=40 438.7 / 441.1);
// - paged without head pairs (Nq > 1, odd KV head counts, more than 8 query heads per KV
//   head): 3 even splits at 2.1-2.45 (v32, block 16: Nq 2 GQA 32/8 B=36/2K 64.0 -> 61.6,
//   B=36/4K 126.5 -> 115.9; GQA 28/7 B=41/2K 63.5 -> 61.2, B=45 68.2 -> 66.1; at 2.06-2.07,
//   B=34 Nq 2 and 28/7 B=39, 3 splits lose 55.7 -> 58.2). The balanced schedule loses
//   there (v33: B=45 66.0 -> 73.9).
// On HBM3e parts paged head pairs in that band take 1 split below 8192 keys, 3 from there: the
// balanced 2 splits lost to both (NOTES.md "Stop 86", GQA 32/8 block 16, us, 2 balanced / 1 / 3
// splits: B=36/2K 48.8 / 42.4 / 47.0, B=40/2K 56.1 / 45.4 / 50.7, B=44/4K 100.1 / 90.5 / 94.6,
// B=40/6K 132.9 / 122.9 / 124.8, B=36/8K 154.4 / 150.6 / 150.0, B=40/8K 172.3 / 162.4 / 162.9,
// B=36/16K 294.1 / 294.7 / 285.0, B=40/16K 328.0 / 318.1 / 314.3; MHA B=9/2K 45.9 / 41.2 / 44.1,
// B=9/4K 80.4 / 76.6 / 77.1, B=9/8K 150.2 / 147.7 / 142.8, B=11/8K 181.3 / 171.9 / 170.7,
// B=9/16K 291.0 / 291.0 / 278.4). Below 8192 keys the band's pairs run the spread tail instead of
// 1 split (decode_pairs_spread_pieces).
// On HBM3e parts contiguous units that are two 16-row tiles of one KV head (`two_tile_rows`:
// 17-32 query rows; both read the KV head's keys) take 1 split in that band: even 2 lost on
// all 16 rows measured (NOTES.md "Stop 89", `--wide-mid`, GQA 32/8 Nq 5, 2 / 1 split, us: B=17
// (2.06 tiles per SM) 2K 39.0 / 31.0, B=18 2K 40.5 / 31.0, B=20 2K 39.2 / 31.7, 4K 66.2 / 57.9,
// B=22 (2.67) 2K 42.2 / 33.6, 16K 247.8 / 239.0); from 4096 keys two row tiles per block lead
// both (decode_wide_rows_d64_d96_splits, asked first).
constexpr int kPairBandLongKeys = 8192;
static_assert(kPairBandLongKeys == kSplitRuleLengthEdges[3], "the HBM3e pair band's length is in the edge list");
// Paged head pairs of head_dim 64 (the D = 128 kernel) on HBM3e parts in their band (past 1.06
// pairs per SM) from 2048 to kPairBandLongKeys keys: the spread tail's pieces over the pair units
// (decode_spread_tail_pieces at head_dim 128: to 1.34 pairs per SM, 3-8 pieces), or 0. The rule
// below and the launcher (head pairs' spread tail) both ask it. H200, graph replays, cold L2, GQA 32/8
// block 16, us, 1 split -> the pieces (NOTES.md "Stop 88", `--pair-depth`; cuDNN in brackets):
// B=40/2K 45.7 -> 43.6 (4; 42.1), B=40/4K 84.6 -> 81.7 (4; 79.2), B=44/2K 49.0 -> 47.7 (3; 45.9),
// B=36/4K 78.4 -> 77.1 at 4 pieces (72.5). From 8192 keys the 3 even splits stay ahead (B=40/16K
// 312.2 against 322.2 at 3 pieces, 334.0 at 4).
// The paged head pairs' band: 1.06-1.35 pairs per SM.
constexpr bool decode_d64_pair_band(int64_t pair_units, int64_t sms) {
  return 100 * pair_units > 106 * sms && 20 * pair_units <= 27 * sms;
}
inline int decode_pairs_spread_pieces(bool paged, int64_t pair_units, int64_t sms, int64_t max_kv_len, bool hbm3e) {
  if (!hbm3e || max_kv_len < kPartialWaveMinKeys || max_kv_len >= kPairBandLongKeys ||
      !decode_d64_pair_band(pair_units, sms))
    return 0;
  return decode_spread_tail_pieces(128, paged, pair_units, sms, max_kv_len, /*hbm3e=*/true, 0);
}
inline int decode_d64_tail_splits(bool paged, bool pairs, int64_t base, int64_t sms, int64_t max_kv_len, bool hbm3e,
                                  bool two_tile_rows) {
  if (max_kv_len < kPartialWaveMinKeys) return 1;
  if (paged && pairs) {
    if (!hbm3e || !decode_d64_pair_band(base / 2, sms)) return 1;
    if (max_kv_len >= kPairBandLongKeys) return 3;
    const int pieces = decode_pairs_spread_pieces(paged, base / 2, sms, max_kv_len, hbm3e);
    return pieces > 0 ? pieces : 1;
  }
  if (!paged) {
    if (base <= 2 * sms || 10 * base > 27 * sms || (hbm3e && two_tile_rows)) return 1;
    return !hbm3e && !two_tile_rows && max_kv_len < kPartialWaveFullWaveKeys ? 3 : 2;
  }
  return 10 * base > 21 * sms && 20 * base <= 49 * sms ? 3 : 1;
}

// Paged 16-bit head dims 64 and 96 (exactly: narrower rows on their kernels are not
// measured), one new token in units of at most kNarrowMaxRows rows, on HBM3e Hopper parts, at
// most one unit per SM (NOTES.md "Stop 77", "Stop 78"): 2 SMs // units splits (about two
// blocks per SM, 1.35-2) where each holds kSmallGridShortSplitKeys keys or more and they are at
// most kSmallGridShortSplitsMax, else min(2 SMs // units, splits of kSmallGridSplitMinKeys keys);
// taken where that is more than the generic count (SMs // units, at most one block per SM).
// They run on 3 (D = 64) / 2 (D = 96) TMA stages (decode_tma_stages_for). One block per SM
// leaves a paged tile's strided 128-192-byte head rows short of bytes in flight; a second
// block per SM hides one block's per-tile steps behind the other's loads. H200, graph
// replays, cold L2, GQA 32/8 block 16, us, the generic count -> this one (c514c2b), cuDNN in
// brackets: D = 64 B=16/4K 41.6 -> 35.7 (37.6), B=13/4K 41.3 -> 32.3 (34.9), B=16/16K 154.9
// -> 124.0 (135.3), B=9/8K 78.7 -> 41.2 (62.0), B=3/16K 35.8 -> 29.1 (29.0), MHA B=4/4K 41.2
// -> 34.9 (37.3); D = 96 B=16/4K 59.2 -> 51.3 (54.1), B=13/4K 59.0 -> 45.9 (48.4), B=16/16K
// 224.2 -> 186.2 (188.0), B=9/8K 113.9 -> 60.0 (86.7), B=3/16K 50.0 -> 41.1 (44.7), MHA
// B=4/4K 58.6 -> 50.0 (53.9). Rounding 2 SMs / units up lost (`--small-d64-d96-bands`,
// `--small-d64-d96-mid`: D = 64 B=12/4K 3 splits 38.7 against 31.2 at 2, B=7/4K 5 splits
// 22.6 against 20.4 at 4, B=3/8K 12 splits 22.1 against 17.8 at 10). The short splits (512
// keys or more, stop 78) against stop 77's 1024-key cap (`--small-d64-d96-mid-confirm`,
// 5c328fe): D = 64 B=5/4K 6 splits 15.6 against 17.7 (cuDNN 16.4), B=4/4K 8 13.6 / 14.5
// (13.8), B=6/4K 5 17.4 / 19.1 (18.1), B=10/2K 3 15.5 / 17.7 (18.5), B=8/2K 4 13.4 / 14.5
// (13.7), B=3/8K 11 17.9 / 19.1 (17.9), B=2/8K 16 14.2 / 14.7 (13.8); D = 96 B=5/4K 21.0 /
// 24.3 (23.4), B=4/4K 18.0 / 19.3 (19.7), B=10/2K 21.0 / 24.2 (25.5), B=3/8K 24.3 / 26.2
// (25.9), B=2/8K 18.7 / 19.4 (19.6); 1024-key tables mixed (2 splits: D = 64 B=16/1K 13.4 /
// 13.0, 3% slower, B=12/1K 12.8 / 12.7; D = 96 17.7 / 17.6, 16.6 / 17.2). Where 2 SMs // units splits
// would hold under 512 keys, splits of 512 lost to the generic count (B=3/4K 8 splits: D = 64
// 13.1 against 12.8 at 5, D = 96 16.7 / 16.5; B=2/4K 12 splits of 384 keys 11.8 against 10.0
// at 8), and past 16 splits to 1024-key ones (B=1/16K 32 splits: D = 64 15.6 against 15.3 at
// 16; B=1/32K 33 splits, the 33rd empty: 23.9 / 23.3, D = 96 32.4 / 31.7). The uncut count
// only grows with the length (it jumps from the 1024-key count to 2 SMs // units at 512 x that
// many keys): its first lengths depend on the batch and need no entry in kSplitRuleLengthEdges.
// Contiguous caches keep one block per SM: 64 consecutive keys per tile already read 90% of
// copy at D = 64 (B=16/4K 34.8 us; 2 splits 35.8).
// Nq 2-4 new tokens in one row tile (decode_small_grid_spec_short_splits_max, stop 79) take the
// same count, with `short_splits_max` 8 at D = 96.
// The count is cut back to the splits that hold keys (split_count_holding_keys): 33
// splits of 40960 keys leave the 33rd empty, and B=1/GQA 32/8 ran 32 faster (stop 79, us:
// D = 64 40K 27.3 against 26.6, 48K 31.0 / 30.3; D = 96 37.4 / 36.9, 42.8 / 42.3). The cut count
// is not monotone in the length, the uncut one is, and the cut one equals it at
// decode_small_grid_top_length (decode_attention_workspace_floats_upto reads that length).
// Returns the count, or 0.
constexpr int64_t kSmallGridSplitMinKeys = 1024;
constexpr int64_t kSmallGridShortSplitKeys = 512;
constexpr int64_t kSmallGridShortSplitsMax = 16;
// The uncut count (0: none), and the keys a split of it holds at least.
struct SmallGridSplits {
  int64_t splits, min_keys;
};
inline SmallGridSplits decode_small_grid_uncut_splits(bool paged, int64_t units, int64_t sms, int64_t max_kv_len,
                                                      int64_t short_splits_max) {
  if (!paged || units <= 0 || sms <= 0 || units > sms) return {0, 0};
  const int64_t two_blocks = 2 * sms / units;
  if (two_blocks <= short_splits_max && max_kv_len / kSmallGridShortSplitKeys >= two_blocks)
    return {two_blocks, kSmallGridShortSplitKeys};
  return {std::min(two_blocks, max_kv_len / kSmallGridSplitMinKeys), kSmallGridSplitMinKeys};
}
inline int decode_small_grid_two_blocks_splits(bool paged, int64_t units, int64_t sms, int64_t max_kv_len,
                                               int64_t short_splits_max = kSmallGridShortSplitsMax) {
  const int64_t splits = decode_small_grid_uncut_splits(paged, units, sms, max_kv_len, short_splits_max).splits;
  // (past this, units > 0 and 2 <= splits <= 2 SMs, so max_kv_len >= 1024 and the casts hold)
  if (splits == 0 || splits <= sms / units) return 0;
  const int held = split_count_holding_keys<kTileTokens>(static_cast<int>(splits), static_cast<int>(max_kv_len));
  return held > sms / units ? held : 0;
}
// Off HBM3e Hopper parts (the H100), one new token in units of at most kNarrowMaxRows rows at
// 16-bit head_dim 64 and 96, and paged 128 (exactly) keep the generic count, one block per SM at most,
// but above half a unit per SM, where it is 1 split and leaves up to half the SMs idle: to
// 2/3 of a unit per SM they take 2 SMs // units splits (3; two blocks per SM or fewer, cut
// back to the splits that hold keys) on their own depths (not the HBM3e 3 / 2 stages): paged
// D = 64 / 96 and contiguous D = 96 from 2048 keys (kPartialWaveMinKeys; shorter tables not
// measured), contiguous D = 64 and paged D = 128 from 8192 (kPartialWaveFullWaveKeys); paged
// D = 128 takes 2, not 3, to 5/8 of a unit per SM (stop 109).
// Contiguous D = 128 keeps 1 split here: its small grids run TMA 3 since stop 108
// (decode_tma_stages_for), whose one block a unit leads every split count (below); the splits
// had led the cp.async kernel's one block (the figures at 1 split below are that kernel's).
// Below half a unit per SM it has its own rule (decode_small_grid_contiguous_d128_splits).
// The H100 (NOTES.md "Stop 107" and "Stop 108", GQA 32/8 block 16, us, 1 / 2 / 3 splits (cuDNN)):
// - paged D = 64 / 96 (`--h100-small-grids`, a4803ea): B=9/8K D = 64 75.3 / - / 56.6 (63.1),
//   D = 96 108.5 / - / 82.4 (87.7); beyond 2/3 it gains little or loses (2 splits: B=12/4K
//   D = 64 40.5 / 40.9, D = 96 57.4 / 55.7; B=13/4K 41.7 / 43.5, 58.7 / 61.8; B=16/4K 48.4 /
//   49.8, 69.5 / 74.7), and below half a unit per SM, where the generic count is already one
//   block per SM, the doubled count loses at D = 96 (B=5/4K 3 / 6 splits 26.7 / 28.3, B=3/16K
//   5 / 11 55.3 / 57.9) and gains 1-2% at D = 64 (19.9 / 19.6, 39.3 / 38.7);
// - contiguous D = 96 (`--h100-half-wave-next`, fc81a2b): B=9 2K 27.1 / 26.2 / 25.8 (26.6), 4K
//   49.7 / 45.6 / 45.5 (48.1), 16K 186.1 / 159.0 / 161.9 (174.1); B=10 2K 27.5 / 27.7 / 26.7,
//   16K 186.6 / 181.4 / 175.5; B=11 2K 28.5 / 30.3 / 28.5, 4K 52.5 / 54.1 / 51.0, 16K 197.1 /
//   206.1 / 185.9; B=10/8K (stop 107) 96.1 / - / 90.3;
// - contiguous D = 64: from 8192 keys (B=9/16K 115.6 / 106.1 / 105.1, B=10/16K 118.4 / 123.0 /
//   113.2, B=11/16K 127.7 / 129.9 / 124.6; B=10/8K 62.5 / - / 60.2), not below (2K: B=9 18.1 /
//   19.2 / 19.0, B=11 19.8 / 22.3 / 20.3; 4K: B=9 32.2 / 31.7 / 31.3, B=11 34.9 / 37.8 / 35.4);
// - contiguous D = 128: B=9 4K 81.3 / 55.6 / 56.8 (54.3), 16K 313.7 / 205.3 / 207.8 (208.0);
//   B=11 4K 81.7 / 68.6 / 65.4 (63.9), 16K 314.5 / 252.0 / 242.8 (244.7); 2K (326e717) B=9
//   42.1 / 31.4 / 32.1 (29.2), B=10 43.9 / 34.6 / 33.9, B=11 42.4 / 37.9 / 35.9; B=12 (0.73)
//   4K 80.8 / 73.8 / 76.6 (68.6), 16K 310.9 / 275.1 / 288.2 (262.1); B=13 (0.79) 4K 82.9 /
//   78.7 / 80.8, 16K 312.8 / 293.1 / 301.0; not at B=14 (0.85: 4K 82.1 / 84.4 / 85.7, 16K
//   315.9 / 318.0 / 327.2); on TMA 3 (828bb2f, `--h100-contig-tma`) 1 split leads: B=9 2K 28.3
//   / 31.7 / 32.3 (29.5), 16K 202.2 / 203.8 / 207.1 (207.0); B=11 2K 33.4 / 37.8 / 35.7, 16K
//   241.5 / 253.2 / 242.5; B=12 2K 36.2 / 40.6 / 42.5, 16K 266.1 / 276.3 / 289.4; B=10/4K 57.2
//   / 61.9 / 61.6; below half a unit per SM the generic count (2) or 1 there, 2 SMs // units
//   only at 16K (B=6 (0.36) 2K 22.4 / 22.5 / 23.6, 5 splits 22.9; 16K 148.2 / 143.5 / 137.8,
//   139.2; B=7/4K 43.7 / 44.6 / 45.3, 4: 45.6; B=8 2K 25.8 / 26.6, 4: 27.5, 16K 179.8 / 177.2,
//   4: 178.5);
// - paged D = 128: from 8192 keys (B=9/16K 221.5 / 206.3 / 209.4 (206.8), B=11/16K 249.9 /
//   248.7 / 245.4), not at 4096 (B=9 59.1 / 57.4 / 58.1, B=11 65.2 / 67.5 / 66.2); 2 splits, not
//   3, to 5/8 of a unit per SM (stop 109, `--h100-d128-left`, dd6060a: B=9 (0.55) 8K 114.1 /
//   103.2 / 104.7 (100.2), 16K 219.6 / 199.4 / 203.2 (197.2); B=10 (0.61) 8K 112.9 / 113.6 /
//   113.7, 16K 222.2 / 219.8 / 220.8; B=11 (0.67) 8K 122.0 / 125.0 / 122.3, 16K 239.9 / 240.2 /
//   237.9).
// Returns the count, or 0.
inline int decode_small_grid_half_wave_splits(int head_dim, int seq_len_q, int rows_per_kv_head, bool paged,
                                              int64_t units, int64_t sms, int64_t max_kv_len) {
  const int64_t min_keys = head_dim == 96    ? kPartialWaveMinKeys
                           : head_dim == 64  ? (paged ? kPartialWaveMinKeys : kPartialWaveFullWaveKeys)
                           : head_dim == 128 && paged ? kPartialWaveFullWaveKeys
                                                      : 0;
  if (min_keys == 0 || seq_len_q != 1 || rows_per_kv_head <= 0 || rows_per_kv_head > kNarrowMaxRows ||
      2 * units <= sms || 3 * units > 2 * sms || max_kv_len < min_keys || device_cc_major() != 9 ||
      device_is_hopper_hbm3e())
    return 0;
  // (past this, sms / 2 < units <= 2 SMs / 3, so 2 SMs // units = 3, and max_kv_len >= 2048 keys
  // holds them; split_count_holding_keys takes an int length: longer ones hold 3 too)
  const int splits = head_dim == 128 && 8 * units <= 5 * sms ? 2 : static_cast<int>(2 * sms / units);
  return split_count_holding_keys<kTileTokens>(splits, static_cast<int>(std::min<int64_t>(max_kv_len, 1 << 30)));
}
// Off HBM3e Hopper parts (the H100), contiguous 16-bit 128-column rows (head_dim exactly 128),
// one new token in units of at most kNarrowMaxRows rows, below half a unit per SM, where the
// generic count is SMs // units and the small grid runs TMA 3 (decode_tma_stages_for): past 0.4
// units per SM 1 split (one block a unit; 2 SMs // units or more blocks add merge work, not
// bandwidth), from a third to 0.4 and from 8192 keys 3 splits (SMs // units rounded up: two
// blocks on a few SMs) for units of 2 rows or more (GQA; one-row units, MHA, not measured there).
// The H100 (stop 109, `--h100-d128-left`, dd6060a, GQA 32/8, us, 1 / 2 (the generic count) / 3
// splits, 2 SMs // units (cuDNN)):
// - B=7 (0.42) 2K 23.2 / 24.4 / 26.3, 8K 81.4 / 82.3 / 82.2, 16K 156.5 / 160.2 / 160.1
//   (160.1); stop 108, 4K 43.7 / 44.6 / 45.3;
// - B=8 (0.48) 2K 25.5 / 26.4 / 29.2 (28.8), 8K 89.8 / 89.2 / 94.5, 16K 172.9 / 173.6 / 181.1;
//   stop 108, 2K 25.8 / 26.6, 16K 179.8 / 177.2;
// - B=6 (0.36) 8K 74.6 / 73.0 / 71.1, 5: 70.9 (73.8); 16K 142.8 / 140.5 / 135.1, 5: 135.8
//   (139.4); stop 108 16K 148.2 / 143.5 / 137.8; not at 2K (21.8 / 22.1 / 23.2; stop 108
//   22.4 / 22.5 / 23.6);
// - below a third the generic count leads (B=5 (0.30, 3 splits) 16K 112.2, 2: 131.2, 6:
//   113.7; B=4 (4) 16K 90.2, 2: 90.8, 8: 90.3; B=3 (5) 16K 70.0, 11: 70.0).
// `--h100-d128-left-confirm` (a6f05c9): GQA 32/4 (8-row units) B=13 (0.39) 2K 23.1 / 23.9 (the
// generic 2) / 25.5, 16K 150.1 / 150.3 / 146.9, 5: 144.7 (148.5); B=15 (0.45) 2K 24.9 / 26.0 /
// 28.6, 16K 164.9 / 167.3 / 171.7 (168.1); MHA B=2 (0.48) 2K 25.1 / 26.1 / 28.4 (28.3), 16K
// 172.6 / 172.9 / 180.2; GQA 32/8 B=6 below 8192 keys, 4K, level (39.0 / 39.2 / 38.9, 5: 38.5).
// Paged caches keep the generic 2: one block a unit reads far slower there (1 / 2 splits: B=7 2K
// 30.3 / 24.2, 16K 219.9 / 154.8; B=8 16K 219.8 / 174.6).
// Returns the count, or 0 where the rule does not apply.
inline int decode_small_grid_contiguous_d128_splits(int head_dim, int seq_len_q, int rows_per_kv_head, bool paged,
                                                    int64_t units, int64_t sms, int64_t max_kv_len) {
  if (paged || head_dim != 128 || seq_len_q != 1 || rows_per_kv_head < 1 || rows_per_kv_head > kNarrowMaxRows ||
      3 * units <= sms || 2 * units > sms || device_cc_major() != 9 || device_is_hopper_hbm3e())
    return 0;
  if (5 * units > 2 * sms) return 1;
  return max_kv_len >= kPartialWaveFullWaveKeys && rows_per_kv_head >= 2 ? 3 : 0;
}
// The calls stop 79 measured for the same split count (decode_small_grid_two_blocks_splits;
// their TMA depths stay the ones measured there, not the small-grid rule's): 16-bit head_dim 64
// or 96, Nq 2-4 new tokens in units of one row tile (GQA 32/8 measured: 8 and 16 rows), on
// HBM3e Hopper parts; not D = 64 units of more than kNarrowMaxRows rows where two blocks per SM
// are fewer than 3 splits (GQA 32/8 Nq 4, us, 1 / 2 splits: B=16/4K 44.1 / 46.7, B=12/2K 24.0 /
// 24.0; at 80 units, 3 splits, it gains: B=10/4K 43.6 -> 34.1, 2 splits 32.2). (One token's 16-row
// units keep the generic count: stop 77 measured only up to 8 rows there.) Returns the
// short-splits cap (kSmallGridShortSplitsMax at D = 64, 8 at D = 96: B=2/8K Nq 2 / 4 at 16 splits
// of 512 keys 22.3 / 25.8 against 20.3 / 21.0 at the generic 8), or 0 where the rule does not
// apply.
constexpr int64_t kSmallGridSpecShortSplitsMaxD96 = 8;
inline int64_t decode_small_grid_spec_short_splits_max(int head_dim, int seq_len_q, int rows_per_kv_head,
                                                       int64_t units, int64_t sms) {
  if ((head_dim != 64 && head_dim != 96) || seq_len_q < 2 || seq_len_q > 4 || rows_per_kv_head <= 0 ||
      rows_per_kv_head > kRowsPerBlock || !device_is_hopper_hbm3e())
    return 0;
  if (head_dim == 64 && rows_per_kv_head > kNarrowMaxRows && 3 * units > 2 * sms) return 0;
  return head_dim == 64 ? kSmallGridShortSplitsMax : kSmallGridSpecShortSplitsMaxD96;
}
// The shortest length whose cut count is the uncut count at max_kv_len, which no length up to
// max_kv_len passes: that many splits of their minimum keys (a whole number of tiles each, so
// none is empty); max_kv_len where there is no such count.
inline int64_t decode_small_grid_top_length(int64_t units, int64_t sms, int64_t max_kv_len,
                                            int64_t short_splits_max) {
  const SmallGridSplits top = decode_small_grid_uncut_splits(true, units, sms, max_kv_len, short_splits_max);
  return top.splits > 1 ? std::min(max_kv_len, top.splits * top.min_keys) : max_kv_len;
}

// Head pairs (NOTES.md v9, v20, v23, v24): a paged cache with D = 64 and an even number of
// KV heads can run the D = 128 kernels over pairs of adjacent KV heads (16-bit D = 72-80:
// the D = 160 kernels, 88-96 the D = 256 ones, over 144-192-column rows; rules below). A
// token's two head rows are one row twice as wide in the paged layout ([blocks, block_size, Hkv, D]), so
// each block reads 256-byte rows (16-bit) or 128-byte rows (FP8) instead of half-width
// rows at the token stride. Used on sm_90 wherever one split of the grid has more blocks
// than SMs (16-bit: 1.25 times the SMs, v25), for both cache types, MHA or GQA:
//  - 16-bit (v23, the D = 128 kernels on TMA beyond one block per SM; graph replays):
//    GQA 32/8 B=20/2K 37.0 -> 34.2 us, B=64/2K 96.8 -> 92.4, B=128/2K 190.8 -> 181.9,
//    B=64/4K 195.0 -> 181.5; MHA B=5/2K 36.6 -> 32.9, B=16/2K 95.5 -> 90.9, B=32/2K 188.8
//    -> 180.0. (On the cp.async D = 128 kernel, v9, pairs had gained only on MHA grids of
//    >= 8 blocks per SM.)
//  - FP8 (v20): B=64/2K/GQA 32/8 60.6 -> 52.1 us, B=32/2K/MHA 109.4 -> 99.5; B=17-24/2K/GQA
//    at 2 splits 25.0-29.1 -> 23.1-26.0 (decode_attention_num_splits).
// At most one block per SM, pairs would halve a grid that already leaves SMs short: the
// 16-bit heuristic leaves such grids unpaired (B=16/2K/GQA 27.4 -> 32.9 paired, v9), FP8
// splits them to about two unpaired blocks per SM (B=16/2K at 2 splits 18.5 -> 19.4 paired,
// B=1/16K at 32 14.2 -> 14.9; B=16/8K gains 56.8 -> 54.6; unsplit B=16/2K 23.1 -> 26.4).
// The split count stays the one sized for the real grid: decode_d64_tail_splits gives the
// paired and unpaired grids their own counts.
// Keys a split of head pairs of head dims 72-80 reads at least below 0.35 pairs per SM
// (decode_packs_head_pairs).
constexpr int kPairSplitMinKeys = 512;

inline bool decode_packs_head_pairs(const DecodeAttentionArgs& a) {
  const int knob = decode_dev_pack();  // dev: 0 never, 2 wherever legal, else the rule
  // A pair's query rows (both heads' groups) must fit one row tile: a second tile would
  // read the pair's rows again.
  // 16-bit head dims 72-96 pair on the D = 160 and 256 kernels (decode_pair_kernel_head_dim;
  // the latter needs 137 KB of shared memory, not on 99-KB parts) over 144-192-column rows.
  const bool wide_pair = a.head_dim > 64 && a.head_dim <= 96 && !a.kv_fp8 && decode_head_dim_fits(256);
  const bool legal = a.paged && a.num_kv_heads % 2 == 0 && a.seq_len_q == 1 &&
                     2 * (a.num_q_heads / a.num_kv_heads) <= kRowsPerBlock && (a.head_dim == 64 || wide_pair);
  if (!legal || knob == 0) return false;
  if (knob == 2) return true;
  if (device_cc_major() < 9) return false;
  const int64_t per_split = static_cast<int64_t>(a.batch) * a.num_kv_heads;  // blocks of one split
  const int64_t sms = device_sm_count();
  // D = 64: FP8 beyond one block per SM; 16-bit beyond 1.25 (v25: up to there, 68-80
  // pairs leave SMs idle: GQA 32:8 B=17/2K 33.5 us paired, 29.1 unpaired on 4 stages,
  // B=20 33.9 / 33.1; MHA B=5 32.6 / 32.4; B=24 38.3 / 38.0-40.3).
  if (a.head_dim == 64) return a.kv_fp8 ? per_split > sms : 4 * per_split > 5 * sms;
  // 16-bit head dims 72-88 on the D = 256 kernel (NOTES.md "Head pairs at head_dim 72-88";
  // 88 still runs there, 72-80 now below), measured on the H200
  // only, whose unpaired 160-byte D = 80 rows (a 64-byte DRAM atom shared with the next
  // head's row) read 61-75% of copy at large grids where the H100 reads 92%: pairs from 1.6
  // pairs per SM (B=64/2K/MHA 449 -> 362 us, B=56/2K/GQA 32/8 113 -> 91), and at 0.95-1.12
  // pairs per SM where the grid runs 1 split up to one pair per SM and 2 beyond (the
  // balanced schedule: B=34/2K/GQA 71.1 -> 66.5, B=32/4K 110.5 -> 89.3, MHA B=9/2K 70.7 ->
  // 65.8). Between, the pairs' partial wave loses (B=40-50 at 2K-4K, 8-15%); below 0.8 pairs
  // per SM the idle SMs do (B=20/2K 38.6 -> 45.6).
  // At 88, block sizes below 8 (no TMA map: the pairs' cp.async D = 256 kernel read
  // B=64/2K/MHA in 734 us) stay unpaired; 72-80 pair there too, on the D = 160 cp.async kernel
  // (stop 74, unpaired -> paired, us: block 4 MHA B=64/2K 444.9 -> 345.9, GQA B=20/2K 57.0 ->
  // 47.2; block 1 GQA B=40/4K 171.5 -> 141.6).
  // Head dims 72-80 pair on the D = 160 kernel (decode_pair_kernel_head_dim; NOTES.md "Stop
  // 74") from 0.35 pairs per SM: there and in every band the D = 256 kernel lost, pairs at
  // decode_attention_num_splits' count (1 split from 0.8 pairs per SM, 2 below) beat the
  // unpaired rules (H200, graph replays, cold L2, GQA 32/8 unless marked, us: B=16/2K 31.8 ->
  // 27.7, B=20/4K 71.4 -> 61.6, B=28/4K 107.5 -> 80.0, B=34/2K 70.2 -> 53.1, B=40/8K 321.7 ->
  // 216.3, B=48/8K 322.1 -> 269.6, B=50/2K 86.3 -> 70.8; MHA B=5/2K 38.3 -> 33.5, B=9/2K 70.7
  // -> 53.7, B=12/2K 85.4 -> 67.8; 0.36-0.42 pairs per SM: GQA B=14/8K 116.5 -> 82.4, MHA
  // B=3/2K 31.5 -> 24.6). Below 0.35 pairs per SM they pair where the call's splits make
  // the pairs' grid 80-100% of one wave of splits of 512 keys or more (of the keys read),
  // as decode_attention_num_splits' count proposes (stop 75, 28dd423, unpaired -> the
  // automatic call, us, cuDNN in brackets: GQA B=1/32K 34.3 -> 29.6 (28.4), B=2/16K 33.8 ->
  // 28.2 (28.1), B=6/8K 61.7 -> 38.3 (38.3), B=10/8K 117.2 -> 58.3 (86.5), B=11/4K 60.3 ->
  // 36.1 (45.7), B=7/4K (4 splits: 85% of a wave) 33.4 -> 26.1 (25.3), B=8/2K 19.3 -> 17.8
  // (17.3), B=1/16K 20.2 -> 19.7 (18.2); MHA B=1/16K 62.1 -> 45.5 (46.1), B=1/4K 19.3 -> 16.3
  // (17.3); block 4 B=4/8K 51.8 -> 42.1, but B=1/16K 29.3 -> 31.5). Splits of 256 keys lost
  // (4d9efb9, which paired them: B=1/4K 9.0 -> 11.7, B=1/8K 12.7 -> 14.4, B=2/4K 12.1 ->
  // 13.1), as did half a wave (B=1/16K at 16 splits: 26.5).
  if (a.head_dim != 96) {
    if (!device_is_hopper_hbm3e()) return false;
    const int64_t paired = per_split / 2;
    if (a.head_dim <= 80) {
      if (20 * paired >= 7 * sms) return true;
      const int64_t grid = paired * a.num_splits;
      return 5 * grid >= 4 * sms && grid <= sms &&
             split_keys<kTileTokens>(a.num_splits, decode_read_kv_len(a)) >= kPairSplitMinKeys;
    }
    if (a.block_size < 8) return false;
    const bool one_wave =
        100 * paired >= 95 * sms && 100 * paired <= 112 * sms && a.num_splits == (paired > sms ? 2 : 1);
    return one_wave || 5 * paired >= 8 * sms;
  }
  // D = 96 (16-bit; v24): pairs run the D = 256 kernel, one block per SM. Beyond 1.5
  // unpaired blocks per SM, where the paired grid's last wave is at least 80% full (or
  // there are 3 waves or more): B=64/8K/GQA 32:8 581.8 -> 564.5 us, B=32/2K 75.8 -> 74.2,
  // MHA B=16/2K 145.0 -> 142.0, B=64/4K 1120.9 -> 1093.3; B=48/2K (192 pairs: 1.45 waves)
  // 118.8 against 111.0 unpaired on TMA 3 stages, B=17-24 (<= 1.5 per SM) 46-61 against
  // 42-55 unpaired on TMA.
  const int64_t paired = per_split / 2, last = paired % sms;
  return 2 * per_split > 3 * sms && (last == 0 || 5 * last >= 4 * sms || paired >= 3 * sms);
}

// The kernel width that runs head pairs (decode_packs_head_pairs) of `pair_cols` columns (2 x
// the head dim): 128 for head dim 64, 160 for 16-bit 72-80, 256 for 88-96. The D = 160 kernel
// reads the same bytes as the D = 256 one did for 72-80 over a 160-column tile: 40 KB a stage,
// not 64, 37% less math, and at 2 stages two blocks per SM (decode_tma_stages_for). H200,
// graph replays, cold L2, paged block 16, D = 256 (3 stages) -> D = 160 (2), us: D = 80 MHA
// B=64/2K 366.3 -> 318.5 (cuDNN 315.6), GQA 32/8 B=64/2K 95.5 -> 86.6, B=56/4K 176.6 -> 152.9,
// MHA B=16/2K 92.4 -> 85.1, D = 72 MHA B=64/2K 361.4 -> 319.3 (NOTES.md "Stop 74").
inline int decode_pair_kernel_head_dim(int pair_cols) {
  if (pair_cols <= 128) return 128;
  const int knob = decode_dev_pair_kernel();
  return pair_cols > 160 || knob == 256 ? 256 : 160;
}

// The launch parameters of both MLA decode kernels (mla_decode_attention.cu: mma.sync;
// mla_decode_sm90.cuh: wgmma) and of their combine kernel, resolved from MlaDecodeArgs.
struct MlaKernelParams {
  const void* q;
  void* out;
  const void* kv;
  const int* block_tables;
  const int* seq_lens;
  float* lse;
  float* partial_o;       // [splits, B * Hq, 512]
  float2* partial_state;  // [splits, B * Hq] (max, sum), log2 domain
  int64_t q_sb, q_sh, o_sb, o_sh, table_stride;
  int64_t total_rows;  // B * Hq
  int num_q_heads, row_tiles, num_splits;
  int num_blocks, block_size, bs_mask, log2_bs, capacity;
  float scale_log2;
};

// Attention kernel (+ merge when args.num_splits > 1) for one dtype, head dim and
// KV layout (paged block table or strided cache). pack_group > 0 (D = 128, 160 and 256:
// decode_runs_head_pairs): `args` describes head pairs (decode_packs_head_pairs), pack_group real query heads per real
// KV head. KVT: the caches' element type, T or __nv_fp8_e4m3 (args.kv_fp8, paged only).
template <typename T, int D, bool kPaged, typename KVT = T>
cudaError_t run_decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream, int pack_group = 0);

// Each instantiation is compiled once, in its own file (decode_attention_{dtype}_d{D}.cu,
// decode_attention_fp8kv_d{D}.cu). Without these declarations every file that sees the
// template's definition and calls it (decode_dispatch.cu) compiled all 69 kernels again,
// serially, in one translation unit.
#define CLO_DECLARE_DECODE(T, D)                                                                             \
  extern template cudaError_t run_decode_attention<T, D, true>(const DecodeAttentionArgs&, cudaStream_t, int);  \
  extern template cudaError_t run_decode_attention<T, D, false>(const DecodeAttentionArgs&, cudaStream_t, int); \
  extern template cudaError_t run_decode_attention<T, D, true, __nv_fp8_e4m3>(const DecodeAttentionArgs&,       \
                                                                              cudaStream_t, int);
CLO_DECLARE_DECODE(__half, 64)
CLO_DECLARE_DECODE(__half, 96)
CLO_DECLARE_DECODE(__half, 128)
CLO_DECLARE_DECODE(__half, 256)
CLO_DECLARE_DECODE(__nv_bfloat16, 64)
CLO_DECLARE_DECODE(__nv_bfloat16, 96)
CLO_DECLARE_DECODE(__nv_bfloat16, 128)
CLO_DECLARE_DECODE(__nv_bfloat16, 256)
#undef CLO_DECLARE_DECODE
// head pairs of 16-bit head dims 72-80 only (decode_pair_kernel_head_dim)
extern template cudaError_t run_decode_attention<__half, 160, true>(const DecodeAttentionArgs&, cudaStream_t, int);
extern template cudaError_t run_decode_attention<__nv_bfloat16, 160, true>(const DecodeAttentionArgs&, cudaStream_t,
                                                                           int);

}  // namespace cuda_llm_ops::decode
