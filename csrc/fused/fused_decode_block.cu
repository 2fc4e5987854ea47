// Fused decode attention block on Hopper (ClusterFusion's dataflow, seeds/003): for one new
// token per sequence, one kernel runs
//   qkv = x @ w_qkv^T -> rotary embedding on q, k -> k, v appended to the paged cache
//   -> attention over the cache -> out = o @ w_o^T
// with every intermediate in shared memory. One thread-block cluster per head; its kC
// blocks split
//   the projection along the head dim (block r computes dims [r*128/kC, (r+1)*128/kC) of
//     q, k and v) and gather the slices into every block through distributed shared memory,
//   the attention along the cached tokens (block r: a contiguous 1/kC of them, the last
//     block also the new token from shared memory) and merge the partial softmax states
//     the same way, so every block holds the head's output row,
//   the output projection along the output columns (block r: hidden / kC of them).
// The heads' output projections are summed with fp32 reductions (red.global.add.v2) into a
// workspace; the last of the heads' warps to finish a column range converts it to the
// output and zeroes it again (counters, no second kernel, no memset per call).
//
// Why this shape: at batch 1 the step reads 134 MB of Llama-2-7B weights and the KV cache
// once, so it is memory-bound; the unfused sequence adds launches, round trips of q/k/v and
// o through global memory and a split-KV merge. Floors and measured versions: NOTES.md.
#include <algorithm>
#include <cstdlib>

#include "cuda_llm_ops/cluster.cuh"
#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "cuda_llm_ops/tma.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"
#include "fused/fused_decode_block.h"

// The sm_80 pass compiles the Hopper kernel's body out, leaving its constants and FusedCfg's
// members unreferenced (warning 177).
#pragma nv_diag_suppress 177

