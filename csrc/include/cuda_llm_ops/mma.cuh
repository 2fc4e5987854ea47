// Tensor-core building blocks for Ampere-style kernels (also run on Hopper):
// ldmatrix loads of 8x8 tiles from shared memory and mma.sync m16n8k16
// (fp16/bf16 -> fp32) and m16n8k32 (s8 -> s32). Fragment layouts follow the PTX
// ISA "Matrix Fragments for mma.m16n8k16" tables; kernels index them as
//   A: a[0..3] = rows (g, g+8) x k-halves (0-7, 8-15), g = lane / 4
//   B: b[0..1] = k-halves (0-7, 8-15), column n = lane / 4
//   C: c[0..3] = (row g, cols 2t, 2t+1), (row g+8, cols 2t, 2t+1), t = lane % 4
#pragma once

#include "common.cuh"
#include "pipeline.cuh"

namespace cuda_llm_ops {

CLO_DEVICE void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32addr(smem_row_ptr)));
}

CLO_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32addr(smem_row_ptr)));
}

CLO_DEVICE void ldmatrix_x2(uint32_t (&r)[2], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_u32addr(smem_row_ptr)));
}

CLO_DEVICE void ldmatrix_x2_trans(uint32_t (&r)[2], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_u32addr(smem_row_ptr)));
}

// An 8x8 b16 matrix held in the fragment layout (thread (g, t) holds row g, columns 2t and
// 2t + 1), transposed across the warp: thread (g, t) then holds rows 2t, 2t + 1 of column g.
// It turns a C fragment (after packing to 16 bits) into a B operand without shared memory.
CLO_DEVICE uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

template <typename T> struct MmaF16Kind;
template <> struct MmaF16Kind<__half> { static constexpr bool kIsBf16 = false; };
template <> struct MmaF16Kind<__nv_bfloat16> { static constexpr bool kIsBf16 = true; };

// D = A * B + D, A 16x16 (row), B 16x8 (col), fp32 accumulators.
template <typename T>
CLO_DEVICE void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (MmaF16Kind<T>::kIsBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// An fp32 value as the sum of two TF32 operands, for 3xTF32 products (fp32-accurate
// matrix products on the TF32 tensor cores, CUTLASS's "fast fp32"): big is x rounded to
// TF32's 10 mantissa bits, small = x - big (exact in fp32). The tensor cores read a TF32
// operand's top 19 bits only, so small keeps its own top 11 bits: ~2^-21 of x is lost.
struct Tf32Pair {
  uint32_t big, small;
};
CLO_DEVICE Tf32Pair split_tf32(float x) {
  const uint32_t big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  return {big, __float_as_uint(x - __uint_as_float(big))};
}

// A 16x8 operand fragment (4 values a thread) split into its big and small TF32 parts.
CLO_DEVICE void split_tf32_fragment(const float (&x)[4], uint32_t (&big)[4], uint32_t (&small)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const Tf32Pair s = split_tf32(x[j]);
    big[j] = s.big, small[j] = s.small;
  }
}

// D = A * B + D, A 16x8 (row), B 8x8 (col), TF32 operands (fp32 bits, the low 13
// ignored), fp32 accumulators. a0: (row g, col t), a1: (g + 8, t), a2: (g, t + 4),
// a3: (g + 8, t + 4); b0: (k t, n g), b1: (t + 4, g); g = lane / 4, t = lane % 4.
CLO_DEVICE void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D += A * B at ~fp32 precision from split operands: the three TF32 products that
// matter (small * small lies below fp32's rounding), the small ones first.
CLO_DEVICE void mma_m16n8k8_3xtf32(float (&d)[4], const uint32_t (&a_big)[4], const uint32_t (&a_small)[4],
                                   const uint32_t (&b_big)[2], const uint32_t (&b_small)[2]) {
  mma_m16n8k8_tf32(d, a_small, b_big);
  mma_m16n8k8_tf32(d, a_big, b_small);
  mma_m16n8k8_tf32(d, a_big, b_big);
}

// The same with the B fragment (b0, b1) given as fp32 values, split here.
CLO_DEVICE void mma_m16n8k8_3xtf32(float (&d)[4], const uint32_t (&a_big)[4], const uint32_t (&a_small)[4], float b0,
                                   float b1) {
  const Tf32Pair x0 = split_tf32(b0), x1 = split_tf32(b1);
  const uint32_t b_big[2] = {x0.big, x1.big}, b_small[2] = {x0.small, x1.small};
  mma_m16n8k8_3xtf32(d, a_big, a_small, b_big, b_small);
}

// Weight rows as the 16-row operand, activations as the n8 one (decode GEMVs: a few rows
// of activations against a weight [N, K] read once). One 32-k window: the lane's 16 bytes
// (8 consecutive k from 32w + 8t) of weight rows g (w0) and g + 8 (w1), and of activation
// rows 8i + g (xv[i]). k16 step 0 takes the lane's k 0-3 (slots 2t, 2t+1 | 2t+8, 2t+9),
// step 1 its k 4-7; a dot product does not care which k sits in which slot, so no shuffle
// or ldmatrix is needed. acc[i]: c0, c1 = (weight row g, activation rows 8i + 2t, +1),
// c2, c3 = weight row g + 8.
template <typename T, int kMTiles>
CLO_DEVICE void nk_mma_window(float (&acc)[kMTiles][4], const uint4& w0, const uint4& w1, const uint4 (&xv)[kMTiles]) {
  const uint32_t a0[4] = {w0.x, w1.x, w0.y, w1.y};
  const uint32_t a1[4] = {w0.z, w1.z, w0.w, w1.w};
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
    const uint32_t x0[2] = {xv[i].x, xv[i].y};
    const uint32_t x1[2] = {xv[i].z, xv[i].w};
    mma_m16n8k16<T>(acc[i], a0, x0);
    mma_m16n8k16<T>(acc[i], a1, x1);
  }
}

// D = A * B + D for int8: A 16x32 (row), B 32x8 (col), int32 accumulators.
CLO_DEVICE void mma_m16n8k32_s8(int32_t (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace cuda_llm_ops
