// Online softmax (Milakov & Gimelshein): a running max m and a running sum
// l = sum exp(x - m), updated one value or one tile at a time, and merged across
// partitions (split-KV decode, cluster reductions) with the same rule.
#pragma once

#include <cfloat>
#include "common.cuh"

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

}  // namespace cuda_llm_ops
