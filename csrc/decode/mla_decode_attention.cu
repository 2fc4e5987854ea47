// MLA decode attention (DeepSeek-V2/V3, the absorbed form of FlashMLA and vLLM) over a
// paged latent cache: q [B, Hq, 576], cache rows [kv_c (512) | k_pe (64)] serving as the
// key (all 576 columns) and the value (the first 512) of every query head; out [B, Hq, 512].
//
// Work decomposition (why; NOTES.md "MLA"):
//  - One thread block serves 16 query heads (one m16 tile) of one sequence and one split of
//    its keys: the cache row is shared by all heads, so each row tile reads it once and
//    the row tiles of a (sequence, split) run side by side and share it through L2.
//  - Keys stream through a cp.async pipeline of 32-key tiles (37 KB each): 2 stages (101 KB
//    of shared memory, two blocks per SM, whose latencies hide each other: one warp per
//    scheduler issued one instruction per ~3-5 cycles) on grids of more blocks than SMs,
//    3 stages (139 KB, one block per SM, a tile more in flight) on the others
//    (mla_stages_for). Both fit sm_80's 163 KB per block; there two 2-stage blocks do not
//    share an SM (164 KB per SM), so sm_80 runs 3 stages everywhere. A row is loaded once and read as both K and V (V is its
//    first 512 columns). Eight threads copy a row, 9 16-byte pieces each at fixed offsets
//    from one block-table entry.
//  - The 4 warps split QK^T by head-dim columns (144 each, 9 k16 steps): each warp keeps its
//    Q fragments in registers (36 registers) and reads each K element once; the four
//    partial score tiles are summed through shared memory (one barrier). Splitting by keys
//    instead would make every warp re-read all of Q from shared memory for each tile.
//  - Every warp then holds the whole 16 x 32 score tile, runs the same online softmax
//    (so no max exchange), and multiplies P by its own 128 of V's 512 columns: the output
//    needs no cross-warp merge, and P stays in registers (the C fragment of S is the A
//    fragment of P).
//  - Split-KV: each split writes its rows' unnormalised output and (max, sum) to the
//    workspace, and a combine kernel (launched with PDL) merges them, one block of 512
//    threads per query row. A split's partials are 32 KB per row tile (16 x 512 floats),
//    so the decode kernels' fused merge (the last split of a group merges alone) left one
//    block reading megabytes at B=1 (v1: 128 splits, 127 us at N=16K).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "decode/decode.h"
#include "decode/decode_internal.h"
#include "decode/mla_decode_common.cuh"
#include "decode/mla_decode_sm90.cuh"
#include "decode/split_merge.cuh"

