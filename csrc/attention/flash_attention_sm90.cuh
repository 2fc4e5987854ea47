// FlashAttention forward for Hopper (sm_90a): TMA loads, wgmma from shared-memory
// descriptors, warp specialisation (the FA3 design, written for this repo).
//
// One CTA of a producer and two consumer warpgroups (three on the 64 tile) owns 64 query
// rows per consumer of one (batch, query head); head-dim tiles of 64, 128, 192 and 256
// columns (Config):
//   warpgroup 0, producer: one thread loads the Q tile once and streams K and V tiles
//     (128 keys; 96 at D = 192, 64 at D = 256) through a ring of kStages stages with TMA (K and V of a
//     stage have their own full/empty mbarriers, so S = Q K^T starts before V lands);
//     its registers are handed to the consumers with setmaxnreg.
//   warpgroups 1.., consumers: 64 query rows each.
//     S = Q K^T   wgmma m64n{kBlockN}k16, A = Q, B = K, both K-major from smem
//     online softmax on the accumulators (exp2 with scale*log2(e) in one FFMA)
//     O += P V    wgmma m64n{D}k16 with A = P from registers (the S accumulator
//                 re-packed to 16 bits in place: the accumulator and the A
//                 fragment share the mma.sync layout), B = V N-major from smem
//   Within a warpgroup tile j's S = Q K^T and tile j-1's O += P V are in flight
//   together while the softmax of tile j runs (FA3's intra-warpgroup overlap);
//   for non-causal calls two consumer warpgroups also take turns issuing their
//   wgmmas (FA3's ping-pong), so one's softmax runs under the other's GEMMs.
// The consumers (240 registers after setmaxnreg; 160 with three) wait on mbarriers without a trap
// (a trap on their path caps them at the entry's 168 registers); the producer's
// trapping wait for their release of the last tiles turns a hang into an error.
// Shared tiles are rows of 64 elements (128 bytes) in the 128-byte swizzle that TMA
// writes and the wgmma descriptors read; a tile of D columns is D / 64 such chunks.
// Persistent: one CTA per SM walks work units (WorkTileCursor); the next unit's Q
// and K load while the consumers finish the last one (causal calls: Q in a second buffer
// where it fits, D <= 128, and the first S = Q K^T issued with the last P V). The
// output leaves through TMA stores from 64-row staging slots: one per consumer warpgroup
// (D <= 128), or one the warpgroups take in turn (D = 192, 256: Q and 2 stages of K and
// V take 192 KB).
// Edges: TMA zero-fills rows past Nq / Nk and columns past D (so any D in (32, 256] runs
// on the next tile: 64, 128, 192 or 256); keys past Nk and causal positions are masked.
// Causal (bottom-right aligned): a CTA stops at the last key its last row sees,
// and the heaviest CTAs start first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "attention/attention.h"
#include "attention/flash_common.cuh"
#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/tma.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"
#include "cuda_llm_ops/wgmma.cuh"

