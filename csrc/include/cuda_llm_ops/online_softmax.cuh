// Online softmax (Milakov & Gimelshein): a running max m and a running sum
// l = sum exp(x - m), updated one value or one tile at a time, and merged across
// partitions (split-KV decode, cluster reductions) with the same rule.
#pragma once

#include <cfloat>
#include "common.cuh"
#include "warp_primitives.cuh"

namespace cuda_llm_ops {

// exp(x) = exp2(x * log2(e)): kernels pre-multiply the softmax scale by log2(e)
// so the inner loop does one FMUL-free exp2.
constexpr float kLog2e = 1.4426950408889634f;

// exp2 as the hardware's ex2.approx.ftz (2 ulp; exp2(-inf) = 0). exp2f adds a range
// check and two predicated multiplies around the same instruction, on the critical
// path of a decode tile's softmax; fp16/bf16 outputs cannot see the difference.
CLO_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh as the hardware's tanh.approx.f32 (sm_75+; max relative error ~2^-11, below what a
// 16-bit output keeps): logit soft-capping, cap * tanh(s / cap), once per score.
CLO_DEVICE float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// -inf stand-in that keeps exp2(m_old - m_new) finite-safe: a fully masked row
// keeps m = kNegInf and its exp terms become exactly 0, never NaN.
constexpr float kNegInf = -FLT_MAX;

struct OnlineSoftmaxState {
  float max_val;  // running max m (in the log2 domain when the caller scales by log2e)
  float sum_exp;  // running sum l

  CLO_HOST_DEVICE static OnlineSoftmaxState empty() { return {kNegInf, 0.f}; }
};

// Update with one score; returns the factor that older accumulators
// (the output row) must be multiplied by.
CLO_DEVICE float online_softmax_update(OnlineSoftmaxState& s, float x) {
  const float m_new = fmaxf(s.max_val, x);
  const float rescale = exp2f(s.max_val - m_new);
  s.sum_exp = s.sum_exp * rescale + exp2f(x - m_new);
  s.max_val = m_new;
  return rescale;
}

// Update with a tile's max; the caller adds the tile's sum of exp2(x - m_new)
// after. Returns the rescale factor for the old accumulators.
CLO_DEVICE float online_softmax_rescale(OnlineSoftmaxState& s, float tile_max) {
  const float m_new = fmaxf(s.max_val, tile_max);
  const float rescale = exp2f(s.max_val - m_new);
  s.sum_exp *= rescale;
  s.max_val = m_new;
  return rescale;
}

// Merge two partial states (log-sum-exp merge). Writes the weights each side's
// un-normalised accumulator must be scaled by.
CLO_DEVICE OnlineSoftmaxState online_softmax_merge(const OnlineSoftmaxState& a, const OnlineSoftmaxState& b,
                                                   float& weight_a, float& weight_b) {
  const float m = fmaxf(a.max_val, b.max_val);
  weight_a = exp2f(a.max_val - m);
  weight_b = exp2f(b.max_val - m);
  return {m, a.sum_exp * weight_a + b.sum_exp * weight_b};
}

// 1/l, or 0 for a row that saw no key (l == 0): such rows output zeros.
CLO_DEVICE float online_softmax_inv_sum(const OnlineSoftmaxState& s) {
  return s.sum_exp > 0.f ? 1.f / s.sum_exp : 0.f;
}

// ---- online softmax over an MMA accumulator tile ----------------------------------
// The C fragment of mma.sync m16n8 and of wgmma m64nN (N = fragment floats per thread):
// this thread holds rows r and r + 8 (h = 0, 1), columns 8j + 2t + {0, 1} for j < N / 4,
// at s[4j + 2h + e]; the 4 lanes t = lane % 4 share a row.

// How far (log2 domain) a score may exceed the running max before the max moves.
constexpr float kSoftmaxMaxSlack = 8.f;

// Rescales and exponentiates in place one tile of scores (masked ones already kNegInf),
// updates the running max (log2 domain) and this thread's partial row sums, and writes
// the factor the older output rows must be scaled by.
template <int N>
CLO_DEVICE void online_softmax_fragment(float (&s)[N], float (&row_max)[2], float (&row_sum)[2], float (&rescale)[2],
                                        float scale_log2) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = kNegInf;
#pragma unroll
    for (int j = 0; j < N / 4; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mx = group_reduce_max<4>(mx);
    // Scaled only when some key is visible: kNegInf * scale could overflow to -inf.
    const float tile_max = mx == kNegInf ? kNegInf : mx * scale_log2;
    // The running max moves only when a score exceeds it by more than kSoftmaxMaxSlack
    // (log2 domain): exp terms then stay below 2^8 (exact in fp16/bf16 P and fp32 sums,
    // and the stale max cancels in O / l, and in a split's (max, sum) pair), and most
    // tiles leave O unscaled.
    const float m_new = tile_max > row_max[h] + kSoftmaxMaxSlack ? tile_max : row_max[h];
    // A row with every key masked so far keeps kNegInf; subtracting 0 then makes its
    // exp terms exactly 0 rather than exp2(0) = 1.
    const float m_use = m_new == kNegInf ? 0.f : m_new;
    rescale[h] = fast_exp2(row_max[h] - m_use);
    row_max[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < N / 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * j + 2 * h + e];
        x = fast_exp2(fmaf(x, scale_log2, -m_use));
        sum += x;
      }
    row_sum[h] = row_sum[h] * rescale[h] + sum;
  }
}

// Multiplies the output accumulator's rows by the factors online_softmax_fragment wrote for
// them: the same C-fragment layout, flat (wgmma, N floats) or as m16n8 tiles ([M][4]).
template <int N>
CLO_DEVICE void scale_fragment_rows(float (&o)[N], const float (&f)[2]) {
  static_assert(N % 4 == 0, "whole n8 column tiles");
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    o[4 * i] *= f[0];
    o[4 * i + 1] *= f[0];
    o[4 * i + 2] *= f[1];
    o[4 * i + 3] *= f[1];
  }
}
template <int M>
CLO_DEVICE void scale_fragment_rows(float (&o)[M][4], const float (&f)[2]) {
#pragma unroll
  for (int n = 0; n < M; ++n) {
    o[n][0] *= f[0];
    o[n][1] *= f[0];
    o[n][2] *= f[1];
    o[n][3] *= f[1];
  }
}

// The fragment of P as 16-bit pairs: columns 16kk .. 16kk + 15 are tiles 2kk and 2kk + 1,
// so p[4kk .. 4kk + 3] is the A fragment of k-step kk of P V (mma.sync m16k16, wgmma RS).
template <typename T, int N>
CLO_DEVICE void pack_fragment(uint32_t (&p)[N / 2], const float (&s)[N]) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) p[i] = pack_float2<T>(s[2 * i], s[2 * i + 1]);
}

}  // namespace cuda_llm_ops