namespace cuda_llm_ops::decode {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = kMlaRowsPerBlock;
constexpr int kKeys = kMlaTileKeys;
constexpr int kDqk = kMlaHeadDimQK, kDv = kMlaHeadDimV;
constexpr int kQkSteps = kDqk / kWarps / 16;  // k16 steps of a warp's QK^T columns
constexpr int kVCols = kDv / kWarps;          // output columns a warp owns
constexpr int kVTiles = kVCols / 8;           // its n8 accumulator tiles
constexpr int kKeyTiles = kKeys / 8;          // n8 score tiles of a key tile
constexpr int kChunks = kDqk * 2 / 16;        // 16-byte chunks of a row
constexpr int kCopyThreads = 8;                          // threads copying one cache row
constexpr int kRowsPerCopyPass = kThreads / kCopyThreads;  // 16
constexpr int kCopyRows = kKeys / kRowsPerCopyPass;        // rows each thread copies per tile (2)
constexpr int kCopies = kChunks / kCopyThreads;            // 16-byte copies per row and thread (9)
// Rows padded by 16 bytes: the 8 rows of an ldmatrix (plain or transposed) land on 8
// distinct 16-byte bank groups.
constexpr int kStride = kDqk + 8;
static_assert(kDqk % (16 * kWarps) == 0 && kDv % (16 * kWarps) == 0, "columns split evenly over the warps");
static_assert(kCopyRows == 2 && kChunks % kCopyThreads == 0 && kKeys % 16 == 0, "tile shape");

template <int kStages>
constexpr int64_t kv_smem_bytes() {
  return int64_t(kStages) * kKeys * kStride * 2;
}
constexpr int64_t kQSmemBytes = int64_t(kRows) * kStride * 2;
// Partial score tiles: [warps][key tiles][lanes] float4 (one C fragment per lane). One
// buffer: a tile's reads end before the next tile's top barrier, its writes start after it.
constexpr int64_t kScoreSmemBytes = int64_t(kWarps) * kKeyTiles * 32 * 16;
// 2 stages: 101 KB, two blocks per SM; 3 stages: 139 KB, one (mla_stages_for).
template <int kStages>
constexpr int64_t smem_bytes() {
  return kv_smem_bytes<kStages>() + kQSmemBytes + kScoreSmemBytes;
}

template <typename T, int kStages>
__global__ void __launch_bounds__(kThreads, kStages == 2 ? 2 : 1) mla_decode_attention_kernel(const MlaKernelParams p) {
  static_assert(kStages == 2 || kStages == 3, "two or three pipeline stages");
  constexpr int64_t kKvSmemBytes = kv_smem_bytes<kStages>();
  extern __shared__ __align__(128) unsigned char smem[];
  T* kv_s = reinterpret_cast<T*>(smem);
  T* q_s = reinterpret_cast<T*>(smem + kKvSmemBytes);
  float4* score_s = reinterpret_cast<float4*>(smem + kKvSmemBytes + kQSmemBytes);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int row_tile = blockIdx.x, b = blockIdx.y, split = blockIdx.z;
  const int head0 = row_tile * kRows;
  const int rows_here = min(kRows, p.num_q_heads - head0);

  const MlaSplitRange range = mla_split_range<kKeys>(p, b, split);
  bool bad = range.bad;
  const int key_lo = range.key_lo, key_hi = range.key_hi;
  const int n_tiles = div_ceil(key_hi - key_lo, kKeys);
  const int* table = p.block_tables + b * p.table_stride;
  const T* kv = static_cast<const T*>(p.kv);

  // q rows (zeros past Hq) travel with the first tile's copies.
  const T* qb = static_cast<const T*>(p.q) + b * p.q_sb;
  for (int i = tid; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < rows_here;
    cp_async_16(q_s + r * kStride + c * 8, qb + (ok ? (head0 + r) * p.q_sh : 0) + c * 8, ok);
  }

  // Thread tid copies rows tid / 8 and tid / 8 + 16 of each tile, 16-byte pieces tid % 8 +
  // 8 j: the 8 lanes of a shared-memory phase fill 8 consecutive pieces of one row (8
  // distinct bank groups; v2's 4 threads per row wrote two rows per phase, 2-way conflicts).
  // The block-table entries of those rows' keys are loaded ahead of their copies (the
  // gather never waits on the table).
  const int copy_row = tid / kCopyThreads, copy_col = (tid % kCopyThreads) * 8;
  auto load_entries = [&](int tile) -> int2 {
    int e[kCopyRows];
#pragma unroll
    for (int h = 0; h < kCopyRows; ++h) {
      const int pos = key_lo + tile * kKeys + copy_row + h * kRowsPerCopyPass;
      e[h] = tile < n_tiles && pos < key_hi ? __ldg(table + (pos >> p.log2_bs)) : -1;
    }
    return make_int2(e[0], e[1]);
  };
  auto issue_tile = [&](int tile, int2 entries) {
    if (tile < n_tiles) {
#pragma unroll
      for (int h = 0; h < kCopyRows; ++h) {
        const int row = copy_row + h * kRowsPerCopyPass, pos = key_lo + tile * kKeys + row;
        const int e = h == 0 ? entries.x : entries.y;
        bool ok = pos < key_hi;
        if (ok && static_cast<unsigned>(e) >= static_cast<unsigned>(p.num_blocks)) {
          bad = true;  // never dereferenced: zero-filled, the rows become NaN
          ok = false;
        }
        const T* src = kv + (ok ? (static_cast<int64_t>(e) * p.block_size + (pos & p.bs_mask)) * kDqk : 0) + copy_col;
        T* dst = kv_s + ((tile % kStages) * kKeys + row) * kStride + copy_col;
#pragma unroll
        for (int j = 0; j < kCopies; ++j)
          cp_async_16_prefetch<256>(dst + j * kCopyThreads * 8, src + j * kCopyThreads * 8, ok);
      }
    }
    cp_async_commit();
  };

#pragma unroll
  for (int t = 0; t + 1 < kStages; ++t) issue_tile(t, load_entries(t));
  // Table entries two tiles ahead of their copies (v3.1: no measurable change against one
  // ahead, though ncu had shown 1.0 long-scoreboard stalls per issued instruction).
  int2 entry = load_entries(kStages - 1), entry_next = load_entries(kStages);
  // The combine kernel (split calls) may start launching; it waits for this grid to finish.
  pdl_launch_dependents();

  uint32_t qf[kQkSteps][4];
  float o[kVTiles][4];
#pragma unroll
  for (int n = 0; n < kVTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};
  const int qk_col0 = warp * kQkSteps * 16;

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t landed for all; every warp is done with tile t - 1's stage
    if (t == 0) {
#pragma unroll
      for (int kk = 0; kk < kQkSteps; ++kk)
        ldmatrix_x4(qf[kk], q_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kStride + qk_col0 + kk * 16 +
                                (lane >> 4) * 8);
    }
    issue_tile(t + kStages - 1, entry);
    entry = entry_next;
    entry_next = load_entries(t + kStages + 1);
    const T* ks = kv_s + (t % kStages) * kKeys * kStride;

    // This warp's columns of S = Q K^T: 16 heads x 32 keys.
    float sp[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) sp[j][0] = sp[j][1] = sp[j][2] = sp[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kQkSteps; ++kk) {
#pragma unroll
      for (int h = 0; h < kKeyTiles / 2; ++h) {
        uint32_t kb[4];
        ldmatrix_x4(kb, ks + (h * 16 + (lane >> 4) * 8 + (lane & 7)) * kStride + qk_col0 + kk * 16 +
                            ((lane >> 3) & 1) * 8);
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        mma_m16n8k16<T>(sp[2 * h], qf[kk], b0);
        mma_m16n8k16<T>(sp[2 * h + 1], qf[kk], b1);
      }
    }
    float4* mine = score_s + warp * kKeyTiles * 32;
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) mine[j * 32 + lane] = make_float4(sp[j][0], sp[j][1], sp[j][2], sp[j][3]);
    __syncthreads();  // the four partial score tiles are in

