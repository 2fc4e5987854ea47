// Dispatch of the decode attention launchers on (dtype, head_dim, layout), the
// split-count heuristic and the workspace size.
#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "decode/decode_attention.cuh"  // decode_cp_async_stages (constexpr smem plans only)
#include "decode/decode_internal.h"

namespace cuda_llm_ops::decode {

namespace {

template <typename F>
cudaError_t dispatch_head_dim(int head_dim, F&& body) {
  switch (decode_kernel_head_dim(head_dim)) {  // the kernel it runs on
    case 64: return body.template operator()<64>();
    case 96: return body.template operator()<96>();
    case 128: return body.template operator()<128>();
    case 256: return body.template operator()<256>();
    default: return cudaErrorInvalidValue;
  }
}

template <typename F>
cudaError_t dispatch_half_dtype(DType dtype, F&& body) {
  switch (dtype) {
    case DType::kFloat16: return body.template operator()<__half>();
    case DType::kBFloat16: return body.template operator()<__nv_bfloat16>();
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int decode_dev_kernel() {
  static bool dev_mode = std::getenv("CLO_DECODE_VARIANT") != nullptr;
  const int v = dev_knob("CLO_DECODE_VARIANT", dev_mode, kDecodeKernelAuto);
  return v == kDecodeKernelCpAsync || v == kDecodeKernelTma ? v : kDecodeKernelAuto;
}

int decode_dev_tma_stages() {
  static bool dev_mode = std::getenv("CLO_DECODE_TMA_STAGES") != nullptr;
  return dev_knob("CLO_DECODE_TMA_STAGES", dev_mode, 0);
}

#ifdef CLO_DEV_STAMPS
static unsigned long long* g_dev_stamps = nullptr;
unsigned long long* decode_dev_stamps() { return g_dev_stamps; }
void decode_dev_set_stamps(unsigned long long* p) { g_dev_stamps = p; }
#endif

int decode_dev_pack() {
  static bool dev_mode = std::getenv("CLO_DECODE_PACK") != nullptr;
  return dev_knob("CLO_DECODE_PACK", dev_mode, 1);
}

int decode_dev_pair_kernel() {
  static bool dev_mode = std::getenv("CLO_DECODE_PAIR_KERNEL") != nullptr;
  return dev_knob("CLO_DECODE_PAIR_KERNEL", dev_mode, 0);
}

int decode_dev_streamk_mode() {
  static bool dev_mode = std::getenv("CLO_DECODE_STREAMK") != nullptr;
  return dev_knob("CLO_DECODE_STREAMK", dev_mode, kDecodeStreamKByLength);
}

int decode_dev_spread() {
  static bool dev_mode = std::getenv("CLO_DECODE_SPREAD") != nullptr;
  return dev_knob("CLO_DECODE_SPREAD", dev_mode, kDecodeSpreadAuto);
}

int decode_dev_wide_rows() {
  static bool dev_mode = std::getenv("CLO_DECODE_WIDE_ROWS") != nullptr;
  return dev_knob("CLO_DECODE_WIDE_ROWS", dev_mode, kDecodeWideRowsAuto);
}

int decode_dev_merge_apart() {
  static bool dev_mode = std::getenv("CLO_DECODE_MERGE_APART") != nullptr;
  return dev_knob("CLO_DECODE_MERGE_APART", dev_mode, kDecodeMergeApartAuto);
}

int decode_dev_split_cluster() {
  static bool dev_mode = std::getenv("CLO_DECODE_SPLIT_CLUSTER") != nullptr;
  return dev_knob("CLO_DECODE_SPLIT_CLUSTER", dev_mode, kDecodeSplitClusterAuto);
}

int decode_dev_head_cluster() {
  static bool dev_mode = std::getenv("CLO_DECODE_HEAD_CLUSTER") != nullptr;
  return dev_knob("CLO_DECODE_HEAD_CLUSTER", dev_mode, -1);
}

int decode_dev_plane_boxes() {
  static bool dev_mode = std::getenv("CLO_DECODE_PLANE_BOXES") != nullptr;
  return dev_knob("CLO_DECODE_PLANE_BOXES", dev_mode, 1);
}

int decode_dev_narrow() {
  static bool dev_mode = std::getenv("CLO_DECODE_NARROW") != nullptr;
  return dev_knob("CLO_DECODE_NARROW", dev_mode, kDecodeNarrowAuto);
}

namespace {
__global__ void fill_split_counters(int* counters, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    counters[i] = kSplitCounterIdle;
}
}  // namespace

cudaError_t decode_workspace_init(float* workspace, int64_t workspace_floats, cudaStream_t stream) {
  const int64_t slots = decode_workspace_counter_slots(workspace_floats);
  if (slots == 0) return cudaSuccess;
  if (workspace == nullptr) return cudaErrorInvalidValue;
  const int blocks = static_cast<int>(std::min<int64_t>((slots + 255) / 256, 1024));
  fill_split_counters<<<blocks, 256, 0, stream>>>(reinterpret_cast<int*>(workspace + (workspace_floats - slots)),
                                                 slots);
  return cudaGetLastError();
}

bool decode_head_dim_fits(int head_dim, bool fp8_cache) {
  const int64_t need = decode_min_smem_bytes(head_dim, fp8_cache);
  return need > 0 && need <= smem_budget_per_block();
}

int64_t decode_min_smem_bytes(int head_dim, bool fp8_cache) {
  int64_t need = 0;
  dispatch_head_dim(head_dim, [&]<int D>() {
    // the cp.async kernel's smallest plan (both q dtypes are 16-bit)
    using F8 = __nv_fp8_e4m3;
    need = static_cast<int64_t>(fp8_cache ? decode_smem_bytes<__half, D, decode_min_cp_async_stages<__half, D, F8>(), F8>()
                                          : decode_smem_bytes<__half, D, decode_min_cp_async_stages<__half, D>()>());
    return cudaSuccess;
  });
  return need;
}

int decode_dev_pdl() {
  static bool dev_mode = std::getenv("CLO_DECODE_PDL") != nullptr;
  return dev_knob("CLO_DECODE_PDL", dev_mode, kDecodePdlAuto);
}

int64_t decode_attention_workspace_floats(int batch, int num_q_heads, int seq_len_q, int head_dim, int num_splits) {
  if (num_splits <= 1) return 0;
  const int64_t rows = static_cast<int64_t>(batch) * num_q_heads * seq_len_q;
  // Rows sized at least 64 floats wide (head dims below 64 use less): 2 splits x 66 floats
  // per row >= 128 is what keeps a call's counters (<= rows) inside the counter slots.
  const int64_t width = std::max(head_dim, kMinWorkspaceRowFloats) + 2;
  const int64_t partials = static_cast<int64_t>(decode_partial_slots(num_splits)) * rows * width;
  // W = partials + k meets W - ceil(W / 128) >= partials once k >= partials / 127.
  return partials + (partials + kWorkspaceFloatsPerCounter - 2) / (kWorkspaceFloatsPerCounter - 1);
}

int64_t decode_attention_workspace_floats_upto(int batch, int num_q_heads, int num_kv_heads, int seq_len_q,
                                               int head_dim, int max_kv_len, DType dtype, bool paged,
                                               bool contiguous, int num_splits) {
  if (num_splits > 0) return decode_attention_workspace_floats(batch, num_q_heads, seq_len_q, head_dim, num_splits);
  const int rows_per_kv_head = (num_q_heads / num_kv_heads) * seq_len_q;
  // Every length up to max_kv_len: a sliding window's call sizes for the keys it reads
  // (decode_read_kv_len), and the count is not monotone in the length (the paged D = 96
  // band ends at 3.05 units per SM below 8192 keys, at 3 from there). Between the rules'
  // length edges only the by-length caps move, and they grow with the length: each
  // interval's longest length stands for it. Two row tiles per block (decode_wide_rows_splits)
  // are the exception: up to one 32-row unit per SM they take over where their 1024-key cap
  // first fills 90% of the SMs (70% off HBM3e), a length that depends on the batch and can fall
  // between the edges, and their count there can be below the 16-row count just short of it
  // (MQA B=2 at 132 SMs: 66 splits up to 61439 keys, 60 from 61440; stop 73's review). So each batch size
  // also reads the length just short of that one; above it their count only grows with the
  // length. (Beyond one unit per SM their edges, 1024, 2048 and 4096 keys, are in the list; at
  // head dims 64 / 96 their count starts at 1024 keys and changes rule at 2048, both there, is
  // fixed between, and from 2048 below 0.45 units per SM grows with the length.)
  // Head pairs of 72-80 below 0.35 pairs per SM (decode_packs_head_pairs) are the other:
  // their count grows with the length to SMs // pairs splits (kMaxSplits at most), reached at
  // that many splits of kPairSplitMinKeys, and beyond is cut back to the splits that hold
  // keys (33 at 16896 keys, 32 at 16384 and 30 at 16960 for one GQA 32/8 sequence at 132
  // SMs; stop 75's review); every unpaired count there is smaller (at most SMs / (2 x
  // pairs), or 2). So each batch size also reads that length.
  // Paged D = 64 / 96 small grids (decode_small_grid_two_blocks_splits) cut their count back
  // to the splits that hold keys, which is not monotone in the length either: each batch size
  // also reads the shortest length that takes its top count (decode_small_grid_top_length).
  int lengths[4 + std::size(kSplitRuleLengthEdges)] = {max_kv_len};
  int n_lengths = 1;
  for (const int edge : kSplitRuleLengthEdges)
    if (edge <= max_kv_len) lengths[n_lengths++] = edge - 1;
  const int64_t sms = device_sm_count();
  const bool hbm3e = device_is_hopper_hbm3e();
  const int wide_tiles = decode_wide_row_tiles(rows_per_kv_head);
  const int row_tiles = decode_row_tiles(rows_per_kv_head);
  int64_t most = 0;
  for (int b = 1; b <= batch; ++b) {
    const int64_t wide_units = static_cast<int64_t>(b) * num_kv_heads * wide_tiles;
    const int64_t wide_on_keys = decode_wide_rows_fill_splits(wide_units, sms, hbm3e) * kWideRowsSplitKeys;
    lengths[n_lengths] = static_cast<int>(std::min<int64_t>(max_kv_len, wide_on_keys - 1));
    const int64_t pairs = static_cast<int64_t>(b) * num_kv_heads / 2;
    const int64_t pairs_top = pairs > 0 ? std::min<int64_t>(sms / pairs, kMaxSplits) * kPairSplitMinKeys : 0;
    lengths[n_lengths + 1] = static_cast<int>(pairs_top > 0 ? std::min<int64_t>(pairs_top, max_kv_len) : max_kv_len);
    const int64_t units = static_cast<int64_t>(b) * num_kv_heads * row_tiles;
    const int64_t spec_max = decode_small_grid_spec_short_splits_max(head_dim, seq_len_q, rows_per_kv_head, units, sms);
    lengths[n_lengths + 2] = static_cast<int>(
        decode_small_grid_top_length(units, sms, max_kv_len, spec_max > 0 ? spec_max : kSmallGridShortSplitsMax));
    int splits = 1;
    for (int i = 0; i <= n_lengths + 2; ++i) {
      if (paged)
        splits = std::max(splits, decode_attention_num_splits(b, num_kv_heads, rows_per_kv_head, lengths[i],
                                                              head_dim, dtype, true, seq_len_q));
      if (contiguous)
        splits = std::max(splits, decode_attention_num_splits(b, num_kv_heads, rows_per_kv_head, lengths[i],
                                                              head_dim, dtype, false, seq_len_q));
    }
    most = std::max(most, decode_attention_workspace_floats(b, num_q_heads, seq_len_q, head_dim, splits));
  }
  return most;
}

int decode_attention_num_splits(int batch, int num_kv_heads, int rows_per_kv_head, int max_kv_len, int head_dim,
                                DType dtype, bool paged, int seq_len_q) {
  // Target: one thread block per SM (FP8 caches at head_dim > 64 too). Measured on the H100 (NOTES.md, forced-split
  // sweeps): B=1/16K/GQA 32:8 is fastest at 16 splits = 128 blocks (33 splits, two
  // blocks per SM, was 13% slower), B=16/GQA at 1 split (128 blocks) beats 2, B=1/16K/MHA
  // is fastest at 4 splits (128 blocks). Fewer blocks leave SMs idle; more add
  // pipeline start-up per block and merge work without adding bandwidth.
  const int row_tiles = decode_row_tiles(rows_per_kv_head);
  const int64_t base = static_cast<int64_t>(batch) * num_kv_heads * row_tiles;
  const int64_t sms = device_sm_count();
  if (base <= 0) return 1;
  const int kernel_head_dim = decode_kernel_head_dim(head_dim);
  const int64_t by_len = std::max<int64_t>(1, (static_cast<int64_t>(max_kv_len) + kMinTokensPerSplit - 1) /
                                                  kMinTokensPerSplit);
  // The small grids' caps on a count of several blocks per SM: no split under
  // kMinTokensPerSplit keys, at most kMaxSplits.
  auto capped = [&](int64_t want) {
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, by_len, static_cast<int64_t>(kMaxSplits)})));
  };
  // FP8 caches with rows of 64 bytes or fewer (head_dim <= 64; NOTES.md v20). Their 8-KB
  // tiles leave one block's per-tile steps exposed (a deeper pipeline did not help, two
  // co-resident blocks do):
  //  - base <= SMs: about two blocks per SM, 2 SMs / base splits rounded to nearest
  //    (B=16/2K/GQA 32:8 D=64 23.1 -> 18.5 us at 2, B=1/16K 15.4 -> 14.2 at 32, B=8/2K
  //    14.5 -> 12.1 at 4, D=32 22.8 -> 17.3);
  //  - SMs < base < 1.6 SMs: 2 splits, which head pairs (decode_packs_head_pairs) halve to
  //    one 128-byte-row block per SM or a little more (B=17/2K 27.8 us unsplit -> 23.1,
  //    B=20 28.1 -> 23.7, B=24 28.3 -> 26.0, MHA B=5 27.9 -> 22.1; without pairs, 2 splits
  //    still beat 1 but for B=24: 25.0, 25.5, 29.1, 25.2);
  //  - beyond: 1 split, paired (B=28 28.7 -> 27.4, B=32 29.6 -> 28.8).
  if (dtype == DType::kFloat8E4M3 && kernel_head_dim == 64 && 5 * base < 8 * sms) {
    return capped(base <= sms ? (2 * sms + base / 2) / base : 2);
  }
  // 16-bit head dims 64 and 96 on HBM3e Hopper parts, small grids
  // (decode_small_grid_two_blocks_splits): about two blocks per SM.
  if (dtype != DType::kFloat8E4M3 && decode_small_grid_rule_units(head_dim, seq_len_q, rows_per_kv_head)) {
    const int splits = decode_small_grid_two_blocks_splits(paged, base, sms, max_kv_len);
    if (splits > 1) return capped(splits);
  }
  if (dtype != DType::kFloat8E4M3) {
    // ... and on other sm_90 parts above half a unit per SM, paged head_dim 128 too
    // (decode_small_grid_half_wave_splits)
    int splits =
        decode_small_grid_half_wave_splits(head_dim, seq_len_q, rows_per_kv_head, paged, base, sms, max_kv_len);
    if (splits > 1) return capped(splits);
    // ... and contiguous head_dim 128 from a third to half a unit per SM
    // (decode_small_grid_contiguous_d128_splits)
    splits =
        decode_small_grid_contiguous_d128_splits(head_dim, seq_len_q, rows_per_kv_head, paged, base, sms, max_kv_len);
    if (splits > 0) return capped(splits);
    // ... and Nq 2-4 in one row tile (decode_small_grid_spec_short_splits_max, NOTES.md "Stop 79")
    const int64_t short_max = decode_small_grid_spec_short_splits_max(head_dim, seq_len_q, rows_per_kv_head, base, sms);
    splits = short_max > 0 ? decode_small_grid_two_blocks_splits(paged, base, sms, max_kv_len, short_max) : 0;
    if (splits > 1) return capped(splits);
  }
  // The call as launch arguments without tensors (bases aligned, strides 0), for the launcher's
  // predicates, with `splits` splits.
  auto shape_args = [&](int splits) {
    DecodeAttentionArgs shape;
    shape.paged = paged;
    shape.dtype = dtype;
    shape.kv_fp8 = dtype == DType::kFloat8E4M3;
    shape.head_dim = head_dim;
    shape.batch = batch;
    shape.num_kv_heads = num_kv_heads;
    shape.num_q_heads = seq_len_q >= 1 ? num_kv_heads * (rows_per_kv_head / seq_len_q) : 0;
    shape.seq_len_q = seq_len_q;
    shape.num_splits = splits;
    shape.block_size = kTileTokens;  // the count is asked without the block size: one TMA can read
    shape.max_blocks_per_seq = static_cast<int>(div_ceil<int64_t>(max_kv_len, kTileTokens));  // keys read, whole tiles
    return shape;
  };
  // What decode_packs_head_pairs reads, with `splits` splits.
  auto packs_head_pairs = [&](int splits) {
    if (seq_len_q < 1 || rows_per_kv_head % seq_len_q != 0) return false;
    return decode_packs_head_pairs(shape_args(splits));
  };
  // 16-bit head dims 72-80 in head pairs (the D = 160 kernel on HBM3e parts,
  // decode_packs_head_pairs; NOTES.md "Stop 74"), GQA 32/8, 1 / 2 splits, us: 1 split from 0.8
  // pairs per SM (B=34/2K, 1.03 pairs per SM: 52.4 / 67.7; B=40/4K, 1.21: 110.8 / 132.1;
  // B=28/2K, 0.85: 42.5 / 45.4), 2 below (B=24/8K, 0.73: 155.3 / 136.2; B=20/2K, 0.61: 42.5 /
  // 35.8; B=16/2K, 0.48: 42.5 / 27.7; B=14/8K, 0.42: 2 / 4 splits 82.5 / 81.0).
  if (head_dim > 64 && head_dim <= 80) {  // 16-bit only: decode_packs_head_pairs
    const int64_t paired = base / 2;
    if (packs_head_pairs(1)) return 10 * paired >= 8 * sms ? 1 : capped(2);
    // Below 0.35 pairs per SM: one wave of pair splits of 512 keys or more, as many as hold
    // keys (33 splits of 16384 keys leave the last one empty: B=1/16K/GQA 20.4 us against
    // 19.6 at 32), where that is 80% of a wave (decode_packs_head_pairs); else unpaired, below.
    // (decode_attention_workspace_floats_upto sizes for the uncut count, at most SMs // pairs,
    // which the length of that many 512-key splits reaches.)
    if (paired > 0 && max_kv_len > 0) {
      const int want = capped(std::min(sms / paired, div_ceil<int64_t>(max_kv_len, kPairSplitMinKeys)));
      if (want > 1) {  // (one split never fills 80% of the SMs here; split_keys of 1 may pass 2^31)
        const int wave = split_count_holding_keys<kTileTokens>(want, max_kv_len);
        if (packs_head_pairs(wave)) return wave;
      }
    }
  }
  // The rules below that HBM3e parts (the H200) take apart from other sm_90 parts.
  const bool hbm3e = device_is_hopper_hbm3e();
  // Two row tiles per block where their grid fills its waves (decode_wide_rows_splits; at head_dim
  // 64 ahead of its own rule below, which counts the two tiles as two units).
  if (dtype != DType::kFloat8E4M3 && device_cc_major() >= 9 && decode_dev_wide_rows() != kDecodeWideRowsOff) {
    const int64_t wide_units = static_cast<int64_t>(batch) * num_kv_heads * decode_wide_row_tiles(rows_per_kv_head);
    const int wide = decode_wide_rows_splits(head_dim, rows_per_kv_head, wide_units, sms, max_kv_len, hbm3e, paged);
    if (wide > 0) return wide;
  }
  // 16-bit head_dim 64 on sm_90 at 2-3 blocks per SM (decode_d64_tail_splits, NOTES.md v31).
  if (dtype != DType::kFloat8E4M3 && device_cc_major() >= 9 && head_dim == 64 && seq_len_q >= 1 &&
      rows_per_kv_head % seq_len_q == 0) {
    const int splits = decode_d64_tail_splits(paged, packs_head_pairs(1), base, sms, max_kv_len, hbm3e,
                                              decode_two_tile_rows(rows_per_kv_head));
    if (splits > 1) return splits;
  }
  // 16-bit caches on sm_90 where the unsplit grid leaves a tail: on Hopper HBM3e parts at
  // head_dim 128 a little past one unit per SM, the spread tail's pieces
  // (decode_spread_tail_pieces); else (decode_tail_splits, NOTES.md v28, v29, v32) 2 splits,
  // run as the balanced schedule below two units per SM (decode_streamk_blocks), as an even
  // grid beyond; HBM3e parts have their own bands and counts (1-4) at head_dim 96, 128, 192
  // and 256; up to one unit per SM, head_dim 128 there splits a partial wave
  // (decode_partial_wave_splits).
  if (dtype != DType::kFloat8E4M3 && device_cc_major() >= 9) {
    const int spec_rows = decode_rule_spec_rows(seq_len_q, rows_per_kv_head);
    const int pieces = decode_spread_tail_pieces(head_dim, paged, base, sms, max_kv_len, hbm3e, spec_rows);
    if (pieces > 0) return pieces;
    // units of one row tile whose 16-bit rows share 128-byte lines: paged rows that are not whole
    // lines beside other KV heads (a contiguous call's strides are not known here)
    const bool shared_lines = row_tiles == 1 && decode_units_share_lines(shape_args(2), 2);
    const int splits = decode_tail_splits(head_dim, paged, base, sms, max_kv_len, hbm3e, spec_rows, shared_lines,
                                          rows_per_kv_head == 1);
    if (splits > 1) return splits;
    // head_dim 128 at 0.5-0.9 units per SM on HBM3e parts (paged from 8192 keys 1.0, contiguous
    // 0.7 from 4096; units of more than one row tile to 1.0 and below 0.5): a partial wave's
    // idle SMs
    const int partial = decode_partial_wave_splits(head_dim, paged, base, sms, max_kv_len, hbm3e, spec_rows);
    if (partial > 1) return capped(partial);
  }
  if (base * 2 > sms) {
    // >= half the SMs busy: splitting costs more than it gains, except for very large
    // grids of long sequences on the cp.async kernel: B=64/N=4096/MHA (2048 blocks, 15.5
    // per SM) ran 2% faster with 2 splits (v4: 1450 vs 1481 us); 512-block grids (B=16/MHA,
    // B=64/GQA at N=4096) were slower with 2. Large grids on the TMA kernel
    // (decode_tma_stages_for) are faster with 1 split (D = 128: 1336 vs 1347 us contiguous,
    // 1339 vs 1352 paged; D = 64: 369.0 vs 373.5 paged; D = 256: 1406.9 vs 1413.8). The
    // count is the same for both layouts: at D = 96 contiguous caches run cp.async there
    // while paged ones run TMA / head pairs (unpaired on tables of 8192 keys or more:
    // cp.async, which this question, asked without the length, does not see)
    // (1 split: B=64/4K/MHA 1090.1 vs 1106.6 us at 2); contiguous ones then run 1 split
    // too, within noise of 2 (1051.5 vs 1049.6, NOTES.md v24). FP8 caches (the TMA
    // kernel on sm_90) run 1 split there too (B=64/4K/MHA 732.6 us; the cp.async kernel
    // 768.0 with 1, 821.3 with 2; NOTES.md v19).
    // (Head pairs at head_dim 88, on Hopper HBM3e parts, run the D = 256 TMA kernel: 1 split;
    // 72-80 took their count above.)
    const bool large_grid = base >= kLargeGridBlocksPerSm * sms;
    const bool cp_async_large_grid =
        large_grid && dtype != DType::kFloat8E4M3 &&
        decode_tma_stages_for(kernel_head_dim, true, base, sms, false, head_dim) == 0 &&
        !(kernel_head_dim == 96 && head_dim != 96 && packs_head_pairs(1));
    return (cp_async_large_grid && max_kv_len >= kLargeGridMinKeys) ? 2 : 1;
  }
  return capped(sms / base);  // rounded down: a few idle SMs beat a second, mostly empty wave
}