namespace cuda_llm_ops::fused {
namespace {

constexpr int kD = kFusedHeadDim;
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxCluster = 4;
// Projection ring: kStages stages of kStageBytes (FusedCfg::kStageRows weight rows x kStageK), so
// that two blocks fit on an SM (the cluster scheduler then places all heads' clusters at once:
// with one block per SM at most 30 clusters of 4 fit on the H100, NOTES.md).
constexpr int kStages = 3, kStageBytes = 24576;

// A warp asks L2 for its output-projection rows of w_o this many attention steps before its
// last: late enough that the keys streamed after them do not evict the rows (128 blocks x
// 2 steps x 128 keys x 512 bytes = 16 MB), early enough to hide the first loads.
constexpr int kPrefetchWoSteps = 2;
// Keys of the first sequence whose K/V rows the block asks L2 for while its projection drains.
constexpr int kPrefetchKvKeys = 32;

template <int kC, int kMT>
struct FusedCfg {
  // Keys a half-warp loads per attention step (K and V: 2 * kTokenBatch 16-byte loads per
  // lane). 16-row groups (one half-warp per sequence) keep two steps of 4 in flight; 8-row
  // groups (2 to 16 half-warps per sequence) one step of 8, measured faster there (NOTES.md).
  static constexpr bool kPipelined = kMT == 2;
  static constexpr int kTokenBatch = kPipelined ? 4 : 8, kBuffers = kPipelined ? 2 : 1;
  static constexpr int kSliceRows = kD / kC;                   // rows of each of q, k, v per block
  static constexpr int kProjRows = 3 * kSliceRows;             // 96 (kC = 4) or 192 (kC = 2)
  // A round of kRound stages covers every weight row for kStageK k: stage h of a round holds
  // rows [h, h + 1) * kStageRows. All blocks stream the same k range at once, so the length
  // of each row's piece is what a DRAM page visit gets: two stages a round (at kC = 4, 512
  // contiguous bytes a row, not 256) took the projection from 50 to 44 us at Llama-2-7B
  // shapes (NOTES.md, "Where the time goes"). The 16-row groups keep one: twice their 48
  // accumulators made ptxas spill 52-104 bytes (the 8-row kernels spill 8 with two).
  static constexpr int kRound = kMT == 1 ? 2 : 1;
  static constexpr int kStageRows = kProjRows / kRound;
  static constexpr int kStageK = kStageBytes / (2 * kStageRows);  // kC = 4: 256 (kRound 2), 128; kC = 2: 128, 64
  static constexpr int kRowBytes = 2 * kStageK;
  static constexpr int kChunks = kStageK / 8;                  // 16-byte chunks of a row per stage
  static constexpr int kWindows = kStageK / 32;                // 32-k mma windows per stage
  static constexpr int kUnits = kStageRows / 16 * kWindows / kWarps;  // (strip, window) pairs per warp and stage
  static constexpr int kCopies = kStageRows * kChunks / kThreads;     // cp.async per thread per stage
  static constexpr int kRows = 8 * kMT;                        // batch rows, padded to the n8 tiles
  static_assert(kStageRows % 16 == 0 && kStageRows / 16 * kWindows % kWarps == 0 &&
                kStageRows * kChunks % kThreads == 0);
  static_assert(kWarps % kWindows == 0, "a warp keeps one window of every stage");
  // Shared memory: the projection ring, reused after the projection by
  //   [0, kPartBytes)            the warps' partial projections, then (after cluster sync 1)
  //                              the kC blocks' partial attention states (written by peers)
  //   [kHalfWarpOff, +...)       the half-warps' attention states of every sequence
  //   [kOutOff, +...)            the head's output rows (the output projection's operand)
  // and, apart (peers write it while this block may still be in its projection), the
  // gathered q, k, v rows and the new tokens' scores.
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kPartBytes = kWindows * kProjRows * kRows * 4;
  static constexpr int kExchangeBytes = kC * kRows * (kD + 2) * 4;
  static constexpr int kHalfWarpOff = ((std::max(kPartBytes, kExchangeBytes) + 127) / 128) * 128;
  static constexpr int kOutOff = kHalfWarpOff + 16 * (kD + 2) * 4;
  static_assert(kOutOff + kRows * kD * 2 <= kRingBytes);
  static constexpr int kGatherBytes = 3 * kRows * kD * 4;
  static constexpr int kSmemBytes = kRingBytes + kGatherBytes + kRows * 4;
};

template <typename T>
CLO_DEVICE float round_to(float v) { return to_float<T>(from_float<T>(v)); }

// Fire-and-forget fp32 adds of two adjacent floats (sm_90).
CLO_DEVICE void red_add_v2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#endif
}

template <typename T>
CLO_DEVICE void unpack8(const uint4& v, float (&f)[8]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_float<T>(e[i]);
}

template <typename T, int kC, int kMT>
__global__ void __launch_bounds__(kThreads, 2) fused_decode_block_sm90_kernel(const FusedDecodeBlockProblem p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Cfg = FusedCfg<kC, kMT>;
  constexpr int kTokenBatch = Cfg::kTokenBatch, kBuffers = Cfg::kBuffers;
  constexpr int kRows = Cfg::kRows;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  float* gathered = reinterpret_cast<float*>(smem + Cfg::kRingBytes);  // [3][kRows][kD]: q, k, v
  float* new_score = gathered + 3 * kRows * kD;                         // [kRows]

  const int rank = static_cast<int>(cluster::ctarank()), head = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
#ifdef CLO_DEV_STAMPS
  // The slot is recomputed from the kernel parameter at every stamp: a pointer kept live across
  // the phases made ptxas spill at the 128-register cap.
  auto stamp = [&](int i, unsigned long long v = 0) {
    if (p.dev_stamps != nullptr && threadIdx.x == 0) {
      const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      p.dev_stamps[kFusedDevStamps * block + i] = i == 7 ? v : global_timer_ns();
    }
  };
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  stamp(0);
  stamp(7, smid);
#else
  auto stamp = [](int) {};
#endif
  // Batch group blockIdx.z: sequences row0 .. row0 + B - 1 (local index b below).
  const int row0 = blockIdx.z * kRows, B = min(p.batch - row0, kRows), hidden = p.hidden, H = p.heads;
  const T* x = static_cast<const T*>(p.x) + static_cast<int64_t>(row0) * hidden;
  const int* seq_lens = p.seq_lens + row0;
  const int* block_tables = p.block_tables + static_cast<int64_t>(row0) * p.max_blocks;

  const int bs_shift = __ffs(p.block_size) - 1, bs_mask = p.block_size - 1;
  const int capacity = p.max_blocks * p.block_size;
  // The cache slot of token `pos` of sequence b, or -1 past the table or the pool (the
  // binding's host check reports those; the kernel only never touches memory out of range).
  auto slot_of = [&](int b, int pos) -> int64_t {
    const int blk = __ldg(block_tables + static_cast<int64_t>(b) * p.max_blocks + (pos >> bs_shift));
    return blk >= 0 && blk < p.num_blocks ? (static_cast<int64_t>(blk) << bs_shift) + (pos & bs_mask) : -1;
  };
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  // This block's share of sequence b's cached keys: [begin, end).
  auto key_range = [&](int b, int& begin, int& end) {
    const int L = min(__ldg(seq_lens + b), capacity);
    const int n_old = max(L - 1, 0), per = div_ceil(n_old, kC);
    begin = min(rank * per, n_old);
    end = min(begin + per, n_old);
  };

  // ---- 1. this block's slice of q, k and v ------------------------------------------------
  // Weight rows stream through a cp.async ring (stage s: rows [s % kRound, + 1) * kStageRows,
  // k in [s / kRound, + 1) * kStageK); odd rows swap 16-byte chunk halves so the lanes of a
  // quarter-warp hit distinct banks. Warp w owns window w % kWindows of every stage and kUnits
  // strips of 16 rows of it (kRound * kUnits accumulator tiles in all).
  {
    const T* w_qkv = static_cast<const T*>(p.w_qkv);
    constexpr int kRound = Cfg::kRound;
    const int n_stages = hidden / Cfg::kStageK * kRound;
    auto issue = [&](int s) {
      if (s < n_stages) {
        unsigned char* slot = ring + (s % kStages) * kStageBytes;
#pragma unroll
        for (int i = 0; i < Cfg::kCopies; ++i) {
          const int c = tid + i * kThreads, row = c / Cfg::kChunks, cc = c % Cfg::kChunks;
          const int prow = s % kRound * Cfg::kStageRows + row;  // 0 .. kProjRows - 1
          const int which = prow / Cfg::kSliceRows, j = prow % Cfg::kSliceRows;
          const T* src = w_qkv + (static_cast<int64_t>(which * H + head) * kD + rank * Cfg::kSliceRows + j) * hidden +
                         s / kRound * Cfg::kStageK + 8 * cc;
          cp_async_16(slot + row * Cfg::kRowBytes + ((cc ^ ((row & 1) << 2)) << 4), src);
        }
      }
      cp_async_commit();
    };
    const int win = warp % Cfg::kWindows;
    auto load_x = [&](int s, uint4 (&xv)[kMT]) {  // the lane's 8 k of x rows 8 * mt + g for stage s
      const int k = s / kRound * Cfg::kStageK + 32 * win + 8 * t;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int row = 8 * mt + g;
        xv[mt] = row < B && s < n_stages ? __ldg(reinterpret_cast<const uint4*>(x + static_cast<int64_t>(row) * hidden + k))
                                         : make_uint4(0, 0, 0, 0);
      }
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(s);
    float acc[kRound * Cfg::kUnits][kMT][4] = {};
    uint4 xv[kMT];
    load_x(0, xv);
    for (int s0 = 0; s0 < n_stages; s0 += kRound) {
      uint4 xn[kMT];
#pragma unroll
      for (int h = 0; h < kRound; ++h) {  // unrolled: h indexes the accumulators at compile time
        const int s = s0 + h;
        cp_async_wait<kStages - 2>();
        __syncthreads();  // stage s landed for all; every warp is done with the slot refilled next
        issue(s + kStages - 1);
        if (s == max(n_stages - kStages + 1, 0) && tid < 2 * kPrefetchKvKeys) {  // the last stage is issued
          int begin, end;
          key_range(0, begin, end);
          const int tok = begin + tid / 2;
          const int64_t slot = tok < end ? slot_of(0, tok) : -1;
          if (slot >= 0) tma::prefetch_l2((tid % 2 ? v_cache : k_cache) + (slot * H + head) * kD, kD * sizeof(T));
        }
        if (h == 0) load_x(s + kRound, xn);  // x of the next round, used after its last stage
        const unsigned char* slot = ring + (s % kStages) * kStageBytes;
        const int chunk = (4 * win + t) ^ ((g & 1) << 2);  // rows g and g + 8 share the parity
#pragma unroll
        for (int u = 0; u < Cfg::kUnits; ++u) {
          const int r0 = (warp + kWarps * u) / Cfg::kWindows * 16 + g;
          const uint4 w0 = *reinterpret_cast<const uint4*>(slot + r0 * Cfg::kRowBytes + (chunk << 4));
          const uint4 w1 = *reinterpret_cast<const uint4*>(slot + (r0 + 8) * Cfg::kRowBytes + (chunk << 4));
          nk_mma_window<T, kMT>(acc[h * Cfg::kUnits + u], w0, w1, xv);
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) xv[mt] = xn[mt];
    }
    cp_async_wait<0>();
    __syncthreads();  // the ring is free: the windows' partial sums go there
    stamp(1);
    float* part = reinterpret_cast<float*>(ring);  // [kWindows][kProjRows][kRows]
#pragma unroll
    for (int u = 0; u < kRound * Cfg::kUnits; ++u) {
      const int r0 = u / Cfg::kUnits * Cfg::kStageRows + (warp + kWarps * (u % Cfg::kUnits)) / Cfg::kWindows * 16 + g;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int b = 8 * mt + 2 * t;
        float* p0 = part + (win * Cfg::kProjRows + r0) * kRows + b;
        p0[0] = acc[u][mt][0];
        p0[1] = acc[u][mt][1];
        p0[8 * kRows] = acc[u][mt][2];
        p0[8 * kRows + 1] = acc[u][mt][3];
      }
    }
    __syncthreads();
    // Sum the windows, round as a separate projection's output would be, and write the
    // value into every block of the cluster (this one included) at its head-dim offset.
    for (int e = tid; e < Cfg::kProjRows * kRows; e += kThreads) {
      const int row = e / kRows, b = e % kRows;
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < Cfg::kWindows; ++w) v += part[(w * Cfg::kProjRows + row) * kRows + b];
      const int which = row / Cfg::kSliceRows, d = rank * Cfg::kSliceRows + row % Cfg::kSliceRows;
      const float* dst = gathered + (which * kRows + b) * kD + d;
      v = round_to<T>(v);
#pragma unroll
      for (int r = 0; r < kC; ++r) cluster::store_remote(cluster::map_shared(dst, r), v);
    }
  }
  cluster::sync();  // 1: every block holds the head's q, k and v rows
  stamp(2);