    float s[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
      float4 x = score_s[j * 32 + lane];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) {
        const float4 y = score_s[(w * kKeyTiles + j) * 32 + lane];
        x.x += y.x, x.y += y.y, x.z += y.z, x.w += y.w;
      }
      s[j][0] = x.x, s[j][1] = x.y, s[j][2] = x.z, s[j][3] = x.w;
    }

    // Online softmax (log2 domain), the same in every warp; keys past the split's end
    // (its last tile only) are masked.
    const int key0 = key_lo + t * kKeys + 2 * t4;
    const bool full = key_lo + (t + 1) * kKeys <= key_hi;
    float tmax[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool ok = full || key0 + 8 * j + e < key_hi;
        s[j][e] = ok ? s[j][e] * p.scale_log2 : -INFINITY;
        s[j][2 + e] = ok ? s[j][2 + e] * p.scale_log2 : -INFINITY;
        tmax[0] = fmaxf(tmax[0], s[j][e]);
        tmax[1] = fmaxf(tmax[1], s[j][2 + e]);
      }
    float resc[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 1));
      tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 2));
      const float m_new = fmaxf(m[i], tmax[i]);
      resc[i] = fast_exp2(m[i] - m_new);
      m[i] = m_new;
      l[i] *= resc[i];
    }
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[j][c] = fast_exp2(s[j][c] - m[c >> 1]);
        l[c >> 1] += s[j][c];
      }
    // Past the first tiles a row's max rarely moves: skip the 64 multiplies by 1.
    if (__any_sync(0xffffffffu, resc[0] != 1.f || resc[1] != 1.f)) scale_fragment_rows(o, resc);

    // O[:, this warp's 128 columns] += P V, V = the tile's first 512 columns.
    const int v_col0 = warp * kVCols;
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const uint32_t pa[4] = {pack_float2<T>(s[2 * kk][0], s[2 * kk][1]), pack_float2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack_float2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_float2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < kVTiles / 2; ++np) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, ks + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * kStride + v_col0 + np * 16 +
                                  (lane >> 4) * 8);
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        mma_m16n8k16<T>(o[2 * np], pa, b0);
        mma_m16n8k16<T>(o[2 * np + 1], pa, b1);
      }
    }
  }
  cp_async_wait_all();

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
  bad = __syncthreads_or(bad) != 0;
  mla_store_rows<T, kVTiles>(p, b, head0, g, rows_here, warp * kVCols + 2 * t4, split, range.eff, m, l, bad,
                             warp == 0 && t4 == 0,
                             [&](int n, int h) { return make_float2(o[n][2 * h], o[n][2 * h + 1]); });
}

