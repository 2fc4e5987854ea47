// Split-KV shared by the decode kernels (decode_attention.cuh, mla_decode_attention.cu): how a
// sequence's keys are cut into splits, and the merge: each split leaves (max, sum) in the log2
// domain and unnormalised output columns, folded with the log-sum-exp rule.
#pragma once

#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/online_softmax.cuh"

namespace cuda_llm_ops::decode {

// Splits a sequence of n keys is cut into, in kTile-key tiles: num_splits, never more than its
// tiles, at least 1 (later splits hold none; where whole-tile splits round up, the last of
// these may hold none too: split_count_holding_keys). A merger must count the same. (Host too:
// the split-count rules read it.)
template <int kTile>
CLO_HOST_DEVICE int split_count(int num_splits, int n) {
  const int64_t tiles = div_ceil<int64_t>(n, kTile);  // n + kTile - 1 may pass 2^31
  const int64_t c = num_splits < tiles ? num_splits : tiles;
  return c > 1 ? static_cast<int>(c) : 1;
}
// Keys per split (whole tiles): split z takes [z * split_keys, (z + 1) * split_keys) of n.
template <int kTile>
CLO_HOST_DEVICE int split_keys(int num_splits, int n) {
  // ceil(n / (kTile * splits)) tiles, in 64 bits (n + kTile * splits - 1 may pass 2^31)
  const int64_t per_split = int64_t(kTile) * split_count<kTile>(num_splits, n);
  return static_cast<int>((n + per_split - 1) / per_split * kTile);
}
// The splits of that cut that hold keys: split_count less the last ones whole-tile splits
// leave empty (33 splits of 40960 keys: 20 tiles each, 32 hold keys). The host's split-count
// rules launch that many. n > 0, and num_splits > 1 where n nears 2^31 (split_keys of 1 rounds
// n up past it).
template <int kTile>
CLO_HOST_DEVICE int split_count_holding_keys(int num_splits, int n) {
  return static_cast<int>(div_ceil<int64_t>(n, split_keys<kTile>(num_splits, n)));
}

// Log-sum-exp fold of a loaded batch of splits into (m, l, acc): split j's (max, sum) st[j]
// and 4 unnormalised O columns x[j] (a split past the batch: (-inf, 0) and zeros). The
// batch's max is taken first and every split is weighed against it, so the fold is no
// dependent chain of exp2 per split (the merger runs on the call's critical path). A NaN
// state (bad index) sets nan_seen; splits that saw no key (sum 0) do not count.
template <int kBatch>
CLO_DEVICE void decode_fold_loaded(const float2 (&st)[kBatch], const float4 (&x)[kBatch], float& m, float& l,
                                   float4& acc, bool& nan_seen) {
  float m_new = m;
#pragma unroll
  for (int j = 0; j < kBatch; ++j) {
    nan_seen |= st[j].y != st[j].y;
    if (st[j].y > 0.f) m_new = fmaxf(m_new, st[j].x);
  }
  const float a = fast_exp2(m - m_new);
  l *= a;
  acc.x *= a;
  acc.y *= a;
  acc.z *= a;
  acc.w *= a;
#pragma unroll
  for (int j = 0; j < kBatch; ++j) {
    const float w = st[j].y > 0.f ? fast_exp2(st[j].x - m_new) : 0.f;
    l += st[j].y * w;
    acc.x += x[j].x * w;
    acc.y += x[j].y * w;
    acc.z += x[j].z * w;
    acc.w += x[j].w * w;
  }
  m = m_new;
}
// The neutral split of decode_fold_loaded's batch (no key: it does not count).
CLO_DEVICE void decode_fold_neutral(float2& st, float4& x) {
  st = make_float2(kNegInf, 0.f);
  x = make_float4(0.f, 0.f, 0.f, 0.f);
}

// Log-sum-exp fold of splits s0 .. s0 + n - 1 (n <= kBatch) into (m, l, acc): `load(s,
// state, o)` fetches split s's (max, sum) and 4 unnormalised O columns; all n loads are
// issued before any is used (decode_fold_loaded).
template <int kBatch, class Load>
CLO_DEVICE void decode_fold_splits(int s0, int n, Load&& load, float& m, float& l, float4& acc, bool& nan_seen) {
  float2 st[kBatch];
  float4 x[kBatch];
#pragma unroll
  for (int j = 0; j < kBatch; ++j) {
    if (j < n) load(s0 + j, st[j], x[j]);
    else decode_fold_neutral(st[j], x[j]);
  }
  decode_fold_loaded<kBatch>(st, x, m, l, acc, nan_seen);
}

// A row's log-sum-exp in natural log from its (max, sum) in the log2 domain: -inf for a row
// that saw no key, NaN for a bad index or a stale split group.
CLO_DEVICE float decode_row_lse(float m, float l, bool nan_row) {
  constexpr float kLn2 = 0.6931471805599453f;
  return nan_row ? __int_as_float(0x7fc00000) : (l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY);
}

}  // namespace cuda_llm_ops::decode