namespace cuda_llm_ops {
namespace flash_sm90 {

// Values of the CUDA_LLM_OPS_FLASH_SM90_SCHED dev knob (launch()).
// kSchedThreeConsumers: three consumer warpgroups (192 query rows a CTA), overlap only; D = 64.
constexpr int kSchedRule = 0, kSchedOverlap = 1, kSchedPingPong = 2, kSchedThreeConsumers = 3;

template <int kHeadDim_, bool kPingPong_, int kConsumers_ = 2, int kStages_ = 2>
struct Config {
  // 128-key tiles in 2 stages (3 on the 64 tile with two consumers, launch(); at D = 128,
  // 64-key tiles in 4 measured 25-40% slower, NOTES.md v3). At D = 256 the O accumulators
  // take 128 registers a thread: 64-key tiles keep S and P (48 registers) beside them under
  // the 240 of a consumer; at D = 192, O 96 with 96-key tiles (S and P 72), which also fit 2
  // stages in shared memory (NOTES.md v6).
  static constexpr int kConsumers = kConsumers_, kThreads = 128 * (kConsumers + 1);
  static constexpr int kHeadDim = kHeadDim_, kBlockM = 64 * kConsumers,
                       kBlockN = kHeadDim <= 128 ? 128 : kHeadDim == 192 ? 96 : 64;
  static constexpr int kStages = kStages_;
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 192 || kHeadDim == 256, "head-dim tile");
  // The two consumer warpgroups take turns issuing their wgmmas (named barriers), so one
  // runs its softmax while the other's GEMMs hold the tensor cores (FA3's ping-pong).
  static constexpr bool kPingPong = kPingPong_;
  static_assert(!kPingPong || kConsumers == 2, "ping-pong turns between two warpgroups");
  // Accumulators per consumer thread: S 64 x kBlockN, O 64 x D per warpgroup.
  static constexpr int kSAcc = kBlockN / 2, kOAcc = kHeadDim / 2;
  // Tiles are kChunks 64-column chunks of rows of 128 bytes.
  static constexpr int kChunks = kHeadDim / 64;
  static constexpr uint32_t kQChunkBytes = kBlockM * 128, kKVChunkBytes = kBlockN * 128;
  static constexpr uint32_t kQBytes = kChunks * kQChunkBytes, kKVBytes = kChunks * kKVChunkBytes;
  // The output leaves through TMA stores from 64-row staging slots (one warpgroup's rows,
  // kChunks boxes of 64 x 64): one slot per consumer warpgroup where that fits (D <= 128),
  // else (D = 192, 256: Q + 2 stages of K and V take 192 KB) one slot the warpgroups fill
  // in turn. Either way Q is free after a work tile's last S = Q K^T, so the next tile's Q
  // loads under its last P V and the store.
  static constexpr uint32_t kOBoxBytes = 64 * 128, kOSlotBytes = kChunks * kOBoxBytes;
  // Two Q buffers where they fit beside a slot per warpgroup (D <= 128): the next work
  // tile's Q then loads as early as its first K tile, not after this tile's last S = Q K^T.
  static constexpr int kQStages =
      2 * kQBytes + size_t(kKVBytes) * 2 * kStages + kConsumers * kOSlotBytes + 1024 <= 227 * 1024 ? 2 : 1;
  static constexpr size_t kOperandBytes = kQStages * size_t(kQBytes) + size_t(kKVBytes) * 2 * kStages;
  static constexpr int kOSlots = kOperandBytes + kConsumers * kOSlotBytes + 1024 <= 227 * 1024 ? kConsumers : 1;
  static constexpr size_t kSmemBytes = kOperandBytes + kOSlots * kOSlotBytes + 1024;  // + alignment
  // setmaxnreg: the producer gives its registers to the consumers. The sum must fit what
  // the CTA was launched with, kThreads x the __launch_bounds__ cap (168 at 384 threads,
  // 128 at 512): more and setmaxnreg.inc waits forever. With three consumers the producer
  // can keep 32 (at 24 its work loop spills); with two it keeps 24 (8 bytes spilled).
  static constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32, kConsumerRegs = kConsumers == 2 ? 240 : 160;
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= kThreads * kLaunchRegs, "register file");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// Masks and runs the online softmax (online_softmax_fragment) on one 64 x kBlockN S tile of
// a consumer warpgroup (N = kBlockN / 2 accumulators; this thread: rows r0 and r0 + 8,
// columns 8j + 2t + {0,1}).
template <bool kMask, int N>
CLO_DEVICE void softmax_tile(float (&s)[N], float (&row_max)[2], float (&row_sum)[2], float (&rescale)[2],
                             float scale_log2, int n0, int nk, int r0, int causal_offset, bool causal, int t) {
  if constexpr (kMask) {
#pragma unroll
    for (int j = 0; j < N / 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n0 + 8 * j + 2 * t + (e & 1);
        const int row = r0 + 8 * (e >> 1);
        if (flash_key_masked(row, col, nk, causal, causal_offset)) s[4 * j + e] = kNegInf;
      }
  }
  online_softmax_fragment<N>(s, row_max, row_sum, rescale, scale_log2);
}

// S = Q K^T for one warpgroup: 64 rows x kBlockN keys over the D columns (kChunks
// 64-column chunks of K-major Q and K tiles), issued and committed as one wgmma group.
// The first k-step overwrites S (scale-d 0): no instruction zeroes S, which matters where
// this issues while another wgmma is in flight (ptxas serializes every wgmma of a function
// in which a non-wgmma instruction writes an accumulator between a wgmma and its wait).
template <typename T, typename Cfg>
CLO_DEVICE void issue_qk(float (&s)[Cfg::kSAcc], uint64_t q_desc, uint64_t k_desc) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kHeadDim / 16; ++kk) {
    const uint64_t dq = wgmma::desc_advance(q_desc, (kk / 4) * Cfg::kQChunkBytes + (kk % 4) * 32);
    const uint64_t dk = wgmma::desc_advance(k_desc, (kk / 4) * Cfg::kKVChunkBytes + (kk % 4) * 32);
    const wgmma::WgmmaTag<T> tag;
    if constexpr (Cfg::kBlockN == 128)
      kk == 0 ? wgmma::wgmma_m64n128k16<0, 0, 0>(tag, s, dq, dk) : wgmma::wgmma_m64n128k16<0, 0>(tag, s, dq, dk);
    else if constexpr (Cfg::kBlockN == 96)
      kk == 0 ? wgmma::wgmma_m64n96k16<0, 0, 0>(tag, s, dq, dk) : wgmma::wgmma_m64n96k16<0, 0>(tag, s, dq, dk);
    else
      kk == 0 ? wgmma::wgmma_m64n64k16<0, 0, 0>(tag, s, dq, dk) : wgmma::wgmma_m64n64k16<0, 0>(tag, s, dq, dk);
  }
  wgmma::commit_group();
}

// O += P V: P from registers, V (kBlockN keys x D columns, N-major: the 64-column
// chunks lie kKVChunkBytes apart) from smem; one k-step per 16 keys.
template <typename T, typename Cfg>
CLO_DEVICE void issue_pv(float (&o)[Cfg::kOAcc], const uint32_t (&p)[Cfg::kSAcc / 2], uint64_t v_desc) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
    const uint64_t dv = wgmma::desc_advance(v_desc, kk * 2048);
    const wgmma::WgmmaTag<T> tag;
    if constexpr (Cfg::kHeadDim == 64)
      wgmma::wgmma_m64n64k16_rs<1>(tag, o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], dv);
    else if constexpr (Cfg::kHeadDim == 128)
      wgmma::wgmma_m64n128k16_rs<1>(tag, o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], dv);
    else if constexpr (Cfg::kHeadDim == 192)
      wgmma::wgmma_m64n192k16_rs<1>(tag, o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], dv);
    else
      wgmma::wgmma_m64n256k16_rs<1>(tag, o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], dv);
  }
  wgmma::commit_group();
}