// The splits of query rows: a block of 512 threads serves 4 / kGroups rows (row blockIdx.x *
// rows + the thread's row), kGroups groups of 128 threads per row. Each group folds every
// kGroups-th split (log-sum-exp, decode_fold_splits, up to 8 loads in flight a thread), one
// float4 column per thread, then group 0 merges the groups. Many splits a row (one sequence,
// 64 splits) want kGroups = 4 for loads in flight; few splits a row want 1, so no group idles
// and a block carries 4 rows (mla_combine_groups, NOTES.md "MLA: the combine and the split rule").
// kTileKeys: the attention kernel's tile, the unit its splits are cut in (split_count).
constexpr int kCombineThreads = 4 * kDv / 4;
template <typename T, int kTileKeys, int kGroups>
__global__ void __launch_bounds__(kCombineThreads) mla_decode_combine_kernel(const MlaKernelParams p) {
  constexpr int kRowsPerBlock = 4 / kGroups;
  __shared__ float2 state_s[kRowsPerBlock][kGroups];
  __shared__ float4 acc_s[kRowsPerBlock][kGroups > 1 ? kGroups - 1 : 1][kDv / 4];
  pdl_wait_primary();  // every split's partials are written
  const int c4 = threadIdx.x % (kDv / 4), grp = (threadIdx.x / (kDv / 4)) % kGroups;
  const int rib = threadIdx.x / (kGroups * kDv / 4);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + rib;
  const bool live = row < p.total_rows;
  const int b = live ? static_cast<int>(row / p.num_q_heads) : 0, head = static_cast<int>(row % p.num_q_heads);
  // The attention kernel's split count for this sequence (a bad length ran as length 0:
  // split 0 holds NaN).
  const int eff = live ? mla_split_range<kTileKeys>(p, b, 0).eff : 0;
  const int mine = eff > grp ? div_ceil(eff - grp, kGroups) : 0;  // splits grp, grp + kGroups, ...
  const float2* ps = p.partial_state + row;
  const float* po = p.partial_o + row * kDv + 4 * c4;
  float m = kNegInf, l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  bool nan_seen = false;
  constexpr int kFoldBatch = 8;
  for (int s0 = 0; s0 < mine; s0 += kFoldBatch) {
    decode_fold_splits<kFoldBatch>(
        s0, min(kFoldBatch, mine - s0),
        [&](int s, float2& st, float4& x) {
          const int64_t split = grp + static_cast<int64_t>(kGroups) * s;
          st = __ldcg(ps + split * p.total_rows);
          x = __ldcg(reinterpret_cast<const float4*>(po + split * p.total_rows * kDv));
        },
        m, l, acc, nan_seen);
  }
  if (nan_seen) m = l = __int_as_float(0x7fc00000);
  if constexpr (kGroups > 1) {
    if (grp > 0) {
      if (c4 == 0) state_s[rib][grp] = make_float2(m, l);
      acc_s[rib][grp - 1][c4] = acc;
    }
    __syncthreads();
    if (grp > 0) return;
    // Group 0 folds the other groups' results as it folded its splits.
    decode_fold_splits<kGroups - 1>(
        1, kGroups - 1,
        [&](int g, float2& st, float4& x) {
          st = state_s[rib][g];
          x = acc_s[rib][g - 1][c4];
        },
        m, l, acc, nan_seen);
  }
  if (!live) return;
  const float inv = nan_seen ? __int_as_float(0x7fc00000) : (l > 0.f ? 1.f / l : 0.f);
  if (p.lse != nullptr && c4 == 0) p.lse[row] = decode_row_lse(m, l, nan_seen);
  T* orow = static_cast<T*>(p.out) + b * p.o_sb + head * p.o_sh + 4 * c4;
  *reinterpret_cast<uint2*>(orow) =
      make_uint2(pack_float2<T>(acc.x * inv, acc.y * inv), pack_float2<T>(acc.z * inv, acc.w * inv));
}

