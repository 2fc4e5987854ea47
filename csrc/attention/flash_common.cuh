// What the tensor-core flash kernels share (flash_attention_mma.cuh for fp16/bf16 on
// mma.sync, flash_attention_fp32.cu for fp32 on 3xTF32 mma.sync, flash_attention_sm90.cuh
// for Hopper): the keys a CTA of query rows reads, the mask (whether a key tile needs it,
// and which keys it hides), the zeros a CTA none of whose rows sees a key writes, and the
// two mma.sync kernels' softmax step on their (alike) accumulator layouts.
#pragma once

#include "attention/attention.h"
#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"

namespace cuda_llm_ops {

// One past the last key a CTA of query rows [m0, m0 + block_m) reads: every key, or with
// the causal mask (bottom-right aligned) those its last row sees; <= 0: none.
CLO_DEVICE int flash_key_end(const AttentionParams& p, int m0, int block_m) {
  if (!p.is_causal) return p.seq_len_k;
  return min(p.seq_len_k, min(m0 + block_m, p.seq_len_q) + p.seq_len_k - p.seq_len_q);
}

// Whether the key tile [n0, n0 + block_n) needs the element mask for query rows from row0 on:
// it runs past the keys, or (causal) its last key lies after row0's diagonal.
CLO_DEVICE bool flash_tile_needs_mask(int n0, int block_n, int nk, bool causal, int row0, int causal_offset) {
  return n0 + block_n > nk || (causal && n0 + block_n - 1 > row0 + causal_offset);
}

// Whether key `col` is hidden from query `row`: past the keys, or (causal, bottom-right
// aligned: row sees keys up to row + causal_offset) after its diagonal.
CLO_DEVICE bool flash_key_masked(int row, int col, int nk, bool causal, int causal_offset) {
  return col >= nk || (causal && col > row + causal_offset);
}

// Zeros (16-byte stores) for the rows m0 .. m0 + block_m - 1 below seq_len_q of one
// (batch, head)'s contiguous output `o`, by `threads` threads.
template <typename T>
CLO_DEVICE void flash_store_zero_rows(T* o, const AttentionParams& p, int m0, int block_m, int tid, int threads) {
  constexpr int kVec = 16 / int(sizeof(T));  // elements per 16-byte store
  const int rows = min(block_m, p.seq_len_q - m0), chunks = p.head_dim / kVec;
  for (int i = tid; i < rows * chunks; i += threads)
    *reinterpret_cast<uint4*>(o + int64_t(m0 + i / chunks) * p.head_dim + (i % chunks) * kVec) = make_uint4(0, 0, 0, 0);
}

// Copies kRows rows of a head-dim tile from global into shared-memory rows of kStride
// elements, 16 bytes per cp.async (the mma.sync kernels' K/V pipeline); rows >= valid_rows
// and columns >= d_real (a multiple of 16 bytes) are zero-filled.
template <typename T, int kRows, int kHeadDim, int kStride, int kThreads>
CLO_DEVICE void flash_load_tile(T* smem, const T* gmem, int64_t row_stride, int valid_rows, int d_real, int tid) {
  constexpr int kVec = 16 / int(sizeof(T));  // elements per 16-byte chunk
  constexpr int kChunks = kHeadDim / kVec;
  constexpr int kTotal = kRows * kChunks;
#pragma unroll
  for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
    const int i = tid + it * kThreads;
    if (kTotal % kThreads != 0 && i >= kTotal) break;
    const int r = i / kChunks;
    const int c = i % kChunks;
    const bool valid = r < valid_rows && c * kVec < d_real;
    // A zero-filled copy still needs a mapped address: point it at the tile base.
    const T* src = valid ? gmem + r * row_stride + c * kVec : gmem;
    cp_async_16(smem + r * kStride + c * kVec, src, valid);
  }
}

// One key tile's softmax step for a warp's kMT m16 row tiles, in the mma.sync m16n8
// accumulator layout (m16n8k16 and m16n8k8 alike: thread (g = lane / 4, t = lane % 4)
// holds rows g and g + 8, columns 2t and 2t + 1 of each n8 block): S into the log2
// domain, the mask where the tile [n0, n0 + kNS * 8) needs one, the running max and
// (per-thread partial) sum of each row, S turned into P in place, O rescaled.
template <int kMT, int kNS, int kNO>
CLO_DEVICE void flash_mma_softmax_step(float (&acc_s)[kMT][kNS][4], float (&acc_o)[kMT][kNO][4],
                                       float (&row_max)[kMT][2], float (&row_sum)[kMT][2], const AttentionParams& p,
                                       int n0, int m0, int warp_row0, int lane, float scale_log2) {
  const int g = lane >> 2, t = lane & 3;
  const int nk = p.seq_len_k, causal_offset = p.seq_len_k - p.seq_len_q;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nb = 0; nb < kNS; ++nb)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc_s[mt][nb][j] *= scale_log2;
  if (flash_tile_needs_mask(n0, kNS * 8, nk, p.is_causal, m0, causal_offset)) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nb = 0; nb < kNS; ++nb)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = n0 + nb * 8 + 2 * t + (j & 1);
          const int row = warp_row0 + mt * 16 + g + (j >> 1) * 8;
          if (flash_key_masked(row, col, nk, p.is_causal, causal_offset)) acc_s[mt][nb][j] = kNegInf;
        }
  }
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    float rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_max[mt][r];
#pragma unroll
      for (int nb = 0; nb < kNS; ++nb) mx = fmaxf(mx, fmaxf(acc_s[mt][nb][2 * r], acc_s[mt][nb][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with every key masked so far keeps max = kNegInf; subtracting 0
      // instead makes its exp terms exactly 0 rather than exp2(0) = 1.
      const float m_use = mx == kNegInf ? 0.f : mx;
      rescale[r] = fast_exp2(row_max[mt][r] - m_use);
      row_max[mt][r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < kNS; ++nb) {
        acc_s[mt][nb][2 * r] = fast_exp2(acc_s[mt][nb][2 * r] - m_use);
        acc_s[mt][nb][2 * r + 1] = fast_exp2(acc_s[mt][nb][2 * r + 1] - m_use);
        sum += acc_s[mt][nb][2 * r] + acc_s[mt][nb][2 * r + 1];
      }
      row_sum[mt][r] = row_sum[mt][r] * rescale[r] + sum;
    }
    scale_fragment_rows(acc_o[mt], rescale);
  }
}

// 1 / (row sum) for the rows g and g + 8 of each m16 tile, the per-thread partial sums
// reduced over the row's 4 lanes; 0 for a row that saw no key (it outputs zeros).
template <int kMT>
CLO_DEVICE void flash_mma_row_inverse(const float (&row_sum)[kMT][2], float (&inv)[kMT][2]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float s = row_sum[mt][r];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      inv[mt][r] = s > 0.f ? 1.f / s : 0.f;
    }
}

}  // namespace cuda_llm_ops