// Work units per (batch, head) of num_m row blocks (WorkTileCursor).
CLO_HOST_DEVICE int flash_units_per_head(int num_m, bool pairs) { return pairs ? (num_m + 1) / 2 : num_m; }

// The work tiles of this CTA in order, one per next(): query rows [m_block * block_m,
// + block_m) of one (batch, head). Work is dealt in units, unit u to CTA u % gridDim.x
// (persistent CTAs walk units gridDim.x apart). A unit is one row block (causal: heaviest
// first); with `pairs` (causal calls of more than a wave of row blocks, flash_causal_pairs)
// it is row blocks num_m - 1 - a and a together, so every unit holds about the same number
// of key tiles and the static deal stays balanced. Row blocks vary fastest, so CTAs working
// at once share K/V in L2. The producer and the consumers each walk their own cursor.
struct WorkTileCursor {
  int num_m, units_per_head, num_units, num_heads, unit;
  bool causal, pairs, second = false;  // second: the unit's light row block is next

  CLO_DEVICE WorkTileCursor(const AttentionParams& p, int block_m, bool pairs_)
      : num_m(div_ceil(p.seq_len_q, block_m)), units_per_head(flash_units_per_head(num_m, pairs_)),
        num_units(units_per_head * p.num_q_heads * p.batch), num_heads(p.num_q_heads), unit(blockIdx.x),
        causal(p.is_causal), pairs(pairs_) {}

  CLO_DEVICE bool next(int& m_block, int& head, int& batch) {
    if (unit >= num_units) return false;
    const int a = unit % units_per_head, hb = unit / units_per_head;
    head = hb % num_heads;
    batch = hb / num_heads;
    if (!causal) {
      m_block = a;
    } else if (second) {
      m_block = a;
      second = false;
    } else {
      m_block = num_m - 1 - a;
      second = pairs && num_m - 1 - a != a;
    }
    if (!second) unit += gridDim.x;
    return true;
  }
};

// Work units of a launch (WorkTileCursor): the grid of the non-persistent launch.
inline int64_t flash_work_units(const AttentionParams& p, int block_m, bool pairs) {
  return int64_t(flash_units_per_head(div_ceil(p.seq_len_q, block_m), pairs)) * p.num_q_heads * p.batch;
}

// Causal row blocks go in pairs only where one row block per unit would take more than a wave
// of CTAs. Within one wave, pairs halve the CTAs and lengthen the longest unit from num_m to
// num_m + 1 key tiles (NOTES.md v8). Dev knob CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS: 0 never,
// 1 always.
inline bool flash_causal_pairs(const AttentionParams& p, int block_m) {
  if (!p.is_causal) return false;
  static bool dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS") != nullptr;
  const int forced = dev_knob("CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS", dev_mode, -1);
  if (forced == 0 || forced == 1) return forced == 1;
  return flash_work_units(p, block_m, false) > device_sm_count();
}

