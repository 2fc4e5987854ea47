// How fast one block computes the MLA decode kernel's S = Q K^T (64 heads x 64 keys over 576
// columns, both operands in shared memory), by warpgroup layout and operand source: the
// question behind csrc/decode/NOTES.md "MLA, wgmma: where a tile's time goes" (is S bound by
// one warpgroup's wgmma chain, by shared-memory reads, or by the tensor pipe?).
//
//   nvcc -std=c++20 -O3 -I csrc/include -gencode=arch=compute_90a,code=sm_90a \
//        -o /tmp/wgmma_s_probe scripts/wgmma_s_probe.cu && /tmp/wgmma_s_probe
//
// No loads from global memory and no softmax: each active warpgroup runs `kIters` chains of
// wgmmas back to back on the same shared tiles (random fp16), one block per SM on every SM.
// Printed per mode: cycles per chain of the busiest warpgroup and the tensor rate that
// makes (per SM, 4096 dense fp16 FLOP a cycle is the peak).
#include <cuda_fp16.h>

#include <cstdio>

#include "cuda_llm_ops/wgmma.cuh"
#include "probe_util.cuh"

using namespace cuda_llm_ops;
constexpr int kIters = 200;
constexpr uint32_t kChunk = 64 * 128;  // 64 rows of 128 bytes, 128-byte swizzle
constexpr size_t kSmem = 9 * kChunk + 18 * kChunk + 1024;  // Q (64 rows), K (128 rows) + alignment

enum Mode {
  kOneWgN64,      // the kernel today: warpgroup 0 alone, 36 x m64n64k16 SS
  kTwoWgN64,      // both warpgroups, each the whole chain (twice the work)
  kTwoWgKHalf,    // both warpgroups, each half the k-steps (18 x m64n64k16): S split along the columns
  kTwoWgN32,      // both warpgroups, each 36 x m64n32k16 on its 32 keys: S split along the keys
  kOneWgRsQ,      // warpgroup 0 alone, A (Q) from registers: 36 x m64n64k16 RS
  kOneWgN128,     // warpgroup 0 alone, 128 keys a chain: 36 x m64n128k16 SS (2x the FLOPs)
  kModes
};
const char* kNames[] = {"1 WG, n64 SS (today)", "2 WG, n64 SS each whole", "2 WG, n64 SS each half k",
                        "2 WG, n32 SS each whole", "1 WG, n64 RS (Q in regs)", "1 WG, n128 SS"};