// Groups per row of the combine kernel: 1 (four rows a block) up to 8 splits, where one
// thread's batch of loads covers every split; 4 beyond. Dev knob CLO_MLA_COMBINE_GROUPS (1 or 4;
// read as decode_dev_kernel's knobs are) forces one.
int mla_combine_groups(int num_splits) {
  static bool dev_mode = std::getenv("CLO_MLA_COMBINE_GROUPS") != nullptr;
  const int forced = dev_knob("CLO_MLA_COMBINE_GROUPS", dev_mode, 0);
  if (forced == 1 || forced == 4) return forced;
  return num_splits <= 8 ? 1 : 4;
}

template <typename T, int kTileKeys>
void (*mla_combine_for(int groups))(MlaKernelParams) {
  return groups == 1 ? mla_decode_combine_kernel<T, kTileKeys, 1> : mla_decode_combine_kernel<T, kTileKeys, 4>;
}

// Whether two 2-stage blocks share an SM on this device: 2 x 101 KB (and 1 KB reserved per
// block) fit the H100's 228 KB of shared memory per SM, not the A100's 164 KB, where the
// 2-stage kernel would run one block per SM with a shallower pipeline and no company.
bool mla_two_blocks_per_sm() {
  return 2 * (smem_bytes<2>() + 1024) <= cached_device_attribute<cudaDevAttrMaxSharedMemoryPerMultiprocessor>();
}

// Pipeline stages for a grid of `blocks`: 3 (one block per SM, a tile more in flight) up to
// one block per SM, where the 2-stage kernel's second block slot stays empty anyway, and on
// devices where two 2-stage blocks do not share an SM; 2 beyond (two blocks per SM hide each
// other's latencies). Dev knob CLO_MLA_STAGES (2 or 3;
// read as decode_dev_kernel's knobs are) forces one.
int mla_stages_for(int64_t blocks) {
  static bool dev_mode = std::getenv("CLO_MLA_STAGES") != nullptr;
  const bool three_fit = smem_bytes<3>() <= smem_budget_per_block();
  const int forced = dev_knob("CLO_MLA_STAGES", dev_mode, 0);
  if (forced == 2 || forced == 3) return forced == 3 && three_fit ? 3 : 2;
  return three_fit && (blocks <= device_sm_count() || !mla_two_blocks_per_sm()) ? 3 : 2;
}