// kEarlyQK: a work tile's last P V and the next tile's first S = Q K^T issue together, so
// that S runs under the epilogue; otherwise that S issues after it. causal_pairs: causal
// row blocks in pairs (flash_causal_pairs); q_stages: the Q buffers in use, 1 ..
// Cfg::kQStages.
template <typename T, typename Cfg, bool kEarlyQK>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
flash_attention_fwd_sm90_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                                const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_o,
                                const AttentionParams p, const int causal_pairs, const int q_stages) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kStages = Cfg::kStages, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t q_full[Cfg::kQStages], q_empty[Cfg::kQStages], o_slot_free;
  __shared__ __align__(8) uint64_t k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];
  // 128-byte swizzle atoms start on 1024-byte boundaries.
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* sQ = smem;
  unsigned char* sK = sQ + Cfg::kQStages * Cfg::kQBytes;
  unsigned char* sV = sK + kStages * Cfg::kKVBytes;
  unsigned char* sO = sV + kStages * Cfg::kKVBytes;

  const int nq = p.seq_len_q, nk = p.seq_len_k;
  const int causal_offset = nk - nq;  // query i sees key j iff j <= i + causal_offset
  const bool causal = p.is_causal;
  const int group = p.num_q_heads / p.num_kv_heads;
  // Key tiles of a work tile (0: no row of it sees a key, it writes zeros).
  auto key_tiles = [&](int m0) {
    const int n_end = flash_key_end(p, m0, kBlockM);
    return n_end > 0 ? div_ceil(n_end, kBlockN) : 0;
  };

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < Cfg::kQStages; ++s) {
      tma::mbarrier_init(&q_full[s], 1);
      // Released once per work tile, by every consumer warp after its last S = Q K^T.
      tma::mbarrier_init(&q_empty[s], Cfg::kConsumers * 4);
    }
    // A shared O slot: released by each epilogue's storing thread once its store has read it.
    if constexpr (Cfg::kOSlots == 1) tma::mbarrier_init(&o_slot_free, 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&k_full[s], 1);
      tma::mbarrier_init(&v_full[s], 1);
      // One arrival per consumer warp (lane 0, after the warp's wgmma wait: the wgmmas
      // reading the stage are warpgroup-wide, so any warp seeing them retire may release).
      tma::mbarrier_init(&k_empty[s], Cfg::kConsumers * 4);
      tma::mbarrier_init(&v_empty[s], Cfg::kConsumers * 4);
    }
    tma::mbarrier_init_fence();
  }
  __syncthreads();

  // Producer and consumers walk the same work tiles and count the same K/V tiles (`it`,
  // across work tiles: stage it % kStages, phase it / kStages) and Q loads (`q_iter`:
  // buffer q_iter % q_stages, phase q_iter / q_stages).
  // Warp-uniform to the compiler (a shuffle from lane 0), so what derives from it (the Q
  // descriptor) can live in uniform registers, as the wgmma operands must.
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0), wg_tid = threadIdx.x % 128;
  if (warpgroup == 0) {
    wgmma::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (wg_tid == 0) {
      tma::prefetch_tensor_map(&map_q);
      tma::prefetch_tensor_map(&map_k);
      tma::prefetch_tensor_map(&map_v);
      int it = 0, q_iter = 0, m_block, head, batch;
      WorkTileCursor cursor(p, kBlockM, causal_pairs != 0);
      while (cursor.next(m_block, head, batch)) {
        const int m0 = m_block * kBlockM, kv_head = head / group;
        const int num_tiles = key_tiles(m0);
        if (num_tiles == 0) continue;
        // A Q buffer is reloaded once the consumers' last S = Q K^T of the tile before has
        // read it: with one buffer the load overlaps their last P V and the output store;
        // with two it goes out beside this tile's first K tile.
        const int qb = q_iter % q_stages;
        if (q_iter >= q_stages) tma::mbarrier_wait_suspended(&q_empty[qb], (q_iter / q_stages - 1) & 1);
        tma::mbarrier_arrive_expect_tx(&q_full[qb], Cfg::kQBytes);
#pragma unroll
        for (int c = 0; c < Cfg::kChunks; ++c)
          tma::load_4d(sQ + qb * Cfg::kQBytes + c * Cfg::kQChunkBytes, &map_q, 64 * c, m0, head, batch, &q_full[qb]);
        ++q_iter;
        for (int j = 0; j < num_tiles; ++j, ++it) {
          const int s = it % kStages;
          const uint32_t parity = ((it / kStages) - 1) & 1;  // phase of the stage's previous release
          unsigned char* k_dst = sK + s * Cfg::kKVBytes;
          unsigned char* v_dst = sV + s * Cfg::kKVBytes;
          if (it >= kStages) tma::mbarrier_wait_suspended(&k_empty[s], parity);
          tma::mbarrier_arrive_expect_tx(&k_full[s], Cfg::kKVBytes);
#pragma unroll
          for (int c = 0; c < Cfg::kChunks; ++c)
            tma::load_4d(k_dst + c * Cfg::kKVChunkBytes, &map_k, 64 * c, j * kBlockN, kv_head, batch, &k_full[s]);
          if (it >= kStages) tma::mbarrier_wait_suspended(&v_empty[s], parity);
          tma::mbarrier_arrive_expect_tx(&v_full[s], Cfg::kKVBytes);
#pragma unroll
          for (int c = 0; c < Cfg::kChunks; ++c)
            tma::load_4d(v_dst + c * Cfg::kKVChunkBytes, &map_v, 64 * c, j * kBlockN, kv_head, batch, &v_full[s]);
        }
      }
      // Watchdog: the consumers wait untrapped (tma::mbarrier_wait_untrapped), so this
      // thread waits (trapping) for their release of the last tiles: a consumer that hangs
      // turns into a launch error here instead of a hung kernel.
      for (int i = max(0, it - kStages); i < it; ++i) {
        tma::mbarrier_wait_suspended(&k_empty[i % kStages], (i / kStages) & 1);
        tma::mbarrier_wait_suspended(&v_empty[i % kStages], (i / kStages) & 1);
      }
    }
    return;
  }

  wgmma::setmaxnreg_inc<Cfg::kConsumerRegs>();
  const int cw = warpgroup - 1;  // rows cw * 64 .. cw * 64 + 63 of each work tile
  const int lane = wg_tid % 32, warp = wg_tid / 32, g = lane / 4, t = lane % 4;
  const float scale_log2 = p.scale * kLog2e;
  // wgmma descriptors of this warpgroup's 64 rows of Q and of K/V stage s (wgmma::desc_advance:
  // built once, advanced per k-step by a constant).
  const uint64_t q_desc0 = wgmma::make_desc_sw128(smem_u32addr(sQ) + cw * 64 * 128, 16, 1024);
  auto q_desc = [&](int qb) { return wgmma::desc_advance(q_desc0, qb * Cfg::kQBytes); };
  const uint64_t k_desc0 = wgmma::make_desc_sw128(smem_u32addr(sK), 16, 1024);
  const uint64_t v_desc0 = wgmma::make_desc_sw128(smem_u32addr(sV), Cfg::kKVChunkBytes, 1024);
  auto k_desc = [&](int s) { return wgmma::desc_advance(k_desc0, s * Cfg::kKVBytes); };
  auto v_desc = [&](int s) { return wgmma::desc_advance(v_desc0, s * Cfg::kKVBytes); };
  // Ping-pong turns: warpgroup cw issues on named barrier kTurnBarrier + cw once the
  // other one has issued (bar.arrive). Issue points run on across work tiles (each tile's
  // first S = Q K^T, then S_j with P V_{j-1}, then its last P V; with kEarlyQK the last P V
  // and the next tile's first S are one point): the same count in both warpgroups,
  // warpgroup 0 first, and no turn handed on after the CTA's last.
  constexpr int kTurnBarrier = 3;
