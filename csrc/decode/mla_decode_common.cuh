// What the two MLA decode kernels share (the mma.sync kernel in mla_decode_attention.cu, the
// wgmma kernel in mla_decode_sm90.cuh) and their combine kernel: a block's split of the keys
// and the store of its output rows or split partials.
#pragma once

#include "cuda_llm_ops/common.cuh"
#include "decode/decode_internal.h"
#include "decode/split_merge.cuh"

namespace cuda_llm_ops::decode {

// Split `split` of sequence b cut in kTile-key tiles: its keys [key_lo, key_hi), the splits
// that hold keys (eff), and whether seq_lens[b] is outside [0, capacity] (bad: served as
// length 0, never read past; the rows become NaN).
struct MlaSplitRange {
  bool bad;
  int eff, key_lo, key_hi;
};
template <int kTile>
CLO_DEVICE MlaSplitRange mla_split_range(const MlaKernelParams& p, int b, int split) {
  const int len_raw = __ldg(p.seq_lens + b);
  MlaSplitRange r;
  r.bad = len_raw < 0 || len_raw > p.capacity;
  const int len = r.bad ? 0 : len_raw;
  r.eff = split_count<kTile>(p.num_splits, len);
  const int per = split_keys<kTile>(p.num_splits, len);
  r.key_lo = min(len, split * per);
  r.key_hi = min(len, r.key_lo + per);
  return r;
}

// The end of a block's work for one thread's rows r0 and r0 + 8 (of the block's heads from
// head0; rows at or past rows_here are padding), whose unnormalised output columns col0 + 8n
// and col0 + 8n + 1 (n < kColTiles) acc(n, h) gives, h = 0, 1 for the two rows, with their
// (max, sum) m[h], l[h] (log2 domain, l summed over the row's lanes). Unsplit calls write out
// divided by l, and lse; a split that holds keys writes its partials for the combine kernel
// (splits past the sequence's last tile have none). `state_writer`: the one thread of a row
// that writes its lse or (max, sum). bad: the rows become NaN.
template <typename T, int kColTiles, class Acc>
CLO_DEVICE void mla_store_rows(const MlaKernelParams& p, int b, int head0, int r0, int rows_here, int col0, int split,
                               int eff, const float (&m)[2], const float (&l)[2], bool bad, bool state_writer,
                               Acc&& acc) {
  if (p.num_splits > 1 && split >= eff) return;
  const float nan = __int_as_float(0x7fc00000);
  const int64_t row0 = static_cast<int64_t>(b) * p.num_q_heads + head0;  // the block's first row id
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r0 + 8 * h;
    if (r >= rows_here) continue;
    if (p.num_splits == 1) {
      const float inv = bad ? nan : (l[h] > 0.f ? 1.f / l[h] : 0.f);
      T* orow = static_cast<T*>(p.out) + b * p.o_sb + (head0 + r) * p.o_sh + col0;
#pragma unroll
      for (int n = 0; n < kColTiles; ++n) {
        const float2 x = acc(n, h);
        *reinterpret_cast<uint32_t*>(orow + 8 * n) = pack_float2<T>(x.x * inv, x.y * inv);
      }
      if (p.lse != nullptr && state_writer) p.lse[row0 + r] = decode_row_lse(m[h], l[h], bad);
    } else {
      const int64_t slot = split * p.total_rows + row0 + r;
      float* po = p.partial_o + slot * kMlaHeadDimV + col0;
#pragma unroll
      for (int n = 0; n < kColTiles; ++n)
        *reinterpret_cast<float2*>(po + 8 * n) = bad ? make_float2(nan, nan) : acc(n, h);
      if (state_writer) p.partial_state[slot] = bad ? make_float2(nan, nan) : make_float2(m[h], l[h]);
    }
  }
}

}  // namespace cuda_llm_ops::decode