  // ---- 2. rotary embedding (rotate-half form) and the cache append ---------------------------
  if (p.cos != nullptr) {
    const T* cos = static_cast<const T*>(p.cos) + row0 * kD;
    const T* sin = static_cast<const T*>(p.sin) + row0 * kD;
    constexpr int kHalf = kD / 2;
    for (int e = tid; e < 2 * B * kHalf; e += kThreads) {
      const int which = e / (B * kHalf), b = e / kHalf % B, i = e % kHalf;
      float* row = gathered + (which * kRows + b) * kD;
      const float x0 = row[i], x1 = row[i + kHalf];
      const float c0 = to_float<T>(cos[b * kD + i]), s0 = to_float<T>(sin[b * kD + i]);
      const float c1 = to_float<T>(cos[b * kD + i + kHalf]), s1 = to_float<T>(sin[b * kD + i + kHalf]);
      row[i] = round_to<T>(x0 * c0 - x1 * s0);
      row[i + kHalf] = round_to<T>(x1 * c1 + x0 * s1);
    }
    __syncthreads();
  }
  // Block r appends the new k and v of sequences b = r (mod kC); no block of this launch
  // reads that slot from memory (the last block takes the new token from shared memory).
  for (int e = tid; e < B * 2 * (kD / 8); e += kThreads) {
    const int b = e / (2 * (kD / 8)), which = e / (kD / 8) % 2, c = e % (kD / 8);
    const int L = __ldg(seq_lens + b);
    if (b % kC != rank || L < 1 || L > capacity) continue;
    const int64_t slot = slot_of(b, L - 1);
    if (slot < 0) continue;
    const float* src = gathered + ((1 + which) * kRows + b) * kD + 8 * c;
    uint4 packed;
    packed.x = pack_float2<T>(src[0], src[1]);
    packed.y = pack_float2<T>(src[2], src[3]);
    packed.z = pack_float2<T>(src[4], src[5]);
    packed.w = pack_float2<T>(src[6], src[7]);
    T* cache = static_cast<T*>(which == 0 ? p.k_cache : p.v_cache);
    *reinterpret_cast<uint4*>(cache + (slot * H + head) * kD + 8 * c) = packed;
  }