#define CLO_FA3_TURN_WAIT()                                                       \
  do {                                                                            \
    if constexpr (Cfg::kPingPong) named_barrier_sync(kTurnBarrier + cw, 256);     \
  } while (0)
#define CLO_FA3_TURN_PASS(LAST)                                                   \
  do {                                                                            \
    if constexpr (Cfg::kPingPong) {                                               \
      if (cw == 0 || !(LAST)) named_barrier_arrive(kTurnBarrier + 1 - cw, 256);   \
    }                                                                             \
  } while (0)

  // This warpgroup's output staging slot (chunk c at + c * kOBoxBytes); its thread 0 issues
  // the TMA stores.
  unsigned char* sO_wg = sO + (Cfg::kOSlots == 1 ? 0 : cw) * Cfg::kOSlotBytes;
  struct WorkTile {
    int m0, head, batch, num_tiles;
  };
  WorkTileCursor cursor(p, kBlockM, causal_pairs != 0);
  // The next work tile some row of which sees a key; the rows of tiles passed on the way
  // (none of whose rows sees a key) are written as zeros.
  auto next_tile = [&](WorkTile& w) {
    int m_block, head, batch;
    while (cursor.next(m_block, head, batch)) {
      const int m0 = m_block * kBlockM, num_tiles = key_tiles(m0);
      if (num_tiles > 0) {
        w = WorkTile{m0, head, batch, num_tiles};
        return true;
      }
      T* o = static_cast<T*>(p.o) + ((int64_t(batch) * p.num_q_heads + head) * nq) * p.head_dim;
      flash_store_zero_rows(o, p, m0, kBlockM, threadIdx.x - 128, 128 * Cfg::kConsumers);
    }
    return false;
  };

  float o_acc[Cfg::kOAcc], s_acc[Cfg::kSAcc];
  uint32_t p_frag[Cfg::kSAcc / 2];
  float row_max[2], row_sum[2], rescale[2];
  // Masks (where a key tile needs it), rescales and exponentiates S of key tile J of work tile W.
