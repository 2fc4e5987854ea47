// Launchers of the decode area: split-KV (flash-decoding) attention over a paged
// or a strided (contiguous) KV cache with its log-sum-exp merge fused in, and the
// paged cache append (vLLM's reshape_and_cache). Plain parameters, no torch.
#pragma once

#include <cstdint>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::decode {

// Head dims of the compiled kernels (multiples of 16: the QK^T mma steps over D in 16s).
// Every other multiple of 8 up to 256 runs on the next wider one (decode_kernel_head_dim):
// its rows are read at their own width, the tile's columns past it are zero in shared
// memory (never loaded), and the padding costs only tensor-core slots, idle in this
// memory-bound kernel. So each K/V byte is still read once: D = 80 costs what its bytes do.
constexpr int kDecodeKernelHeadDims[] = {64, 96, 128, 256};
constexpr int kDecodeMaxHeadDim = 256;
// The compiled head dim a head dim runs on, or 0 when it cannot run (not a multiple of
// 8 in [8, 256]: rows are moved in 16-byte pieces).
constexpr int decode_kernel_head_dim(int d) {
  if (d < 8 || d > kDecodeMaxHeadDim || d % 8 != 0) return 0;
  for (int s : kDecodeKernelHeadDims)
    if (d <= s) return s;
  return 0;
}

// Query rows one thread block serves (one m16 tensor-core tile): all query heads
// of one KV head times the query positions, up to 16 rows per block.
constexpr int kRowsPerBlock = 16;
// Keys per pipeline stage (16 per warp, 4 warps) and the smallest split the
// heuristic makes (shorter splits spend more time filling the pipeline and merging than
// streaming). 128 (two tiles), NOTES.md v23: B=1/GQA 32:8 N=512 8.1 -> 6.5 us at 4 splits,
// N=1024 8.4 -> 7.2 at 8 (one-tile splits: 6.3, 7.5; N=2048 8.8 at 8, 8.7 at 16).
constexpr int kTileTokens = 64;
constexpr int kMinTokensPerSplit = 128;
constexpr int kMaxSplits = 128;
// Grids of at least this many blocks per SM with sequences of at least this many
// keys split in 2 where the cp.async kernel runs them (head dims 72-88 on the D = 96
// kernel unpaired, every head dim below sm_90; measured, see decode_attention_num_splits).
constexpr int kLargeGridBlocksPerSm = 12;
constexpr int kLargeGridMinKeys = 4096;

// A paged cache's block table: block_tables int32 [rows, table_stride >= max_blocks_per_seq]
// maps a sequence's logical blocks to physical ones, of num_blocks x block_size slots;
// seq_lens int32 [rows] holds each sequence's keys. The attention calls and the appends
// by table (AppendSlots) read it.
struct PagedTable {
  const int* block_tables = nullptr;
  int64_t table_stride = 0;
  int max_blocks_per_seq = 0;
  int num_blocks = 0;
  int block_size = 0;  // a power of two for attention
  const int* seq_lens = nullptr;
};

struct DecodeAttentionArgs : PagedTable {
  DType dtype = DType::kFloat16;  // of q and out: float16 or bfloat16
  // FP8 KV cache (paged only): k/v hold float8 e4m3 values, each K element standing for
  // value * k_scale and each V element for value * v_scale (vLLM's per-tensor scales).
  // Otherwise the caches have `dtype` and the scales are 1.
  bool kv_fp8 = false;
  float k_scale = 1.f, v_scale = 1.f;
  int head_dim = 0;  // any decode_kernel_head_dim accepts
  int batch = 0, num_q_heads = 0, num_kv_heads = 0;
  int seq_len_q = 1;  // query rows per (batch, head): the new tokens (1 for plain decode)

  // q and out: [B, Hq, Nq, D] addressed by strides (elements), last dim contiguous.
  const void* q = nullptr;
  int64_t q_stride_b = 0, q_stride_h = 0, q_stride_n = 0;
  void* out = nullptr;
  int64_t o_stride_b = 0, o_stride_h = 0, o_stride_n = 0;

  const void* k = nullptr;
  const void* v = nullptr;

