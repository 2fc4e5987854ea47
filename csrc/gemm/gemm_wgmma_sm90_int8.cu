// int8 -> int32 instantiations of the Hopper wgmma/TMA GEMM (see gemm_wgmma_sm90.cuh), and
// the transpose that feeds it a B stored [K, N]: 8-bit wgmma reads B K-major only, so a
// row-major B is first copied to [N, K] (K * N bytes read and written once; ~10% of the GEMM
// at 4096^3, NOTES.md).
#include "gemm/gemm_wgmma_sm90.cuh"

namespace cuda_llm_ops::gemm {
namespace {

// bt[n][k] = b[k][n] for a [K, N] b with K and N multiples of 16 (the caller checks). A thread
// moves a 16 (k) x 4 (n) block: 16 word loads down one 4-byte column, four 4 x 4 byte
// transposes with byte permutes, then 4 stores of 16 bytes, one per output row. Lanes: 16
// consecutive column words x 2 consecutive k-blocks, so a warp reads 64 contiguous bytes per
// input row and writes 32 contiguous bytes per output row (whole 32-byte sectors both ways).
__global__ void __launch_bounds__(256) transpose_int8_to_nk_kernel(const int8_t* __restrict__ b, int8_t* __restrict__ bt,
                                                                    int K, int N, long long ldb) {
  const int words = N / 4, kblocks = K / 16;
  const long long block = static_cast<long long>(blockIdx.x) * 8 + threadIdx.x / 32;  // 32 threads: 16 x 2
  const int lane = threadIdx.x % 32;
  const long long col_groups = (words + 15) / 16;
  const long long kb = (block / col_groups) * 2 + lane / 16;
  const long long nw = (block % col_groups) * 16 + lane % 16;
  if (kb >= kblocks || nw >= words) return;
  uint32_t r[16];
  const int8_t* src = b + kb * 16 * ldb + nw * 4;
#pragma unroll
  for (int i = 0; i < 16; ++i) r[i] = __ldg(reinterpret_cast<const uint32_t*>(src + i * ldb));
  uint32_t out[4][4];  // out[c][q]: column 4 nw + c, k = 16 kb + 4 q .. + 3
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t t0 = __byte_perm(r[4 * q], r[4 * q + 1], 0x5140);      // r0.b0 r1.b0 r0.b1 r1.b1
    const uint32_t t1 = __byte_perm(r[4 * q], r[4 * q + 1], 0x7362);      // r0.b2 r1.b2 r0.b3 r1.b3
    const uint32_t t2 = __byte_perm(r[4 * q + 2], r[4 * q + 3], 0x5140);  // the same of rows 2, 3
    const uint32_t t3 = __byte_perm(r[4 * q + 2], r[4 * q + 3], 0x7362);
    out[0][q] = __byte_perm(t0, t2, 0x5410);
    out[1][q] = __byte_perm(t0, t2, 0x7632);
    out[2][q] = __byte_perm(t1, t3, 0x5410);
    out[3][q] = __byte_perm(t1, t3, 0x7632);
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    *reinterpret_cast<uint4*>(bt + (nw * 4 + c) * static_cast<long long>(K) + kb * 16) =
        make_uint4(out[c][0], out[c][1], out[c][2], out[c][3]);
  }
}

}  // namespace

cudaError_t launch_transpose_int8_to_nk(const void* b, void* bt, int K, int N, int64_t ldb, cudaStream_t stream) {
  if (K % 16 != 0 || N % 16 != 0 || ldb % 4 != 0) return cudaErrorInvalidValue;
  const long long warps = static_cast<long long>(div_ceil(K / 16, 2)) * div_ceil(N / 4, 16);
  const long long blocks = (warps + 7) / 8;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  transpose_int8_to_nk_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const int8_t*>(b), static_cast<int8_t*>(bt), K, N, static_cast<long long>(ldb));
  return cudaGetLastError();
}

cudaError_t launch_gemm_wgmma_s8(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream) {
  if (p.trans_a || !p.trans_b) return cudaErrorNotSupported;  // sch.skinny: a swapped decode problem
  return launch_wgmma_layout<int8_t, false, true>(p, sch, stream);
}

}  // namespace cuda_llm_ops::gemm