#define CLO_FA3_SOFTMAX(W, J)                                                                                  \
  do {                                                                                                         \
    const int n0_ = (J) * kBlockN, wg_row0_ = (W).m0 + cw * 64, r0_ = wg_row0_ + warp * 16 + g;              \
    if (flash_tile_needs_mask(n0_, kBlockN, nk, causal, wg_row0_, causal_offset)) {                           \
      softmax_tile<true, Cfg::kSAcc>(s_acc, row_max, row_sum, rescale, scale_log2, n0_, nk, r0_, causal_offset, \
                                     causal, t);                                                               \
    } else {                                                                                                   \
      softmax_tile<false, Cfg::kSAcc>(s_acc, row_max, row_sum, rescale, scale_log2, n0_, nk, r0_,              \
                                      causal_offset, causal, t);                                               \
    }                                                                                                          \
  } while (0)

  int it = 0, q_iter = 0;  // K/V tiles and Q loads consumed before the current work tile
  // A work tile's first S = Q K^T (key tile `it`, Q load `q_iter`).
  auto wait_first_qk_operands = [&](int it0, int q_iter0) {
    tma::mbarrier_wait_untrapped(&q_full[q_iter0 % q_stages], (q_iter0 / q_stages) & 1);
    tma::mbarrier_wait_untrapped(&k_full[it0 % kStages], (it0 / kStages) & 1);
  };
  // The next work tile's first S on an issue point of its own, waited for: before the first
  // tile, and after each tile without kEarlyQK.
  auto first_qk_alone = [&]() {
    wait_first_qk_operands(it, q_iter);
    CLO_FA3_TURN_WAIT();
    issue_qk<T, Cfg>(s_acc, q_desc(q_iter % q_stages), k_desc(it % kStages));
    CLO_FA3_TURN_PASS(false);
    wgmma::wait_group<0>();
  };
  WorkTile cur;
  bool have = next_tile(cur);
  if constexpr (Cfg::kPingPong) {
    if (have && cw == 1) named_barrier_arrive(kTurnBarrier, 256);  // warpgroup 0 issues first
  }
  // No wgmma is in flight where control flow joins (at the loop's head, or after a branch
  // that issued one): ptxas's copies of S there would make it serialize every wgmma.
  if (have) first_qk_alone();
  // Each pass starts with S of the work tile's key tile 0 ready.
  while (have) {
    const int qb = q_iter % q_stages;
    const int n = cur.num_tiles;
    if (lane == 0) {
      tma::mbarrier_arrive(&k_empty[it % kStages]);
      if (n == 1) tma::mbarrier_arrive(&q_empty[qb]);
    }
#pragma unroll
    for (int i = 0; i < Cfg::kOAcc; ++i) o_acc[i] = 0.f;
    row_max[0] = row_max[1] = kNegInf;
    row_sum[0] = row_sum[1] = 0.f;
    CLO_FA3_SOFTMAX(cur, 0);
    pack_fragment<T, Cfg::kSAcc>(p_frag, s_acc);
    for (int j = 1; j < n; ++j) {
      const int s = (it + j) % kStages, sp = (it + j - 1) % kStages;
      tma::mbarrier_wait_untrapped(&k_full[s], ((it + j) / kStages) & 1);
      tma::mbarrier_wait_untrapped(&v_full[sp], ((it + j - 1) / kStages) & 1);
      CLO_FA3_TURN_WAIT();
      issue_qk<T, Cfg>(s_acc, q_desc(qb), k_desc(s));
      issue_pv<T, Cfg>(o_acc, p_frag, v_desc(sp));
      CLO_FA3_TURN_PASS(false);
      wgmma::wait_group<1>();  // S of tile j is ready; P V of tile j - 1 may still run
      if (lane == 0) {
        tma::mbarrier_arrive(&k_empty[s]);
        if (j == n - 1) tma::mbarrier_arrive(&q_empty[qb]);
      }
      CLO_FA3_SOFTMAX(cur, j);
      wgmma::wait_group<0>();
      if (lane == 0) tma::mbarrier_arrive(&v_empty[sp]);
      if (__any_sync(0xffffffffu, rescale[0] != 1.f || rescale[1] != 1.f))  // warp-uniform skip
        scale_fragment_rows(o_acc, rescale);
      pack_fragment<T, Cfg::kSAcc>(p_frag, s_acc);
    }
    // The last P V; with kEarlyQK the next work tile's first S = Q K^T goes with it and runs
    // under this tile's epilogue (S is free: the last P was packed). After the CTA's last
    // tile that S is issued all the same, on this tile's finished Q and K, and dropped: an
    // issue under a branch would put S in flight across the join.
    const int sp = (it + n - 1) % kStages;
    tma::mbarrier_wait_untrapped(&v_full[sp], ((it + n - 1) / kStages) & 1);
    WorkTile nxt;
    const bool more = next_tile(nxt);
    CLO_FA3_TURN_WAIT();
    issue_pv<T, Cfg>(o_acc, p_frag, v_desc(sp));
    if (kEarlyQK && more) wait_first_qk_operands(it + n, q_iter + 1);
    if constexpr (kEarlyQK)
      issue_qk<T, Cfg>(s_acc, q_desc(more ? (q_iter + 1) % q_stages : qb), k_desc((it + n - (more ? 0 : 1)) % kStages));
    CLO_FA3_TURN_PASS(!more);
    wgmma::wait_group<kEarlyQK ? 1 : 0>();
    if (lane == 0) tma::mbarrier_arrive(&v_empty[sp]);

    // Normalise, stage this warpgroup's 64 rows in the 128-byte swizzle the output map
    // expects (16-byte chunk c of row r at chunk c ^ (r % 8): a warp's 4-byte writes, rows
    // g and columns 8i + 2t, spread over all 32 banks), then one thread stores them with
    // TMA, which clips rows past Nq and columns past D. Nothing waits for the global writes.
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = group_reduce_sum<4>(row_sum[h]);
      inv[h] = sum > 0.f ? 1.f / sum : 0.f;  // a row that saw no key outputs zeros
    }
    if constexpr (Cfg::kOSlots == 1) {
      // The slot is taken in epilogue order, work tile by work tile and warpgroup 0 first
      // (both walk every tile), so epilogue e waits for the release of e - 1 (phase e - 1).
      // No later phase can have completed yet (phase e needs this epilogue's arrival).
      const int e = q_iter * Cfg::kConsumers + cw;
      if (e > 0) tma::mbarrier_wait_untrapped(&o_slot_free, (e - 1) & 1);
    } else {  // this warpgroup's previous store must have read its slot
      if (wg_tid == 0) tma::store_wait_read<0>();
      named_barrier_sync(1 + cw, 128);  // ids 1..kConsumers; ping-pong (two consumers) uses 3, 4
    }
    const int lr = warp * 16 + g;  // (lr + 8) % 8 == lr % 8 == g