  // Paged cache (paged == true): k/v [num_blocks, block_size, Hkv, D] contiguous, by the
  // PagedTable (B rows). Nq > 1 (speculative decoding): the queries are each sequence's
  // last Nq keys (causal unless `causal` is false: a cascade's shared-prefix part).
  bool paged = false;

  // Strided cache (paged == false): k/v [B, Hkv, Nk, D] by strides.
  int64_t k_stride_b = 0, k_stride_h = 0, k_stride_n = 0;
  int64_t v_stride_b = 0, v_stride_h = 0, v_stride_n = 0;
  int seq_len_k = 0;

  float scale = 1.f;    // softmax scale (natural-log domain)
  bool causal = false;  // query i sees key j when j <= i + Nk - Nq (paged: Nk = seq_len)
  // Sliding window: query i (at key position p = i + Nk - Nq; paged: seq_len - 1) sees
  // keys j >= p - window_left only; < 0: no window. Keys before the lowest query's
  // window are not read (HF / vLLM sliding_window W is window_left = W - 1).
  int window_left = -1;
  // Logit soft-capping (Gemma 2): scores become cap * tanh(scale * q.k / cap); 0: off.
  float logits_soft_cap = 0.f;
  // Optional float32 [B, Hq, Nq] (contiguous): each row's log-sum-exp of its scaled (and
  // capped) scores, natural log; -inf for a row that sees no key (its output is 0). With
  // it, attention over separate key ranges merges exactly (cascade / shared prefixes).
  float* lse = nullptr;
  int num_splits = 1;   // resolved (>= 1); > 1 needs the workspace
  // Split calls: >= decode_attention_workspace_floats(...) floats, 16-byte aligned,
  // whose counter slots (see below) hold kSplitCounterIdle before the first call.
  float* workspace = nullptr;
  int64_t workspace_floats = 0;  // the whole buffer: the counters sit at its end
};

// Upper bound of the keys one sequence may hold: the table capacity (paged) or Nk.
inline int decode_max_kv_len(const DecodeAttentionArgs& a) {
  // in 64 bits, held at INT32_MAX: a capacity just past it stays a length
  const int64_t n = a.paged ? static_cast<int64_t>(a.max_blocks_per_seq) * a.block_size : a.seq_len_k;
  return static_cast<int>(n < INT32_MAX ? n : INT32_MAX);
}
// Upper bound of the keys a block reads: decode_max_kv_len, or with a sliding window
// the window of the lowest query row, its start rounded down to a 64-key tile (what the
// split heuristic should size for).
inline int decode_read_kv_len(const DecodeAttentionArgs& a) {
  const int64_t n = decode_max_kv_len(a);
  if (a.window_left < 0) return static_cast<int>(n);
  const int64_t window = static_cast<int64_t>(a.window_left) + a.seq_len_q + kTileTokens - 1;
  return static_cast<int>(n < window ? n : window);
}

// Splits the heuristic picks (num_splits = 0): about one thread block per SM
// (SM count / (batch x KV heads x row tiles), when that base fills less than half
// the SMs; measured best on the H100, see NOTES.md), never splits shorter than
// kMinTokensPerSplit of `max_kv_len`, at most kMaxSplits; 2 for grids of at least
// kLargeGridBlocksPerSm blocks per SM at max_kv_len >= kLargeGridMinKeys that run the
// cp.async kernel (below sm_90, or D = 96); else 1. dtype: the caches' (float16,
// bfloat16 or kFloat8E4M3; FP8 caches never take the large-grid case).
// paged / seq_len_q: the call's layout and query rows per (batch, head), which decide head
// pairs, the head_dim-64 bands (decode_d64_tail_splits) and, on HBM3e parts, head_dim 64, 96
// and 128's 32-row blocks (decode_wide_rows_splits, first), spread tail, partial
// wave and wave top, and
// paged head_dim 64 / 96 small grids at about two blocks per SM
// (decode_small_grid_two_blocks_splits) (decode_internal.h).
int decode_attention_num_splits(int batch, int num_kv_heads, int rows_per_kv_head, int max_kv_len, int head_dim,
                                DType dtype, bool paged, int seq_len_q);