  // ---- 3. attention over this block's share of the cached tokens ----------------------------
  // G half-warps per sequence (16 for one, 1 for 16): half-warp hw serves sequence hw / G and
  // takes its keys begin + hw % G + G j, kTokenBatch per step; lane hl of it holds dims
  // [8 hl, 8 hl + 8). Every sequence streams at once, with no barrier between sequences.
  float* exchange = reinterpret_cast<float*>(ring);                        // [kC][kRows][kD + 2]
  float* half_state = reinterpret_cast<float*>(ring + Cfg::kHalfWarpOff);  // [16][kD + 2]
  const float scale_log2 = p.scale * kLog2e;
  const int hw = 2 * warp + lane / 16, hl = lane % 16;
  // The rows of w_o this warp multiplies in step 4 (hidden / kC / kWarps of them, 256 bytes each).
  const int cols = hidden / kC, strips = cols / 16 / kWarps;
  const int n_warp = rank * cols + warp * strips * 16;
  const T* w_o = static_cast<const T*>(p.w_o) + head * kD;
  const int64_t ld_o = static_cast<int64_t>(H) * kD;
  auto prefetch_w_o = [&]() {
    for (int r = lane; r < strips * 16; r += 32) tma::prefetch_l2(w_o + (n_warp + r) * ld_o, kD * sizeof(T));
  };
  {
    int G = 16;
    while (G * B > 16) G >>= 1;
    const int my_b = hw / G, hg = hw % G;
    const bool active = my_b < B;
    int begin = 0, end = 0;
    if (active) key_range(my_b, begin, end);
    const int n_keys = active && end > begin + hg ? div_ceil(end - begin - hg, G) : 0;
    const int n_steps = div_ceil(n_keys, kTokenBatch);
    const int warp_steps = max(n_steps, __shfl_xor_sync(0xffffffffu, n_steps, 16));  // both halves shuffle
    float q[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = gathered[(active ? my_b : 0) * kD + 8 * hl + i] * scale_log2;
    float m = kNegInf, l = 0.f, o[8] = {};
    uint4 kv[kBuffers][kTokenBatch], vv[kBuffers][kTokenBatch];
    bool ok[kBuffers][kTokenBatch];
    auto load_step = [&](int step, uint4 (&kd)[kTokenBatch], uint4 (&vd)[kTokenBatch], bool (&okd)[kTokenBatch]) {
#pragma unroll
      for (int u = 0; u < kTokenBatch; ++u) {
        const int j = step * kTokenBatch + u;
        const int64_t slot = j < n_keys ? slot_of(my_b, begin + hg + G * j) : -1;
        okd[u] = slot >= 0;
        const int64_t off = ((okd[u] ? slot : 0) * H + head) * kD + 8 * hl;
        kd[u] = okd[u] ? load_streaming_16(k_cache + off) : make_uint4(0, 0, 0, 0);
        vd[u] = okd[u] ? load_streaming_16(v_cache + off) : make_uint4(0, 0, 0, 0);
      }
    };
    if (Cfg::kPipelined && warp_steps > 0) load_step(0, kv[0], vv[0], ok[0]);
    for (int step = 0; step < warp_steps; step += kBuffers) {
#pragma unroll
      for (int half = 0; half < kBuffers; ++half) {  // register buffers by name: half = step parity
        const int cur = step + half, next = (half + 1) % kBuffers;
        if (cur >= warp_steps) break;
        if (cur == max(warp_steps - kPrefetchWoSteps, 0)) prefetch_w_o();
        if (!Cfg::kPipelined) {
          load_step(cur, kv[0], vv[0], ok[0]);
        } else if (cur + 1 < warp_steps) {  // step + 1 in flight while step is used
          load_step(cur + 1, kv[next], vv[next], ok[next]);
        }
        float s[kTokenBatch], m_new = m;
#pragma unroll
        for (int u = 0; u < kTokenBatch; ++u) {
          float kf[8];
          unpack8<T>(kv[half][u], kf);
          float dot = 0.f;
#pragma unroll
          for (int i = 0; i < 8; ++i) dot = fmaf(q[i], kf[i], dot);
          s[u] = group_reduce_sum<16>(dot);
          if (ok[half][u]) m_new = fmaxf(m_new, s[u]);
        }
        const float rescale = fast_exp2(m - m_new);
        l *= rescale;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[i] *= rescale;
#pragma unroll
        for (int u = 0; u < kTokenBatch; ++u) {
          const float pr = ok[half][u] ? fast_exp2(s[u] - m_new) : 0.f;
          float vf[8];
          unpack8<T>(vv[half][u], vf);
          l += pr;
#pragma unroll
          for (int i = 0; i < 8; ++i) o[i] = fmaf(pr, vf[i], o[i]);
        }
        m = m_new;
      }
    }
    if (warp_steps == 0) prefetch_w_o();  // no keys in this warp's share
    float* mine = half_state + hw * (kD + 2);
#pragma unroll
    for (int i = 0; i < 8; ++i) mine[8 * hl + i] = o[i];
    if (hl == 0) {
      mine[kD] = m;
      mine[kD + 1] = l;
    }
    if (rank == kC - 1) {  // the new tokens' scores, from the gathered rows (warp w: sequences w, w + 8)
      for (int b = warp; b < B; b += kWarps) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < kD / 32; ++i) {
          const int d = lane + 32 * i;
          dot = fmaf(gathered[b * kD + d], gathered[(kRows + b) * kD + d], dot);
        }
        dot = warp_reduce_sum(dot);
        if (lane == 0) new_score[b] = dot * scale_log2;
      }
    }
    __syncthreads();
    stamp(3);
    // The block's state of each sequence (its G half-warps and, in the last block, the new
    // token), pushed into every block's exchange slot.
    for (int e = tid; e < B * kD; e += kThreads) {
      const int b = e / kD, d = e % kD;
      const bool takes_new = rank == kC - 1 && __ldg(seq_lens + b) >= 1;
      const float* st = half_state + b * G * (kD + 2);
      float mx = takes_new ? new_score[b] : kNegInf;
      for (int h2 = 0; h2 < G; ++h2) mx = fmaxf(mx, st[h2 * (kD + 2) + kD]);
      float num = 0.f, den = 0.f;
      for (int h2 = 0; h2 < G; ++h2) {
        const float w = fast_exp2(st[h2 * (kD + 2) + kD] - mx);
        num = fmaf(w, st[h2 * (kD + 2) + d], num);
        den = fmaf(w, st[h2 * (kD + 2) + kD + 1], den);
      }
      if (takes_new) {
        const float w = fast_exp2(new_score[b] - mx);
        num = fmaf(w, gathered[(2 * kRows + b) * kD + d], num);
        den += w;
      }
      const float* slot = exchange + (rank * kRows + b) * (kD + 2);
#pragma unroll
      for (int r = 0; r < kC; ++r) {
        cluster::store_remote(cluster::map_shared(slot + d, r), num);
        if (d == 0) cluster::store_remote(cluster::map_shared(slot + kD, r), make_float2(mx, den));
      }
    }
  }
  cluster::sync();  // 2: every block holds all kC states of every sequence
  stamp(4);

  // Merge the kC states (the same order in every block, so all hold the same bits) into the
  // head's output rows, rounded as a separate attention kernel's output would be.
  T* o_rows = reinterpret_cast<T*>(ring + Cfg::kOutOff);  // [kRows][kD]
  for (int e = tid; e < kRows * kD; e += kThreads) {
    const int b = e / kD, d = e % kD;
    float v = 0.f;
    if (b < B) {
      float mx = kNegInf;
#pragma unroll
      for (int r = 0; r < kC; ++r) mx = fmaxf(mx, exchange[(r * kRows + b) * (kD + 2) + kD]);
      float num = 0.f, den = 0.f;
#pragma unroll
      for (int r = 0; r < kC; ++r) {
        const float* st = exchange + (r * kRows + b) * (kD + 2);
        const float w = fast_exp2(st[kD] - mx);
        num = fmaf(w, st[d], num);
        den = fmaf(w, st[kD + 1], den);
      }
      v = den > 0.f ? num / den : 0.f;
    }
    o_rows[e] = from_float<T>(v);
  }
  __syncthreads();

  // ---- 4. output projection: this block's hidden / kC columns, summed over heads ------------
  // Warp w takes a contiguous run of 16-row strips of w_o (its columns: head * 128 .. + 128),
  // the head's output rows as the n8 operand.
  float* sums = static_cast<float*>(p.workspace);  // [hidden][kFusedMaxBatch] fp32, all batch groups
  int* counters = reinterpret_cast<int*>(static_cast<char*>(p.workspace) +
                                         static_cast<size_t>(hidden) * kFusedMaxBatch * sizeof(float));
  uint4 ov[4][kMT];
