// FlashAttention-2 forward on tensor cores (mma.sync m16n8k16, fp16/bf16 in,
// fp32 accumulation), shared by the per-head-dim files flash_attention_mma_d*.cu.
//
// Design (FA2): one block of 4 warps owns BLOCK_M = 128 query rows of one
// (batch, head) (64 for D > 128); each warp owns 32 (16) rows, so the softmax
// row statistics never leave a warp. K/V tiles of BLOCK_N keys stream through a double-buffered
// cp.async pipeline (the load of tile j+1 overlaps the math of tile j).
//   S = Q K^T      A = Q fragments (registers for D <= 64, else ldmatrix per
//                  tile), B = K rows via ldmatrix (non-transposed)
//   online softmax in registers, exp2 with scale*log2(e) folded in
//   O += P V       A = P re-packed from the S accumulators (no smem round trip),
//                  B = V rows via ldmatrix.trans
// Shared-memory rows are padded by 16 bytes: with a row stride of (D + 8)
// halves, ldmatrix's 8 row addresses fall in 8 distinct 16-byte bank groups
// whenever D is a multiple of 16 (every bucket here), and rows stay 16-byte
// aligned for cp.async.
// Edges: rows/keys beyond Nq/Nk and columns beyond the real head_dim are
// zero-filled by cp.async (src-size 0); keys beyond Nk and causal positions are
// masked to -inf before the softmax; only tiles that need a mask pay for it.
// Causal: blocks stop at the last key their last row can see (early exit), and
// the heaviest blocks are scheduled first.
#pragma once

#include "attention/attention.h"
#include "attention/flash_common.cuh"
#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"

#include <cstdlib>
#include <cstring>

namespace cuda_llm_ops {
namespace flash_mma {

// Default tile shape per head-dim bucket: rows per warp in m16 tiles and keys
// per K/V tile. Two m16 tiles (32 rows per warp) let every K/V fragment loaded
// by ldmatrix feed two mma.sync, halving shared-memory reads per FLOP, which
// bounds the one-tile version; the accumulators (O: kMTiles x D/2 registers, S:
// kMTiles x kBlockN/2) must fit in 255 registers beside the fragments, hence
// 32-key tiles from D = 96 and one m16 tile past D = 128.
template <int kHeadDim>
struct DefaultTiles {
  static constexpr int kMTiles = kHeadDim <= 128 ? 2 : 1;
  static constexpr int kBlockN = kHeadDim <= 64 ? 64 : 32;
};

template <int kHeadDim_, int kMTiles_ = DefaultTiles<kHeadDim_>::kMTiles,
          int kBlockN_ = DefaultTiles<kHeadDim_>::kBlockN>
struct Config {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBlockM = kWarpRows * kWarps;
  // Q fragments stay in registers only where they fit beside the accumulators.
  static constexpr bool kQInRegs = kHeadDim <= 64;
  static constexpr int kStride = kHeadDim + 8;  // padded smem row, in elements
  static constexpr int kKSteps = kHeadDim / 16;  // k-steps of S = Q K^T
  static constexpr int kNTilesS = kBlockN / 8;   // n-blocks of S
  static constexpr int kNTilesO = kHeadDim / 8;  // n-blocks of O
  static constexpr int kSmemElems = (kBlockM + 4 * kBlockN) * kStride;  // Q + 2 x (K, V)
  static constexpr size_t kSmemBytes = size_t(kSmemElems) * 2;
  static_assert(kHeadDim % 32 == 0, "head-dim buckets are multiples of 32");
};

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 2) flash_attention_mma_kernel(const AttentionParams p) {
  constexpr int kHeadDim = Cfg::kHeadDim;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kStride = Cfg::kStride;
  constexpr int kMT = Cfg::kMTiles;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * kStride;       // 2 buffers
  T* sV = sK + 2 * kBlockN * kStride;   // 2 buffers

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int num_m_blocks = gridDim.x;
  // Causal: the last query blocks see the most keys; start them first.
  const int m_block = p.is_causal ? num_m_blocks - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int m0 = m_block * kBlockM;
  const int nq = p.seq_len_q, nk = p.seq_len_k, d_real = p.head_dim;

  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + ((int64_t(batch) * p.num_q_heads + head) * nq) * d_real;

  // Keys this block needs: all, or up to what its last row can see.
  const int n_end = flash_key_end(p, m0, kBlockM);
  const int num_n_tiles = n_end > 0 ? (n_end + kBlockN - 1) / kBlockN : 0;

  if (num_n_tiles == 0) {  // every row of the block sees no key: zeros
    flash_store_zero_rows(o, p, m0, kBlockM, tid, Cfg::kThreads);
    return;
  }

  // Prologue: Q and the first K/V tile in one group.
  flash_load_tile<T, kBlockM, kHeadDim, kStride, Cfg::kThreads>(sQ, q + int64_t(m0) * p.q_seq_stride, p.q_seq_stride, nq - m0,
                                                 d_real, tid);
  flash_load_tile<T, kBlockN, kHeadDim, kStride, Cfg::kThreads>(sK, k, p.k_seq_stride, nk, d_real, tid);
  flash_load_tile<T, kBlockN, kHeadDim, kStride, Cfg::kThreads>(sV, v, p.v_seq_stride, nk, d_real, tid);
  cp_async_commit();

  const float scale_log2 = p.scale * kLog2e;
  const int g = lane >> 2, t = lane & 3;
  const int warp_row0 = m0 + warp * Cfg::kWarpRows;
  // This thread's rows: warp_row0 + mt * 16 + g (+ 8).

  float acc_o[kMT][Cfg::kNTilesO][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int i = 0; i < Cfg::kNTilesO; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc_o[mt][i][j] = 0.f;
  float row_max[kMT][2], row_sum[kMT][2];  // row_sum: per-thread partials, reduced over 4 lanes at the end
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) row_max[mt][r] = kNegInf, row_sum[mt][r] = 0.f;

  uint32_t q_frag[Cfg::kQInRegs ? kMT : 1][Cfg::kQInRegs ? Cfg::kKSteps : 1][4];
  const T* sQ_warp = sQ + warp * Cfg::kWarpRows * kStride;

  for (int n_tile = 0; n_tile < num_n_tiles; ++n_tile) {
    const int buf = n_tile & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile n_tile landed; every warp is done with the other buffer
    if (n_tile + 1 < num_n_tiles) {
      const int n_next = (n_tile + 1) * kBlockN;
      flash_load_tile<T, kBlockN, kHeadDim, kStride, Cfg::kThreads>(sK + (buf ^ 1) * kBlockN * kStride,
                                                     k + int64_t(n_next) * p.k_seq_stride, p.k_seq_stride,
                                                     nk - n_next, d_real, tid);
      flash_load_tile<T, kBlockN, kHeadDim, kStride, Cfg::kThreads>(sV + (buf ^ 1) * kBlockN * kStride,
                                                     v + int64_t(n_next) * p.v_seq_stride, p.v_seq_stride,
                                                     nk - n_next, d_real, tid);
      cp_async_commit();
    }
    if constexpr (Cfg::kQInRegs) {
      if (n_tile == 0) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int ks = 0; ks < Cfg::kKSteps; ++ks)
            ldmatrix_x4(q_frag[mt][ks], sQ_warp + (mt * 16 + (lane & 15)) * kStride + ks * 16 + (lane >> 4) * 8);
      }
    }
    const T* sK_buf = sK + buf * kBlockN * kStride;
    const T* sV_buf = sV + buf * kBlockN * kStride;