cudaError_t launch_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (a.batch <= 0 || a.num_kv_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0 || a.seq_len_q <= 0 ||
      a.num_splits < 1 || a.num_splits > kMaxSplits)
    return cudaErrorInvalidValue;
  if (a.paged && (a.block_size <= 0 || (a.block_size & (a.block_size - 1)) != 0)) return cudaErrorInvalidValue;
  if (decode_packs_head_pairs(a)) {
    DecodeAttentionArgs pairs = a;  // the same cache bytes as half the heads, twice as wide
    pairs.head_dim = 2 * a.head_dim;
    pairs.num_kv_heads = a.num_kv_heads / 2;
    const int group = a.num_q_heads / a.num_kv_heads;
    return dispatch_half_dtype(a.dtype, [&]<typename T>() {
      if (a.kv_fp8) return run_decode_attention<T, 128, true, __nv_fp8_e4m3>(pairs, stream, group);
      switch (decode_pair_kernel_head_dim(pairs.head_dim)) {
        case 128: return run_decode_attention<T, 128, true>(pairs, stream, group);
        case 160: return run_decode_attention<T, 160, true>(pairs, stream, group);  // D = 72-80 pairs
        default: return run_decode_attention<T, 256, true>(pairs, stream, group);   // D = 88-96 pairs
      }
    });
  }
  return dispatch_half_dtype(a.dtype, [&]<typename T>() {
    return dispatch_head_dim(a.head_dim, [&]<int D>() {
      if (a.kv_fp8)
        return a.paged ? run_decode_attention<T, D, true, __nv_fp8_e4m3>(a, stream) : cudaErrorInvalidValue;
      return a.paged ? run_decode_attention<T, D, true>(a, stream) : run_decode_attention<T, D, false>(a, stream);
    });
  });
}

}  // namespace cuda_llm_ops::decode