#pragma unroll
  for (int w = 0; w < 4; ++w)
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
      ov[w][mt] = *reinterpret_cast<const uint4*>(o_rows + (8 * mt + g) * kD + 32 * w + 8 * t);
  for (int sp = 0; sp < strips; sp += 2) {
    uint4 wv[2][4][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int w = 0; w < 4; ++w)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int n = n_warp + (sp + i) * 16 + g + 8 * r;
          wv[i][w][r] = sp + i < strips ? load_streaming_16(w_o + n * ld_o + 32 * w + 8 * t) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (sp + i >= strips) break;
      float acc[kMT][4] = {};
#pragma unroll
      for (int w = 0; w < 4; ++w) nk_mma_window<T, kMT>(acc, wv[i][w][0], wv[i][w][1], ov[w]);
      const int n = n_warp + (sp + i) * 16 + g;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const int b = 8 * mt + 2 * t;
        if (b >= B) continue;
        red_add_v2(sums + static_cast<int64_t>(n) * kFusedMaxBatch + row0 + b, acc[mt][0], acc[mt][1]);
        red_add_v2(sums + static_cast<int64_t>(n + 8) * kFusedMaxBatch + row0 + b, acc[mt][2], acc[mt][3]);
      }
    }
  }
  // The warp's columns are complete once every head's warp has added to them: the last one
  // (the count's acq_rel add orders every lane's reductions, fenced before the warp barrier)
  // writes the output and leaves the sums and the counter zero for the next call.
  stamp(5);
  __threadfence();
  __syncwarp();
  int* counter = counters + rank * kWarps + warp;
  int last = 0;
  if (lane == 0) last = atomic_add_acq_rel_gpu(counter, 1) == H * static_cast<int>(gridDim.z) - 1;
  last = __shfl_sync(0xffffffffu, last, 0);
  if (last) {
    __threadfence();
    T* out = static_cast<T*>(p.out);
    const int rows = strips * 16, batch = p.batch;  // every batch group's rows
    for (int e = lane; e < rows * batch; e += 32) {
      const int n = n_warp + e / batch, b = e % batch;
      float* cell = sums + static_cast<int64_t>(n) * kFusedMaxBatch + b;
      out[static_cast<int64_t>(b) * hidden + n] = from_float<T>(__ldcg(cell));
      __stcg(cell, 0.f);
    }
    if (lane == 0) *counter = 0;
  }
  stamp(6);