    // S = Q K^T for this warp's rows x kBlockN keys; each K fragment feeds kMT mma.
    float acc_s[kMT][Cfg::kNTilesS][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int i = 0; i < Cfg::kNTilesS; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc_s[mt][i][j] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Cfg::kKSteps; ++ks) {
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Cfg::kQInRegs) {
#pragma unroll
          for (int j = 0; j < 4; ++j) a[mt][j] = q_frag[mt][ks][j];
        } else {
          ldmatrix_x4(a[mt], sQ_warp + (mt * 16 + (lane & 15)) * kStride + ks * 16 + (lane >> 4) * 8);
        }
      }
#pragma unroll
      for (int nb = 0; nb < Cfg::kNTilesS; nb += 2) {
        uint32_t b[4];
        // matrices: (keys nb*8.., k lo), (keys nb*8.., k hi), (keys nb*8+8.., k lo), (.., k hi)
        ldmatrix_x4(b, sK_buf + (nb * 8 + (lane >> 4) * 8 + (lane & 7)) * kStride + ks * 16 +
                           ((lane >> 3) & 1) * 8);
        const uint32_t b0[2] = {b[0], b[1]};
        const uint32_t b1[2] = {b[2], b[3]};
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_m16n8k16<T>(acc_s[mt][nb], a[mt], b0);
          mma_m16n8k16<T>(acc_s[mt][nb + 1], a[mt], b1);
        }
      }
    }

    flash_mma_softmax_step(acc_s, acc_o, row_max, row_sum, p, n_tile * kBlockN, m0, warp_row0, lane, scale_log2);

    // O += P V: the S accumulators of key blocks 2kk and 2kk+1 are exactly the
    // A fragment of a 16x16 P block; each V fragment feeds kMT mma.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = pack_float2<T>(acc_s[mt][2 * kk][0], acc_s[mt][2 * kk][1]);
        a[mt][1] = pack_float2<T>(acc_s[mt][2 * kk][2], acc_s[mt][2 * kk][3]);
        a[mt][2] = pack_float2<T>(acc_s[mt][2 * kk + 1][0], acc_s[mt][2 * kk + 1][1]);
        a[mt][3] = pack_float2<T>(acc_s[mt][2 * kk + 1][2], acc_s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int nb = 0; nb < Cfg::kNTilesO; nb += 2) {
        uint32_t b[4];
        // matrices: (keys lo, d nb*8..), (keys hi, d nb*8..), (keys lo, d nb*8+8..), (keys hi, ..)
        ldmatrix_x4_trans(b, sV_buf + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * kStride + nb * 8 +
                                 (lane >> 4) * 8);
        const uint32_t b0[2] = {b[0], b[1]};
        const uint32_t b1[2] = {b[2], b[3]};
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_m16n8k16<T>(acc_o[mt][nb], a[mt], b0);
          mma_m16n8k16<T>(acc_o[mt][nb + 1], a[mt], b1);
        }
      }
    }
  }

  // Normalise and store. Rows staged through this warp's slice of sQ (the warp
  // alone read it) so global stores are 16 bytes wide.
  T* sO = sQ + warp * Cfg::kWarpRows * kStride;
  __syncwarp();
  float inv[kMT][2];
  flash_mma_row_inverse(row_sum, inv);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int nb = 0; nb < Cfg::kNTilesO; ++nb) {
      const int col = nb * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(sO + (mt * 16 + g) * kStride + col) =
          pack_float2<T>(acc_o[mt][nb][0] * inv[mt][0], acc_o[mt][nb][1] * inv[mt][0]);
      *reinterpret_cast<uint32_t*>(sO + (mt * 16 + g + 8) * kStride + col) =
          pack_float2<T>(acc_o[mt][nb][2] * inv[mt][1], acc_o[mt][nb][3] * inv[mt][1]);
    }
  }
  __syncwarp();
  const int chunks = d_real / 8;
  for (int i = lane; i < Cfg::kWarpRows * chunks; i += 32) {
    const int r = i / chunks, c = i % chunks;
    if (warp_row0 + r < nq)
      *reinterpret_cast<uint4*>(o + int64_t(warp_row0 + r) * d_real + c * 8) =
          *reinterpret_cast<const uint4*>(sO + r * kStride + c * 8);
  }
}