#pragma unroll
    for (int i = 0; i < Cfg::kOAcc / 4; ++i) {
      unsigned char* dst = sO_wg + (i / 8) * Cfg::kOBoxBytes + lr * 128 + ((i % 8) ^ g) * 16 + 4 * t;
      *reinterpret_cast<uint32_t*>(dst) = pack_float2<T>(o_acc[4 * i] * inv[0], o_acc[4 * i + 1] * inv[0]);
      *reinterpret_cast<uint32_t*>(dst + 8 * 128) =
          pack_float2<T>(o_acc[4 * i + 2] * inv[1], o_acc[4 * i + 3] * inv[1]);
    }
    tma::fence_proxy_async_shared();
    named_barrier_sync(1 + cw, 128);
    if (wg_tid == 0) {
#pragma unroll
      for (int c = 0; c < Cfg::kChunks; ++c)
        tma::store_4d(&map_o, 64 * c, cur.m0 + cw * 64, cur.head, cur.batch, sO_wg + c * Cfg::kOBoxBytes);
      tma::store_commit();
      if constexpr (Cfg::kOSlots == 1) {
        tma::store_wait_read<0>();
        tma::mbarrier_arrive(&o_slot_free);
      }
    }
    it += n;
    ++q_iter;
    cur = nxt;
    have = more;
    if constexpr (kEarlyQK) {
      wgmma::wait_group<0>();
    } else if (have) {
      first_qk_alone();
    }
  }
#undef CLO_FA3_SOFTMAX
  if (wg_tid == 0) tma::store_wait_all();
#undef CLO_FA3_TURN_WAIT
#undef CLO_FA3_TURN_PASS
#endif
}