// Workspace of split calls (num_splits > 1), W = workspace_floats elements:
//  - from the start: partial outputs [slots, B*Hq*Nq, D] and (max, sum) pairs
//    [slots, B*Hq*Nq, 2] (float32; slots = decode_partial_slots(splits)), written and
//    read within one call;
//  - the last decode_workspace_counter_slots(W) = ceil(W / 128) elements: int32
//    split counters, one per (batch, KV head, row unit of 16 or 32 rows), counted up by the splits
//    from kSplitCounterIdle and reset to it by the block that merges. They must hold
//    it before the first call (decode_workspace_init) and hold it again after every
//    completed call, so a buffer serves any later call, graph replays included.
//    A count outside [idle, idle + splits) makes the call's output NaN: the rest value
//    is not 0 so that counters never set (zeroed or reused memory: 0, small ints, -1,
//    float bit patterns) are told from counters at rest, rather than merging early.
// Counters sit at the end and scale with W (not with the call) so that calls of
// different shapes can share one buffer: a call's partials never reach another
// call's counters. A call has at most B*Hq*Nq counters and its size counts >= 2 splits x
// (kMinWorkspaceRowFloats + 2) floats per row (narrower head dims are sized as 64), so
// ceil(W/128) slots always cover it.
constexpr int64_t kWorkspaceFloatsPerCounter = 128;
constexpr int kMinWorkspaceRowFloats = 64;
inline int64_t decode_workspace_counter_slots(int64_t workspace_floats) {
  return workspace_floats <= 0 ? 0 : (workspace_floats + kWorkspaceFloatsPerCounter - 1) / kWorkspaceFloatsPerCounter;
}
constexpr int kSplitCounterIdle = 0x600DC0DE;
// Sets every counter slot of a workspace of `workspace_floats` floats to
// kSplitCounterIdle (one small kernel on `stream`; the partials need nothing).
cudaError_t decode_workspace_init(float* workspace, int64_t workspace_floats, cudaStream_t stream);

// Partial-output slots per query row of a call with num_splits splits: num_splits, and 3 for
// 2: a 2-split call that runs the balanced schedule by length (decode_streamk_len_range)
// cuts a sequence in up to three pieces.
constexpr int decode_partial_slots(int num_splits) { return num_splits == 2 ? 3 : num_splits; }

// Floats of workspace a call with `num_splits` splits needs (0 when num_splits == 1):
// the smallest W with W - counter_slots(W) >= the partials. Any larger buffer fits too
// (W - counter_slots(W) never decreases).
int64_t decode_attention_workspace_floats(int batch, int num_q_heads, int seq_len_q, int head_dim, int num_splits);
// The largest decode_attention_workspace_floats over every batch size 1..batch, each at
// num_splits or (0) the heuristic's count for that batch on the current device, in the
// layouts asked for (paged and/or contiguous), at every length up to max_kv_len (a
// sliding window's call sizes for the keys it reads). Smaller batches can split more, and the
// heuristic's tail bands lie beyond batch = SMs when a sequence has one or two blocks
// (MQA, Hkv 2), so no single batch size bounds the rest: one buffer of this size serves
// every bucket of a graph runner. 0 when no call of that shape splits.
int64_t decode_attention_workspace_floats_upto(int batch, int num_q_heads, int num_kv_heads, int seq_len_q,
                                               int head_dim, int max_kv_len, DType dtype, bool paged,
                                               bool contiguous, int num_splits);

// Whether the decode kernels run at this head dim on the current device: every head
// dim fits sm_80 and sm_90; GPUs with 99 KB of shared memory per block (sm_86/89/120)
// run the 96- and 128-wide kernels on 2 pipeline stages and cannot run the 256-wide one
// (140 KB at 2 stages): head dims up to 128 only. FP8 caches (fp8_cache) need about
// half: every head dim fits everywhere (D = 256: 75 KB at 2 stages).
bool decode_head_dim_fits(int head_dim, bool fp8_cache = false);
// The least shared memory per block a decode kernel at this head dim needs (0 for an
// unsupported head dim).
int64_t decode_min_smem_bytes(int head_dim, bool fp8_cache = false);
// The grid's y dimension is the batch.
constexpr int64_t kDecodeMaxBatch = 65535;