template <typename T, typename Cfg>
cudaError_t launch_config(const AttentionParams& p, cudaStream_t stream) {
  auto kernel = flash_attention_mma_kernel<T, Cfg>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.seq_len_q + Cfg::kBlockM - 1) / Cfg::kBlockM, p.num_q_heads, p.batch);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// Development knob (not an API): CUDA_LLM_OPS_FLASH_TILES=<rows-per-warp>x<keys>,
// e.g. "16x64", picks another compiled tile shape for D = 128 so
// scripts/bench_attention_dev.py can time the variants side by side. As with dev_knob
// (common.cuh), it is read on every call only if it was set at the first call.
inline int tile_variant_from_env() {
  static const bool dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_TILES") != nullptr;
  if (!dev_mode) return 0;
  const char* v = std::getenv("CUDA_LLM_OPS_FLASH_TILES");
  if (v == nullptr) return 0;
  if (std::strcmp(v, "16x64") == 0) return 1;
  if (std::strcmp(v, "32x64") == 0) return 2;
  if (std::strcmp(v, "32x32") == 0) return 3;
  return 0;
}

template <typename T, int kHeadDim>
cudaError_t launch(const AttentionParams& p, cudaStream_t stream) {
  if constexpr (kHeadDim == 128) {
    switch (tile_variant_from_env()) {
      case 1: return launch_config<T, Config<128, 1, 64>>(p, stream);
      case 2: return launch_config<T, Config<128, 2, 64>>(p, stream);
      case 3: return launch_config<T, Config<128, 2, 32>>(p, stream);
      default: break;
    }
  }
  return launch_config<T, Config<kHeadDim>>(p, stream);
}

}  // namespace flash_mma

template <typename T, int kHeadDim>
cudaError_t launch_flash_attention_mma(const AttentionParams& p, cudaStream_t stream) {
  return flash_mma::launch<T, kHeadDim>(p, stream);
}

// Explicit instantiations, one head-dim bucket per .cu file.
#define CLO_INSTANTIATE_FLASH_MMA(HEAD_DIM)                                                                 \
  template cudaError_t launch_flash_attention_mma<__half, HEAD_DIM>(const AttentionParams&, cudaStream_t); \
  template cudaError_t launch_flash_attention_mma<__nv_bfloat16, HEAD_DIM>(const AttentionParams&, cudaStream_t);

}  // namespace cuda_llm_ops