// Whether a call of num_q_heads heads runs the wgmma kernel: a device that runs this unit's
// sm_90a image and grants its 226 KB, and kMlaSm90MinHeads+ heads (NOTES.md "MLA, wgmma"). Dev knob
// CLO_MLA_SM90 (read as decode_dev_kernel's knobs are): 0 never, 1 wherever it can run.
bool mla_sm90_applies(int num_q_heads) {
  if (!wgmma::sm90a_image_loaded() || static_cast<int64_t>(mla_sm90::kSmemBytes) > smem_budget_per_block()) return false;
  static bool dev_mode = std::getenv("CLO_MLA_SM90") != nullptr;
  const int forced = dev_knob("CLO_MLA_SM90", dev_mode, -1);
  if (forced == 0 || forced == 1) return forced == 1;
  return num_q_heads >= kMlaSm90MinHeads;
}

// Query heads per block of the kernel that runs: 64 on the wgmma kernel, 16 on mma.sync.
int mla_row_heads(bool sm90) { return sm90 ? kMlaSm90Heads : kRows; }

template <typename T>
cudaError_t run_mla_decode(const MlaDecodeArgs& a, cudaStream_t stream) {
  MlaKernelParams p{};
  p.q = a.q;
  p.out = a.out;
  p.kv = a.kv_cache;
  p.block_tables = a.block_tables;
  p.seq_lens = a.seq_lens;
  p.lse = a.lse;
  p.q_sb = a.q_stride_b;
  p.q_sh = a.q_stride_h;
  p.o_sb = a.o_stride_b;
  p.o_sh = a.o_stride_h;
  p.table_stride = a.table_stride;
  p.total_rows = static_cast<int64_t>(a.batch) * a.num_q_heads;
  p.num_q_heads = a.num_q_heads;
  const bool sm90 = mla_sm90_applies(a.num_q_heads);
  p.row_tiles = div_ceil(a.num_q_heads, mla_row_heads(sm90));
  p.num_splits = a.num_splits;
  p.num_blocks = a.num_blocks;
  p.block_size = a.block_size;
  p.bs_mask = a.block_size - 1;
  p.log2_bs = 0;
  while ((1 << p.log2_bs) < a.block_size) ++p.log2_bs;
  p.capacity = a.max_blocks_per_seq * a.block_size;
  p.scale_log2 = a.scale * kLog2e;
  if (a.num_splits > 1) {
    p.partial_o = a.workspace;
    p.partial_state =
        reinterpret_cast<float2*>(a.workspace + decode_partial_slots(a.num_splits) * p.total_rows * kDv);
  }
  // The wgmma kernel (one block per SM), or the mma.sync kernel at the pipeline depth its
  // grid takes; the combine kernel recounts splits in the attention kernel's tile.
  void (*kernel)(MlaKernelParams);
  void (*combine)(MlaKernelParams);
  const int groups = mla_combine_groups(a.num_splits);
  int threads;
  int64_t smem;
  if (sm90) {
    kernel = mla_sm90::mla_decode_attention_sm90_kernel<T>;
    combine = mla_combine_for<T, kMlaSm90TileKeys>(groups);
    threads = mla_sm90::kThreads;
    smem = mla_sm90::kSmemBytes;
  } else {
    const int stages = mla_stages_for(static_cast<int64_t>(p.row_tiles) * a.batch * a.num_splits);
    kernel = stages == 3 ? mla_decode_attention_kernel<T, 3> : mla_decode_attention_kernel<T, 2>;
    combine = mla_combine_for<T, kKeys>(groups);
    threads = kThreads;
    smem = stages == 3 ? smem_bytes<3>() : smem_bytes<2>();
  }
  if (const cudaError_t err = set_dynamic_smem(kernel, smem); err != cudaSuccess) return err;
  const dim3 grid(p.row_tiles, a.batch, a.num_splits);
  if (const cudaError_t err = launch_kernel(kernel, grid, dim3(threads), smem, stream, false, p);
      err != cudaSuccess || a.num_splits == 1)
    return err;
  return launch_kernel(combine, dim3(static_cast<unsigned>(div_ceil<int64_t>(p.total_rows, 4 / groups))),
                       dim3(kCombineThreads), 0, stream, device_cc_major() >= 9, p);
}

