// Checks the e4m3 -> f16 conversions of csrc/include/cuda_llm_ops/fp8.cuh on the GPU:
// the bit-trick path (what sm_80 runs) against the sm_89+ cvt instruction, and the
// bf16 path against float, on all 65536 byte pairs. Build and run on an sm_89+ GPU:
//   nvcc -std=c++20 -arch=sm_90a -Icsrc/include -o /tmp/check_fp8 scripts/check_fp8_convert.cu && /tmp/check_fp8
#include <cstdio>
#include <cstring>

#include "cuda_llm_ops/fp8.cuh"

using namespace cuda_llm_ops;

__global__ void convert_all(uint32_t* soft, uint32_t* hard, uint32_t* bf16) {
  const uint32_t x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x >= 65536) return;
  soft[x] = e4m3x2_to_f16x2_bits(static_cast<uint16_t>(x));
  hard[x] = e4m3x2_to_f16x2(static_cast<uint16_t>(x));
  bf16[x] = e4m3x2_to<__nv_bfloat16>(static_cast<uint16_t>(x));
}

static bool is_nan_f16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
static bool is_nan_bf16(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

int main() {
  uint32_t *soft, *hard, *bf;
  cudaMallocManaged(&soft, 65536 * 4);
  cudaMallocManaged(&hard, 65536 * 4);
  cudaMallocManaged(&bf, 65536 * 4);
  convert_all<<<256, 256>>>(soft, hard, bf);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("FAIL: kernel error\n");
    return 1;
  }
  int bad = 0;
  for (uint32_t x = 0; x < 65536; ++x) {
    for (int half = 0; half < 2; ++half) {
      const uint16_t s = soft[x] >> (16 * half), h = hard[x] >> (16 * half), b = bf[x] >> (16 * half);
      const bool same = s == h || (is_nan_f16(s) && is_nan_f16(h));
      // bf16 of the same value: the f16 value widened to float, its top 16 bits
      const __half hv = __ushort_as_half(h);
      const float f = __half2float(hv);
      uint32_t fb;
      std::memcpy(&fb, &f, 4);
      const bool bf_same = b == (fb >> 16) || (is_nan_bf16(b) && is_nan_f16(h));
      if ((!same || !bf_same) && bad++ < 10)
        std::printf("mismatch at 0x%04x half %d: bits %04x cvt %04x bf16 %04x\n", x, half, s, h, b);
    }
  }
  std::printf(bad ? "FAIL: %d mismatches\n" : "OK: e4m3 -> f16 (bit trick = cvt) and -> bf16 exact on all %d inputs\n",
              bad ? bad : 65536);
  return bad ? 1 : 0;
}