// One kernel: attention, and for num_splits > 1 the merge (by the last split of each
// (batch, KV head, row tile) to finish; on sm_90, where that merge would take two or more
// L2 round trips, a second kernel launched right after: decode_merge_apart_pays,
// decode_split_merge_kernel; on sm_90 at 2-4 splits, where one wave of clusters holds the
// grid, by the splits of each unit as one cluster through distributed shared memory:
// decode_split_cluster_pays). Invalid head_dim/dtype or a too-small or
// misaligned workspace return cudaErrorInvalidValue without launching. Calls sharing a
// workspace must be ordered (one stream): the counters are shared.
// Device-side guards: a seq_len outside [0, table capacity] or a block index
// outside [0, num_blocks) is never dereferenced; that sequence's output is NaN.
cudaError_t launch_decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

// Where an append writes token t, in a cache of num_blocks x block_size slots, one of:
// - slot_mapping[t] (int64 when slot_is_int64, else int32), a flat slot
//   block * block_size + offset; negative: the token is skipped;
// - slot_mapping null: token t is sequence t's new token, at position seq_lens[t] - 1
//   of block_tables row t (int32 [T, max_blocks_per_seq] by table_stride); a sequence
//   with seq_lens <= 0 is skipped.
// A slot past the cache, a position past the table or a block index outside
// [0, num_blocks) is skipped too: never written (the Python wrapper reports them).
struct AppendSlots : PagedTable {
  const void* slot_mapping = nullptr;
  bool slot_is_int64 = false;
};

// The paged KV append (vLLM's reshape_and_cache), optionally with the decode step's glue:
// slots derived from a block table, and the rotate-half rotary embedding.
struct PagedKvAppendArgs : AppendSlots {
  DType dtype = DType::kFloat16;        // of k, v (and q, cos, sin): float16, bfloat16 or float32
  DType cache_dtype = DType::kFloat16;  // `dtype` (a copy) or kFloat8E4M3 (quantized)
  // FP8 caches store e4m3(x * (1 / scale)) in float32, rounded to nearest, saturated to
  // +-448 (head_dim a multiple of 16).
  float k_scale = 1.f, v_scale = 1.f;
  int num_tokens = 0, num_kv_heads = 0, head_dim = 0;

  // k/v [T, Hkv, D] by token and head strides (elements), last dim contiguous.
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_stride_t = 0, k_stride_h = 0, v_stride_t = 0, v_stride_h = 0;
  void* k_cache = nullptr;  // [num_blocks, block_size, Hkv, D], contiguous
  void* v_cache = nullptr;

  // Rotate-half rotary embedding (cos null: none): k is rotated before it is stored
  // (k itself is read only) and q [T, Hq, D] (when given) is rotated in place; cos and
  // sin [T, D] by a token stride. Each value is computed in float32 as x * cos -+ x' * sin
  // (one rounding per product and one per sum, as PyTorch's float32 ops) and rounded once
  // to `dtype`. head_dim a multiple of 2 * (16 / element size).
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t cos_stride_t = 0, sin_stride_t = 0;
  void* q = nullptr;
  int64_t q_stride_t = 0, q_stride_h = 0;
  int num_q_heads = 0;
};

cudaError_t launch_paged_kv_append(const PagedKvAppendArgs& args, cudaStream_t stream);

// MLA latent append (vLLM's concat_and_cache_mla; paged_kv_append.cu): token t's row
// [kv_c (512) | k_pe (64)] is written whole into the MLA cache at its slot (AppendSlots).
struct MlaAppendArgs : AppendSlots {
  DType dtype = DType::kFloat16;  // of kv_c, k_pe and the cache: float16 or bfloat16
  int num_tokens = 0;
  const void* kv_c = nullptr;  // [T, 512] by a token stride (elements), rows 16-byte aligned
  int64_t kv_c_stride_t = 0;
  const void* k_pe = nullptr;  // [T, 64], likewise
  int64_t k_pe_stride_t = 0;
  void* kv_cache = nullptr;  // [num_blocks, block_size, 576], contiguous
};
cudaError_t launch_paged_mla_append(const MlaAppendArgs& args, cudaStream_t stream);