// A 4-D map over [B, H, N, D] (dims innermost first), boxes of 64 columns x box_rows rows.
// 256-byte L2 promotion on every part: the prefill kernels re-read K/V tiles from L2 and
// were tuned with it; stream_l2_promotion()'s HBM3e rule is measured on streams only.
inline cudaError_t encode_qkv_map(CUtensorMap* map, bool bf16, const void* base, int d, int n, int heads, int batch,
                                  int64_t seq_stride, int64_t head_stride, int64_t batch_stride, uint32_t box_rows) {
  const uint64_t dims[4] = {uint64_t(d), uint64_t(n), uint64_t(heads), uint64_t(batch)};
  const uint64_t strides[3] = {uint64_t(seq_stride) * 2, uint64_t(head_stride) * 2, uint64_t(batch_stride) * 2};
  const uint32_t box[4] = {64, box_rows, 1, 1};
  return tma::encode_tiled_16bit(map, bf16, base, 4, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

template <typename T, typename Cfg>
cudaError_t launch_config(const AttentionParams& p, cudaStream_t stream) {
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  CUtensorMap map_q, map_k, map_v, map_o;
  const int64_t o_seq = p.head_dim, o_head = o_seq * p.seq_len_q;  // O: contiguous [B, Hq, Nq, D]
  if (encode_qkv_map(&map_q, bf16, p.q, p.head_dim, p.seq_len_q, p.num_q_heads, p.batch, p.q_seq_stride,
                     p.q_head_stride, p.q_batch_stride, Cfg::kBlockM) != cudaSuccess ||
      encode_qkv_map(&map_k, bf16, p.k, p.head_dim, p.seq_len_k, p.num_kv_heads, p.batch, p.k_seq_stride,
                     p.k_head_stride, p.k_batch_stride, Cfg::kBlockN) != cudaSuccess ||
      encode_qkv_map(&map_v, bf16, p.v, p.head_dim, p.seq_len_k, p.num_kv_heads, p.batch, p.v_seq_stride,
                     p.v_head_stride, p.v_batch_stride, Cfg::kBlockN) != cudaSuccess ||
      encode_qkv_map(&map_o, bf16, p.o, p.head_dim, p.seq_len_q, p.num_q_heads, p.batch, o_seq, o_head,
                     o_head * p.num_q_heads, 64) != cudaSuccess)
    return cudaErrorNotSupported;
  // Causal calls issue a work tile's first S = Q K^T with the last P V of the tile before
  // (kEarlyQK) and use two Q buffers where Cfg has them; full rows use one buffer (the
  // second's shared memory stays reserved) and issue that S after the epilogue
  // (bench_attention_dev.py --sm90-tile-overlap, bf16, best of 6 rounds: the early S gains
  // 3-6% on causal D = 64 N = 1024, 0-1% on causal D = 128 N = 512, and loses 2-7% on full
  // rows at D = 64, three consumers; two Q buffers are within the spread; NOTES.md v11).
  // Dev knobs CUDA_LLM_OPS_FLASH_SM90_EARLY_QK (0 / 1) and CUDA_LLM_OPS_FLASH_SM90_Q_STAGES
  // (1 / 2) force either.
  static bool early_dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_EARLY_QK") != nullptr;
  static bool q_dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_Q_STAGES") != nullptr;
  const bool early_qk = dev_knob("CUDA_LLM_OPS_FLASH_SM90_EARLY_QK", early_dev_mode, p.is_causal ? 1 : 0) != 0;
  auto kernel = early_qk ? flash_attention_fwd_sm90_kernel<T, Cfg, true> : flash_attention_fwd_sm90_kernel<T, Cfg, false>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  // Persistent: one CTA per SM (the shared memory and registers of one CTA fill an SM)
  // walks work units gridDim.x apart (WorkTileCursor). Dev knob
  // CUDA_LLM_OPS_FLASH_SM90_PERSISTENT=0: one CTA per work unit (the same kernel without
  // overlap between units; the hardware deals the CTAs).
  static bool dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_PERSISTENT") != nullptr;
  const bool pairs = flash_causal_pairs(p, Cfg::kBlockM);
  const int64_t units = flash_work_units(p, Cfg::kBlockM, pairs);
  if (units > INT32_MAX) return cudaErrorNotSupported;  // the kernel counts units in int
  const bool persistent = dev_knob("CUDA_LLM_OPS_FLASH_SM90_PERSISTENT", dev_mode, 1) != 0;
  const int64_t ctas = persistent ? std::min<int64_t>(units, device_sm_count()) : units;
  const int q_stages = std::clamp(
      dev_knob("CUDA_LLM_OPS_FLASH_SM90_Q_STAGES", q_dev_mode, p.is_causal ? Cfg::kQStages : 1), 1, Cfg::kQStages);
  kernel<<<dim3(uint32_t(ctas)), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(map_q, map_k, map_v, map_o, p,
                                                                             pairs ? 1 : 0, q_stages);
  return cudaGetLastError();
}

template <typename T, int kHeadDim, int kStages = 2>
cudaError_t launch_schedule(const AttentionParams& p, cudaStream_t stream, bool pingpong) {
  return pingpong ? launch_config<T, Config<kHeadDim, true, 2, kStages>>(p, stream)
                  : launch_config<T, Config<kHeadDim, false, 2, kStages>>(p, stream);
}

// cudaErrorNotSupported (launching nothing) where this kernel does not apply: no
// sm_90a image on a cc 9.0 device, D past 256 or up to 32, or a layout whose tensor map
// the driver rejects (launch_config; the binding has already checked 16-byte bases and
// strides). D <= 32 stays on the mma.sync kernel: on the 64 tile half of every wgmma
// multiplies zero-filled columns (B=4 H=32 N=4096 D=32 fp16: 1.367 ms against mma.sync's
// 1.281, bench_attention_dev.py --sm90-dims, NOTES.md v4).
template <typename T>
cudaError_t launch(const AttentionParams& p, cudaStream_t stream) {
  const int d = p.head_dim;
  if (d <= 32 || d > 256 || !wgmma::sm90a_image_loaded()) return cudaErrorNotSupported;
  // The 64 tile: three consumer warpgroups (192 rows a CTA; bench_attention_dev.py
  // --sm90-dims, B=4 H=32 N=4096 fp16: 1.191 ms against ping-pong's 1.394, causal 0.685
  // against 0.774-0.832; NOTES.md v4), except causal calls over at most 2048 keys: two
  // with ping-pong (--sm90-d64-rule, GQA 32/8, B = 16384 / N: 1.51x at N = 512, 1.13x at
  // 1024, 1.05x at 2048; three consumers lead again at 4096, NOTES.md v8; the causal units
  // of 192 rows are few and uneven there). The 128 and 256 tiles: two, ping-pong for full
  // rows, not for causal ones (--sm90 at 51b2fbb, B=4 H=16 N=4096 D=128 fp16: 0.870 ms
  // against 0.963 without; causal within 2% either way). Dev knob (dev_knob, common.cuh)
  // CUDA_LLM_OPS_FLASH_SM90_SCHED: kSchedOverlap, kSchedPingPong or (D <= 64)
  // kSchedThreeConsumers forces one.
  static bool dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_SCHED") != nullptr;
  const int sched = dev_knob("CUDA_LLM_OPS_FLASH_SM90_SCHED", dev_mode, kSchedRule);
  const bool pingpong = sched == kSchedRule ? !p.is_causal : sched == kSchedPingPong;
  static bool tile_dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_TILE192") != nullptr;
  const bool tile192 = dev_knob("CUDA_LLM_OPS_FLASH_SM90_TILE192", tile_dev_mode, 1) != 0;
  if (d <= 64) {
    const bool short_causal = p.is_causal && p.seq_len_k <= 2048;
    if (sched == kSchedThreeConsumers || (sched == kSchedRule && !short_causal)) {
      return launch_config<T, Config<64, false, 3>>(p, stream);
    }
    // Two consumers stream K/V through 3 stages: a key tile of 64 columns is half the math
    // of one at D = 128, so 2 stages leave the next tile's load too little time
    // (bench_attention_dev.py --sm90-d64-stages, bf16 GQA 32/8 causal, best of 6: 3-7%
    // faster at N = 512-2048; three consumers gain nothing, within 2% either way; NOTES.md
    // v11). Dev knob CUDA_LLM_OPS_FLASH_SM90_D64_STAGES=2 forces 2.
    static bool stages_dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90_D64_STAGES") != nullptr;
    const bool two_stages = dev_knob("CUDA_LLM_OPS_FLASH_SM90_D64_STAGES", stages_dev_mode, 3) == 2;
    return two_stages ? launch_schedule<T, 64>(p, stream, sched == kSchedRule || pingpong)
                      : launch_schedule<T, 64, 3>(p, stream, sched == kSchedRule || pingpong);
  }
  if (d <= 128) return launch_schedule<T, 128>(p, stream, pingpong);
  if (d <= 192 && tile192) return launch_schedule<T, 192>(p, stream, pingpong);
  return launch_schedule<T, 256>(p, stream, pingpong);
}

}  // namespace flash_sm90

template <typename T>
cudaError_t launch_flash_attention_sm90(const AttentionParams& p, cudaStream_t stream) {
  return flash_sm90::launch<T>(p, stream);
}

}  // namespace cuda_llm_ops