// The wgmma kernel's splits, from a time model fitted to the H100 split sweep (NOTES.md "MLA:
// the combine and the split rule"): with s splits a call takes about
//   max(a x ceil(tiles / s) x waves(s), stream) + k x rows x s   (s > 1),
// a = 1.8 us per 64-key tile of a block, waves = ceil(units x s / SMs), stream = the cache
// (B x N x 1152 B) at ~2.8 TB/s (what the kernel streams once most SMs hold a block: 2.7-2.9
// TB/s at 64/16K/64 and /32 on 2 splits, 32/16K/64 on 3; at 2.5, 64-head calls with long
// tables stayed unsplit or split too little, 5-11% slower: NOTES.md "MLA: the stream rate
// of the split rule"), k = 2 ns per split of a query row (its 2 KB of fp32 partials
// written, then read by the combine kernel: with 128 heads a split costs as much traffic as
// ~450 keys of the cache). The count is the model's minimum over s up to cap().
struct MlaSm90SplitModel {
  static constexpr double kTileNs = 1800.0, kRowSplitNs = 2.0, kStreamBytesPerNs = 2800.0;
  static constexpr double kKeyBytes = kMlaHeadDimQK * 2.0;
  int64_t batch, units, rows, tiles, sms;

  double ns(int64_t s, double stream) const {
    const double compute = kTileNs * static_cast<double>(div_ceil(tiles, s) * div_ceil(units * s, sms));
    return std::max(compute, stream) + (s > 1 ? kRowSplitNs * static_cast<double>(rows * s) : 0.0);
  }
  // A bound on the minimum that never grows for a narrower table or a larger batch, so a
  // workspace sized by it for a table and batch serves every narrower table and smaller batch
  // (mla_decode_workspace_floats_upto); the minimum itself is not monotone (B=16, 128 heads:
  // 4 splits at 2048 keys, 3 at 2112; B=1: 22 at 4096, 23 at 2944). It is 1.25x the least of
  // three limits of the model, the first two with slack for the waves and ceilings they leave
  // out: 3 x SMs / units (past one block per SM the tile term falls only by whole waves), 3 x
  // the count at which one wave's tile term meets the stream, a x 2.8 TB/s / (64 x 1152 B x B),
  // and sqrt(a x tiles / (k x rows)) (the tile term against the partials).
  int64_t cap() const {
    const double fill = 3.0 * static_cast<double>(sms) / static_cast<double>(units);
    const double meet = 3.0 * kTileNs * kStreamBytesPerNs / (kMlaSm90TileKeys * kKeyBytes * static_cast<double>(batch));
    const double balance = std::sqrt(kTileNs * static_cast<double>(tiles) / (kRowSplitNs * static_cast<double>(rows)));
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(1.25 * std::min({fill, meet, balance}))));
  }
  int64_t best(int64_t most) const {
    const int64_t last = std::min(most, cap());
    const double stream = static_cast<double>(batch * tiles) * kMlaSm90TileKeys * kKeyBytes / kStreamBytesPerNs;
    int64_t pick = 1;
    double least = ns(1, stream);
    for (int64_t s = 2; s <= last; ++s) {
      const double t = ns(s, stream);
      if (t < least) pick = s, least = t;
    }
    return pick;
  }
};