#endif
}

template <typename T, int kC, int kMT>
cudaError_t launch_cfg(const FusedDecodeBlockProblem& p, cudaStream_t stream) {
  constexpr auto kernel = fused_decode_block_sm90_kernel<T, kC, kMT>;
  constexpr size_t smem = FusedCfg<kC, kMT>::kSmemBytes;
  if (const cudaError_t err = set_dynamic_smem(kernel, smem); err != cudaSuccess) return err;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg =
      cluster::launch_config(dim3(kC, static_cast<unsigned>(p.heads), div_ceil(p.batch, 8 * kMT)), kThreads, smem,
                             stream, kC, &attr);
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

template <typename T, int kMT>
cudaError_t launch_typed(const FusedDecodeBlockProblem& p, int cluster_size, cudaStream_t stream) {
  static bool dev_cluster = std::getenv("CLO_FUSED_CLUSTER") != nullptr;
  cluster_size = dev_knob("CLO_FUSED_CLUSTER", dev_cluster, cluster_size);
  // Clusters of 4 (128 blocks for 32 heads) measured faster than clusters of 2 at every
  // Llama-2-7B shape (NOTES.md), and ncu counts 62 clusters of 4 that fit at once. A rule that
  // took 4 only where cudaOccupancyMaxActiveClusters counted all heads' clusters ran the bench
  // at clusters-of-2 speed (98 us against 72 at B=1 / N=1024): it queried before the first
  // launch raised the kernel's shared-memory limit, so the query most likely failed.
  if (cluster_size == 0) cluster_size = 4;
  switch (cluster_size) {
    case 2: return launch_cfg<T, 2, kMT>(p, stream);
    case 4: return launch_cfg<T, 4, kMT>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

bool built_for_sm90() {
  static int version = -1;
  if (version < 0) {
    cudaFuncAttributes attrs{};
    version = cudaFuncGetAttributes(&attrs, fused_decode_block_sm90_kernel<__half, 4, 1>) == cudaSuccess
                  ? attrs.binaryVersion
                  : 0;
    cudaGetLastError();
  }
  return version >= 90;
}

}  // namespace

size_t fused_decode_block_workspace_bytes(int hidden) {
  return static_cast<size_t>(hidden) * kFusedMaxBatch * sizeof(float) + kMaxCluster * kWarps * sizeof(int);
}

const char* fused_decode_block_unsupported(int batch, int hidden, int heads, int kv_heads, int head_dim,
                                           int block_size) {
  if (device_cc_major() != 9) return "the fused kernel needs a Hopper GPU (compute capability 9.0)";
  if (!built_for_sm90()) return "the extension was built without sm_90a (TORCH_CUDA_ARCH_LIST=9.0a)";
  if (kv_heads != heads) return "the fused kernel covers multi-head attention only (kv_heads == heads)";
  if (head_dim != kD) return "the fused kernel is built for head_dim 128";
  if (batch < 1 || batch > kFusedMaxBatch) return "the fused kernel takes batches of 1 to 16";
  if (hidden % (kMaxCluster * 128) != 0) return "the fused kernel needs hidden to be a multiple of 512";
  if (heads < 1 || heads > 65535) return "heads must be 1 to 65535";
  if (block_size < 1 || (block_size & (block_size - 1)) != 0) return "block_size must be a power of two";
  return "";
}

cudaError_t launch_fused_decode_block(const FusedDecodeBlockProblem& p, int cluster_size, cudaStream_t stream) {
  const int kv_heads = p.heads, head_dim = kD;
  if (*fused_decode_block_unsupported(p.batch, p.hidden, p.heads, kv_heads, head_dim, p.block_size) != '\0' ||
      !(p.scale > 0.f) || p.max_blocks < 1 || (cluster_size != 0 && cluster_size != 2 && cluster_size != 4)) {
    return cudaErrorInvalidValue;
  }
  // Batches over 8 run as one 16-row group per head (two n8 tiles), so gridDim.z is 1. Two
  // 8-row groups per head along z (twice the blocks) measured slower and are no longer launched
  // (NOTES.md); the kernel's batch-group indexing stays: dropping it made ptxas spill 8 bytes
  // in the 16-row kernels.
  const bool two_tiles = p.batch > 8;
  switch (p.dtype) {
    case DType::kFloat16:
      return two_tiles ? launch_typed<__half, 2>(p, cluster_size, stream) : launch_typed<__half, 1>(p, cluster_size, stream);
    case DType::kBFloat16:
      return two_tiles ? launch_typed<__nv_bfloat16, 2>(p, cluster_size, stream)
                       : launch_typed<__nv_bfloat16, 1>(p, cluster_size, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace cuda_llm_ops::fused
