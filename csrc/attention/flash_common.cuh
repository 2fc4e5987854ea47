// What the two tensor-core flash kernels share (flash_attention_mma.cuh for mma.sync,
// flash_attention_sm90.cuh for Hopper): the keys a CTA of query rows reads, the mask
// (whether a key tile needs it, and which keys it hides), and the zeros a CTA none of
// whose rows sees a key writes.
#pragma once

#include "attention/attention.h"
#include "cuda_llm_ops/common.cuh"

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
  const int rows = min(block_m, p.seq_len_q - m0), chunks = p.head_dim / 8;
  for (int i = tid; i < rows * chunks; i += threads)
    *reinterpret_cast<uint4*>(o + int64_t(m0 + i / chunks) * p.head_dim + (i % chunks) * 8) = make_uint4(0, 0, 0, 0);
}

}  // namespace cuda_llm_ops