template <int kMode>
__global__ void __launch_bounds__(256, 1) s_probe(long long* cycles, float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  unsigned char* sm = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  // Random-ish fp16 bits (the values do not matter for the rate, but never constant).
  for (int i = threadIdx.x; i < 27 * int(kChunk) / 4; i += blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ blockIdx.x;
    reinterpret_cast<uint32_t*>(sm)[i] = (x & 0x3bff3bffu);  // |h| < 1
  }
  __syncthreads();
  // Warp-uniform to the compiler (a shuffle from lane 0), as in the kernels: a divergent-looking
  // branch around wgmma makes ptxas serialize them.
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0);
  const bool active = wg == 0 || (kMode == kTwoWgN64 || kMode == kTwoWgKHalf || kMode == kTwoWgN32);
  if (!active) {
    if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = 0;
    return;
  }
  float acc = 0.f;
  long long t0 = clock64();
  {
    const uint32_t q0 = smem_u32addr(sm);
    uint32_t a[4];
    for (int i = 0; i < 4; ++i) a[i] = reinterpret_cast<const uint32_t*>(sm)[threadIdx.x * 4 + i];
    for (int it = 0; it < kIters; ++it) {
      // The base made opaque each pass, so ptxas builds the descriptors in the loop (as the
      // kernel does per tile) instead of holding all 72 in registers.
      uint32_t q;
      asm volatile("mov.b32 %0, %1;" : "=r"(q) : "r"(q0));
      const uint32_t k = q + 9 * kChunk;
      const uint64_t qd = wgmma::make_desc_sw128(q, 16, 1024), kd = wgmma::make_desc_sw128(k, 16, 1024);
      // Per mode: N keys a wgmma, the warpgroup's k-steps [k0, k0 + kb), its first key row.
      constexpr int N = kMode == kOneWgN128 ? 128 : kMode == kTwoWgN32 ? 32 : 64;
      constexpr int kb = kMode == kTwoWgKHalf ? 18 : 36;
      const int k0 = kMode == kTwoWgKHalf ? wg * 18 : 0, key0 = kMode == kTwoWgN32 ? wg * 32 : 0;
      // K chunk c (64 columns) holds 64 rows at k + c * 8 KB, or 128 rows at k + c * 16 KB.
      constexpr uint32_t kKChunk = N == 128 ? 2 * kChunk : kChunk;
      float s[N / 2];
#pragma unroll
      for (int i = 0; i < N / 2; ++i) s[i] = 0.f;
      wgmma::fence();
#pragma unroll
      for (int j = 0; j < kb; ++j) {
        const int kk = k0 + j;
        const uint64_t qdesc = wgmma::desc_advance(qd, (kk / 4) * kChunk + (kk % 4) * 32);
        const uint64_t kdesc = wgmma::desc_advance(kd, (kk / 4) * kKChunk + (kk % 4) * 32 + key0 * 128);
        if constexpr (kMode == kOneWgRsQ) {
          wgmma::wgmma_m64n64k16_rs<0>(wgmma::WgmmaTag<__half>{}, s, a[0], a[1], a[2], a[3], kdesc);
        } else if constexpr (N == 128) {
          wgmma::wgmma_m64n128k16<0, 0>(wgmma::WgmmaTag<__half>{}, s, qdesc, kdesc);
        } else if constexpr (N == 32) {
          wgmma::wgmma_m64n32k16<0, 0>(wgmma::WgmmaTag<__half>{}, s, qdesc, kdesc);
        } else {
          wgmma::wgmma_m64n64k16<0, 0>(wgmma::WgmmaTag<__half>{}, s, qdesc, kdesc);
        }
      }
      wgmma::commit_group();
      wgmma::wait_group<0>();
      acc += s[0] + s[N / 2 - 1];
    }
  }
  const long long t1 = clock64();
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
  if (acc == 12345.f) sink[threadIdx.x] = acc;
#endif
}

template <int kMode>
void run(long long* d_cycles, float* sink, int sms) {
  CK(cudaFuncSetAttribute(s_probe<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  s_probe<kMode><<<sms, 256, kSmem>>>(d_cycles, sink);  // warm-up
  s_probe<kMode><<<sms, 256, kSmem>>>(d_cycles, sink);
  CK(cudaDeviceSynchronize());
  std::vector<long long> c(2 * sms);
  CK(cudaMemcpy(c.data(), d_cycles, c.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  std::vector<double> per;
  for (long long x : c)
    if (x > 0) per.push_back(double(x) / kIters);
  const double med = median_of(per);
  // FLOPs of one chain of the busiest warpgroup... and of the block per chain time.
  const double block_flops = kMode == kOneWgN128 ? 2.0 * 64 * 128 * 576
                             : kMode == kTwoWgN64 ? 2 * 2.0 * 64 * 64 * 576
                                                  : 2.0 * 64 * 64 * 576;
  std::printf("%-28s %7.0f cycles a chain, %5.0f cycles per 64 keys, block %5.0f FLOP/clk (%4.1f%% of 4096)\n",
              kNames[kMode], med, kMode == kOneWgN128 ? med / 2 : kMode == kTwoWgN64 ? med / 2 : med, block_flops / med,
              100.0 * block_flops / med / 4096);
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  long long* d_cycles;
  float* sink;
  CK(cudaMalloc(&d_cycles, 2 * sms * sizeof(long long)));
  CK(cudaMalloc(&sink, 1024 * sizeof(float)));
  run<kOneWgN64>(d_cycles, sink, sms);
  run<kTwoWgN64>(d_cycles, sink, sms);
  run<kTwoWgKHalf>(d_cycles, sink, sms);
  run<kTwoWgN32>(d_cycles, sink, sms);
  run<kOneWgRsQ>(d_cycles, sink, sms);
  run<kOneWgN128>(d_cycles, sink, sms);
  return 0;
}
