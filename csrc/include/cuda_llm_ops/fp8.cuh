// FP8 (e4m3, the "fn" variant: no infinities, one NaN pattern, max 448) conversions for
// quantized KV caches. cuda_fp8.h maps them to single instructions on sm_89+ (cvt
// e4m3x2 <-> f16x2 / f32) and emulates them below, so the same code serves sm_80.
#pragma once

#include <cuda_fp8.h>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops {

#ifdef __CUDACC__
// Two e4m3 values (low byte first) as f16x2 bits, exact, without fp8 instructions (below
// sm_89 there are none, and cuda_fp8.h's emulation loops over denormals): each byte's
// sign and 7 magnitude bits are placed into an f16 (exponent bias 15 vs 7: the value
// times 2^-8, denormals included, exactly), times 256; the one NaN pattern (S.1111.111)
// is set to NaN apart. scripts/check_fp8_convert.cu compares it with the sm_89+ cvt on
// all 65536 inputs.
CLO_DEVICE uint32_t e4m3x2_to_f16x2_bits(uint16_t x) {
  const uint32_t u = __byte_perm(static_cast<uint32_t>(x), 0u, 0x1404);  // byte i -> high byte of half i
  const uint32_t mag = u & 0x7f007f00u;
  const uint32_t h = (u & 0x80008000u) | (mag >> 1);
  const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&h), __half2half2(__ushort_as_half(0x5c00)));  // x 256
  const uint32_t nan = __vcmpeq2(mag, 0x7f007f00u);
  return *reinterpret_cast<const uint32_t*>(&v) | (nan & 0x7fff7fffu);
}
CLO_DEVICE uint32_t e4m3x2_to_f16x2(uint16_t x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(x));
  return h;
#else
  return e4m3x2_to_f16x2_bits(x);
#endif
}

// Two e4m3 values (low byte first) as the packed 16-bit pair the tensor cores take:
// exact for both types (3 mantissa bits fit either). bf16 goes through float: there is
// no direct e4m3 -> bf16 conversion below sm_100.
template <typename T>
CLO_DEVICE uint32_t e4m3x2_to(uint16_t x);
template <>
CLO_DEVICE uint32_t e4m3x2_to<__half>(uint16_t x) {
  return e4m3x2_to_f16x2(x);
}
template <>
CLO_DEVICE uint32_t e4m3x2_to<__nv_bfloat16>(uint16_t x) {
  const uint32_t h = e4m3x2_to_f16x2(x);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  return pack_float2<__nv_bfloat16>(f.x, f.y);
}

// x * inv_scale rounded to nearest e4m3, saturated to +-448, the largest finite e4m3
// (vLLM's convention; NaN stays NaN); two values per call, the first in the low byte.
CLO_DEVICE uint16_t float2_to_e4m3x2(float a, float b, float inv_scale) {
  return static_cast<uint16_t>(
      __nv_cvt_float2_to_fp8x2(make_float2(a * inv_scale, b * inv_scale), __NV_SATFINITE, __NV_E4M3));
}

// N values (a multiple of 4) as N e4m3 bytes in N / 4 words, value 0 in the low byte of w[0]:
// the byte order of the cache row, so the words store as they are.
template <int N>
CLO_DEVICE void pack_e4m3(const float (&f)[N], float inv_scale, uint32_t (&w)[N / 4]) {
  static_assert(N % 4 == 0, "whole words of e4m3 bytes");
#pragma unroll
  for (int i = 0; i < N / 4; ++i)
    w[i] = static_cast<uint32_t>(float2_to_e4m3x2(f[4 * i], f[4 * i + 1], inv_scale)) |
           (static_cast<uint32_t>(float2_to_e4m3x2(f[4 * i + 2], f[4 * i + 3], inv_scale)) << 16);
}
#endif

}  // namespace cuda_llm_ops