// The heuristic's count or, with `bound`, a count it never exceeds for this batch and table
// nor for any smaller batch or narrower table (what a workspace is sized by).
//
// The mma.sync kernel: about one block per SM over the B x row tiles units: SMs / units
// splits, rounded to nearest (NOTES.md "MLA", v2 sweep: 64 units best at 2 splits, 16 at 8,
// one sequence of 16 heads at 64-128; 128 units unsplit, where 2 splits on two blocks per SM
// were 3-17% slower), and about two per SM (2-stage pipelines) for grids of at most half the
// SMs in units of 64 heads or more (v4, Hq=128: B=1/16K 33 splits 46.1 us against 50.5 at 17
// on 3 stages; B=4/4K 8 splits 47.9 against 51.8 at 4; B=8/4K 4 splits 87.0 against 95.6 at 2).
// Both: never splits shorter than kMlaMinKeysPerSplit of max_kv_len, at most kMaxSplits.
int64_t mla_splits(int batch, int num_q_heads, int max_kv_len, bool bound) {
  const bool sm90 = mla_sm90_applies(num_q_heads);
  const int64_t row_tiles = div_ceil(std::max(num_q_heads, 1), mla_row_heads(sm90));
  const int64_t b = std::max(batch, 1), base = b * row_tiles;
  const int64_t sms = device_sm_count();
  const int64_t by_len = std::max<int64_t>(1, div_ceil<int64_t>(std::max(max_kv_len, 1), kMlaMinKeysPerSplit));
  const int64_t most = std::min<int64_t>(by_len, kMaxSplits);
  if (sm90) {
    const MlaSm90SplitModel model{b, base, b * std::max(num_q_heads, 1),
                                  div_ceil<int64_t>(std::max(max_kv_len, 1), kMlaSm90TileKeys), sms};
    return bound ? std::min(most, model.cap()) : model.best(most);
  }
  // Monotone as it is: `most` grows with the table, SMs / units falls with the batch.
  if (base >= sms) return 1;
  const int64_t slots = row_tiles >= 4 && 2 * base <= sms && mla_two_blocks_per_sm() ? 2 * sms : sms;
  return std::max<int64_t>(1, std::min<int64_t>((slots + base / 2) / base, most));
}

}  // namespace

int64_t mla_decode_smem_bytes() { return smem_bytes<2>(); }
bool mla_decode_fits() { return smem_bytes<2>() <= smem_budget_per_block(); }

int mla_decode_num_splits(int batch, int num_q_heads, int max_kv_len) {
  return static_cast<int>(mla_splits(batch, num_q_heads, max_kv_len, false));
}

int64_t mla_decode_workspace_floats_upto(int batch, int num_q_heads, int max_kv_len, int num_splits) {
  if (num_splits > 0) return decode_attention_workspace_floats(batch, num_q_heads, 1, kMlaHeadDimV, num_splits);
  // Smaller batches split more: every batch size up to `batch` (one buffer for all graph buckets).
  int64_t most = 0;
  for (int b = 1; b <= batch; ++b)
    most = std::max(most, decode_attention_workspace_floats(b, num_q_heads, 1, kMlaHeadDimV,
                                                            static_cast<int>(mla_splits(b, num_q_heads, max_kv_len, true))));
  return most;
}

cudaError_t launch_mla_decode_attention(const MlaDecodeArgs& a, cudaStream_t stream) {
  const bool shape_ok = a.batch >= 1 && a.batch <= kDecodeMaxBatch && a.num_q_heads >= 1 &&
                        static_cast<int64_t>(a.batch) * a.num_q_heads < (int64_t(1) << 31) &&
                        a.num_splits >= 1 && a.num_splits <= kMaxSplits && a.block_size >= 1 &&
                        (a.block_size & (a.block_size - 1)) == 0 && a.num_blocks >= 1 &&
                        a.max_blocks_per_seq >= 1 &&
                        static_cast<int64_t>(a.max_blocks_per_seq) * a.block_size < (int64_t(1) << 31);
  if (!shape_ok || !mla_decode_fits()) return cudaErrorInvalidValue;
  if (a.num_splits > 1) {
    const int64_t need = decode_attention_workspace_floats(a.batch, a.num_q_heads, 1, kMlaHeadDimV, a.num_splits);
    if (a.workspace == nullptr || a.workspace_floats < need || reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0)
      return cudaErrorInvalidValue;
  }
  switch (a.dtype) {
    case DType::kFloat16: return run_mla_decode<__half>(a, stream);
    case DType::kBFloat16: return run_mla_decode<__nv_bfloat16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace cuda_llm_ops::decode