// ---- MLA decode (multi-head latent attention, DeepSeek-V2/V3; mla_decode_attention.cu) ----
// The absorbed form FlashMLA and vLLM run at decode: every query head attends to one
// shared latent cache row per token, [kv_c (512) | k_pe (64)], as its key (576 wide) and
// to the row's first 512 columns as its value. One cache row is read for all query heads,
// so per token Hq * 2 * (576 + 512) FLOPs meet 1152 bytes: memory-bound at 16 heads,
// near the H100's ridge at 128.
constexpr int kMlaHeadDimQK = 576;
constexpr int kMlaHeadDimV = 512;
// Query heads one thread block serves (one m16 tile) and keys per pipeline stage.
constexpr int kMlaRowsPerBlock = 16;
constexpr int kMlaTileKeys = 32;
// The shortest split the heuristic makes (mla_decode_num_splits).
constexpr int kMlaMinKeysPerSplit = 128;
// The Hopper kernel (wgmma, mla_decode_sm90.cuh): query heads a block serves, keys a tile,
// and the fewest query heads a call needs to take it. At 32 heads half its rows are
// padding and it still led the mma.sync kernel (B=16/4K 43.2 us against 54.1, B=64/4K
// 130.0 against 169.5, B=1/16K 19.2 against 20.7; NOTES.md "MLA, wgmma"); at 16 it led by
// 4% at B=64/4K only, not enough to move the memory-bound 16-head calls.
constexpr int kMlaSm90Heads = 64;
constexpr int kMlaSm90TileKeys = 64;
constexpr int kMlaSm90MinHeads = 32;

struct MlaDecodeArgs : PagedTable {
  DType dtype = DType::kFloat16;  // of q, the cache and out: float16 or bfloat16
  int batch = 0, num_q_heads = 0;
  // q [B, Hq, 576] and out [B, Hq, 512] by batch and head strides (elements), rows contiguous.
  const void* q = nullptr;
  int64_t q_stride_b = 0, q_stride_h = 0;
  void* out = nullptr;
  int64_t o_stride_b = 0, o_stride_h = 0;
  // Latent cache [num_blocks, block_size, 576] (one KV head), contiguous, by the PagedTable (B rows).
  const void* kv_cache = nullptr;
  float scale = 1.f;    // softmax scale (natural-log domain)
  float* lse = nullptr;  // optional float32 [B, Hq] (contiguous), as DecodeAttentionArgs::lse
  int num_splits = 1;    // resolved (>= 1); > 1 needs the workspace
  // Split calls: >= decode_attention_workspace_floats(B, Hq, 1, kMlaHeadDimV, num_splits)
  // floats, 16-byte aligned, any contents (partials are written before they are read; the
  // combine kernel needs no counters). The decode size, counter slots included, so that in a
  // buffer shared with decode_attention calls MLA's partials stay clear of their counters.
  float* workspace = nullptr;
  int64_t workspace_floats = 0;
};

// Splits the heuristic picks: on the wgmma kernel the minimum of a fitted time model up to a
// bound that never grows for a narrower table or a larger batch (the workspace's size); on the
// mma.sync kernel about one block per SM over batch x row tiles (1 from one per SM up; two per
// SM for small grids of 64 heads or more). Never splits shorter than kMlaMinKeysPerSplit of max_kv_len, at most kMaxSplits.
int mla_decode_num_splits(int batch, int num_q_heads, int max_kv_len);
// decode_attention_workspace_floats for every batch size 1..batch at num_splits (0: the
// heuristic's bound, so every narrower table is served too).
int64_t mla_decode_workspace_floats_upto(int batch, int num_q_heads, int max_kv_len, int num_splits);
// Shared memory per block of the MLA kernel, and whether the current device grants it
// (sm_80 and sm_90 do; 99-KB parts do not).
int64_t mla_decode_smem_bytes();
bool mla_decode_fits();
// The attention kernel, and for num_splits > 1 the combine kernel after it (PDL on sm_90).
// Invalid parameters, or a device without the shared memory, return cudaErrorInvalidValue
// without launching. Device-side guards as
// launch_decode_attention: a bad seq_len or block index makes that sequence's rows NaN.
cudaError_t launch_mla_decode_attention(const MlaDecodeArgs& args, cudaStream_t stream);

}  // namespace cuda_llm_ops::decode
