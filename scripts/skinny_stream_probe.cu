// Dev probe (csrc/gemm/NOTES.md, "Skinny"): how fast can a decode GEMM's weight stream go
// through TMA rings on this GPU, and which ring shape gets there? No math: each CTA streams
// a stream-K range of (unit, k-tile) iterations of a row-major [N, K] fp16 weight, as the
// Hopper skinny tile (gemm_wgmma_sm90.cuh, BN = 16) does, through a ring of full/empty
// mbarriers; one consumer thread touches 16 bytes of every landed stage and releases it.
// Next to it: the real skinny tile (launch_gemm, M = 16 and 1) on the same buffers, and a
// register stream (16-byte ld.global.nc, no smem) as the plain copy ceiling.
//
// Knobs per row: box rows R (weight rows a unit), boxes per stage B (B consecutive 128-byte
// k-chunks of every row: R x 128 B boxes side by side), stages S, CTAs per SM C (the ring's
// smem divided), the 2 KB activation box per stage (A: as the tile's swapped operand),
// the deal (stream-K ranges, k fastest, as the tile; or 'n': a CTA's range walks units with
// the k-tile fixed, so neighbouring CTAs read neighbouring rows at once).
// Timing: L2-cold by rotation over 4 buffers of N x K (each over the 50 MB L2), 16 launches
// back to back between events, median of 7 such loops; per-CTA %globaltimer stamps of one
// cold launch give the start-up, loop and tail.
//
//   bash scripts/build_skinny_probe.sh   # -> build/probe/skinny_probe (CLO_DEV_STAMPS build of csrc/gemm)
//   build/probe/skinny_probe [c|t|r]     # N = 12288, K = 4096 (100.7 MB) and K = 2048 (50.3 MB);
//                                        # c: copy ceiling only, t: the tile, r: the rings
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_llm_ops/tma.cuh"
#include "gemm/gemm.h"
#include "probe_util.cuh"

using namespace cuda_llm_ops;

struct StreamArgs {
  int units, ktiles;  // units of R rows, k-tiles of B * 128 bytes
  int base, rem;      // stream-K: CTA g takes iterations [g * base + min(g, rem), ...)
  int by_n;           // 1: iteration i is (unit i % units, k-tile i / units)
  float* sink;
  unsigned long long* stamps;  // [grid][4]: entry, first stage landed, loop done, end
};

__host__ __device__ inline int range_start(const StreamArgs& a, int g) { return g * a.base + (g < a.rem ? g : a.rem); }

template <int R, int B, int S, bool kWithA>
__global__ void __launch_bounds__(64) tma_ring_stream(const __grid_constant__ CUtensorMap map_w,
                                                      const __grid_constant__ CUtensorMap map_a, StreamArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr uint32_t kWBytes = R * 128 * B, kABytes = kWithA ? 16 * 128 : 0, kStageBytes = kWBytes + kABytes;
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[S], empty[S];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const unsigned long long t0 = global_ns();
  if (threadIdx.x == 0) {
    tma::prefetch_tensor_map(&map_w);
    for (int s = 0; s < S; ++s) {
      tma::mbarrier_init(&full[s], 1);
      tma::mbarrier_init(&empty[s], 1);
    }
    tma::mbarrier_init_fence();
  }
  __syncthreads();
  const int begin = range_start(a, blockIdx.x), end = range_start(a, blockIdx.x + 1);
  auto coords = [&](int i, int& unit, int& kt) {
    if (a.by_n) {
      unit = i % a.units;
      kt = i / a.units;
    } else {
      unit = i / a.ktiles;
      kt = i % a.ktiles;
    }
  };
  if (threadIdx.x == 0) {
    for (int i = begin, it = 0; i < end; ++i, ++it) {
      const int s = it % S;
      if (it >= S) tma::mbarrier_wait(&empty[s], ((it / S) - 1) & 1);
      tma::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
      int unit, kt;
      coords(i, unit, kt);
      unsigned char* dst = smem + s * kStageBytes;
#pragma unroll
      for (int b = 0; b < B; ++b) tma::load_2d(dst + b * R * 128, &map_w, (kt * B + b) * 64, unit * R, &full[s]);
      if constexpr (kWithA) tma::load_2d(dst + kWBytes, &map_a, (kt * B) * 64 % 4096, 0, &full[s]);
    }
  } else if (threadIdx.x == 32) {
    float acc = 0.f;
    unsigned long long t1 = 0;
    for (int i = begin, it = 0; i < end; ++i, ++it) {
      const int s = it % S;
      tma::mbarrier_wait(&full[s], (it / S) & 1);
      if (it == 0) t1 = global_ns();
      const uint4 x = *reinterpret_cast<const uint4*>(smem + s * kStageBytes + (it % 64) * 16);
      acc += __half2float(*reinterpret_cast<const __half*>(&x.x));
      tma::mbarrier_arrive(&empty[s]);
    }
    const unsigned long long t2 = global_ns();
    if (acc == 12345.f) a.sink[blockIdx.x] = acc;
    a.stamps[4 * blockIdx.x + 0] = t0;
    a.stamps[4 * blockIdx.x + 1] = t1;
    a.stamps[4 * blockIdx.x + 2] = t2;
  }
  __syncthreads();
  if (threadIdx.x == 0) a.stamps[4 * blockIdx.x + 3] = global_ns();
#endif
}

// The copy ceiling: 16-byte non-caching loads, U in flight per thread, grid-stride.
template <int U>
__global__ void __launch_bounds__(256) register_stream(const uint4* w, long long n16, float* sink) {
  float acc = 0.f;
  const long long stride = (long long)gridDim.x * blockDim.x * U;
  for (long long i = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; i < n16; i += stride) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long j = i + (long long)u * blockDim.x;
      if (j < n16) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                                : "=r"(x[u].x), "=r"(x[u].y), "=r"(x[u].z), "=r"(x[u].w) : "l"(w + j));
      else x[u] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += __uint_as_float(x[u].x ^ x[u].w);
  }
  if (acc == 12345.f) sink[blockIdx.x] = acc;
}

constexpr int kBuffers = 4;

template <class Launch>
float time_rotated(Launch launch) {  // us per launch, median over loops (probe_util.cuh)
  return time_rotated(launch, kBuffers);
}

struct Buffers {
  int N, K;
  std::vector<__half*> w;
  __half* act;
  float* sink;
  unsigned long long* stamps;
  void* workspace;
  size_t workspace_bytes = 64 << 20;
  __half* out;
};

int sms() {
  int n = 0;
  CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
  return n;
}

// Stamps of one launch on a cold buffer: medians (and max) relative to the earliest entry.
void print_timeline(const Buffers& b, int grid) {
  std::vector<unsigned long long> s(4 * grid);
  CK(cudaMemcpy(s.data(), b.stamps, s.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull;
  for (int g = 0; g < grid; ++g) t0 = std::min(t0, s[4 * g]);
  auto col = [&](int c, float& med, float& mx) {
    std::vector<float> v;
    for (int g = 0; g < grid; ++g) v.push_back((s[4 * g + c] - t0) * 1e-3f);
    std::sort(v.begin(), v.end());
    med = v[v.size() / 2];
    mx = v.back();
  };
  float m[4], x[4];
  for (int c = 0; c < 4; ++c) col(c, m[c], x[c]);
  std::printf("    timeline us (median / max): entry %.2f / %.2f, first stage %.2f / %.2f, loop done %.2f / %.2f, end %.2f / %.2f\n",
              m[0], x[0], m[1], x[1], m[2], x[2], m[3], x[3]);
}

template <int R, int B, int S, bool kWithA>
void run_ring(const Buffers& b, int ctas_per_sm, bool by_n, const char* note) {
  constexpr size_t kStageBytes = size_t(R) * 128 * B + (kWithA ? 2048 : 0);
  const size_t smem = S * kStageBytes + 1024;
  auto kernel = tma_ring_stream<R, B, S, kWithA>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  StreamArgs a{};
  a.units = b.N / R;
  a.ktiles = b.K / (64 * B);
  const long long iters = (long long)a.units * a.ktiles;
  const int grid = (int)std::min<long long>(iters, (long long)sms() * ctas_per_sm);
  a.base = (int)(iters / grid);
  a.rem = (int)(iters % grid);
  a.by_n = by_n;
  a.sink = b.sink;
  a.stamps = b.stamps;
  std::vector<CUtensorMap> mw(kBuffers);
  CUtensorMap ma;
  for (int i = 0; i < kBuffers; ++i) {
    const uint64_t dims[2] = {(uint64_t)b.K, (uint64_t)b.N}, strides[1] = {(uint64_t)b.K * 2};
    const uint32_t box[2] = {64, R};
    CK(tma::encode_tiled_16bit(&mw[i], false, b.w[i], 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                               tma::stream_l2_promotion()));
  }
  {
    const uint64_t dims[2] = {4096, 16}, strides[1] = {4096 * 2};
    const uint32_t box[2] = {64, 16};
    CK(tma::encode_tiled_16bit(&ma, false, b.act, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                               tma::stream_l2_promotion()));
  }
  const float us = time_rotated([&](int i) { kernel<<<grid, 64, smem>>>(mw[i], ma, a); });
  const double bytes = double(b.N) * b.K * 2;
  std::printf("  ring R=%3d B=%d S=%2d C=%d %s%s: %7.2f us  %5.3f TB/s  (%d CTAs, %zu KB smem)%s\n", R, B, S,
              ctas_per_sm, kWithA ? "+A" : "  ", by_n ? " n-order" : " k-order", us, bytes / us * 1e-6, grid,
              smem / 1024, note);
  CK(cudaMemset(b.stamps, 0, 8 * 8 * 2048));
  // One launch on a buffer last read four launches ago (cold), for its stamps.
  for (int i = 0; i < kBuffers; ++i) kernel<<<grid, 64, smem>>>(mw[i], ma, a);
  CK(cudaDeviceSynchronize());
  print_timeline(b, grid);
}

void run_register(const Buffers& b) {
  const long long n16 = (long long)b.N * b.K * 2 / 16;
  for (int per_sm : {2, 4, 8}) {
    const int grid = sms() * per_sm;
    const float us = time_rotated([&](int i) {
      register_stream<4><<<grid, 256>>>(reinterpret_cast<const uint4*>(b.w[i]), n16, b.sink);
    });
    std::printf("  register stream, %d x 256 threads a SM, 4 x 16 B in flight: %7.2f us  %5.3f TB/s\n", per_sm, us,
                double(b.N) * b.K * 2 / us * 1e-6);
  }
}

#ifdef CLO_DEV_STAMPS
// The skinny tile's own stamps (CLO_DEV_STAMPS build, gemm.h kGemmDevStamps) of one cold launch.
void print_tile_timeline(const Buffers& b) {
  constexpr int S = gemm::kGemmDevStamps;
  std::vector<unsigned long long> s(S * 2048);
  CK(cudaMemcpy(s.data(), b.stamps, s.size() * 8, cudaMemcpyDeviceToHost));
  int grid = 0;
  while (grid < 2048 && s[S * grid] != 0) ++grid;
  if (grid == 0) return;
  unsigned long long t0 = ~0ull;
  for (int g = 0; g < grid; ++g) t0 = std::min(t0, s[S * g]);
  auto col = [&](int c, bool rel, float& med, float& mx) {
    std::vector<float> v;
    for (int g = 0; g < grid; ++g) v.push_back((s[S * g + c] - (rel ? t0 : 0)) * 1e-3f);
    std::sort(v.begin(), v.end());
    med = v[v.size() / 2];
    mx = v.back();
  };
  float m[S], x[S];
  for (int c = 0; c < S; ++c) col(c, c < 4, m[c], x[c]);
  std::printf("    tile timeline us (median / max, %d CTAs): entry %.2f / %.2f, first stage %.2f / %.2f, last k-tile %.2f / %.2f, "
              "exit %.2f / %.2f; in mainloops %.2f / %.2f, in fixups %.2f / %.2f\n",
              grid, m[0], x[0], m[1], x[1], m[2], x[2], m[3], x[3], m[4], x[4], m[5], x[5]);
}
#endif

void run_tile(const Buffers& b, int M, bool force_tile, bool workspace = true, bool b_nk = true) {
  setenv("CLO_GEMM_SKINNY_WGMMA", force_tile ? "2" : "0", 1);
  gemm::GemmProblem p;
  p.b = nullptr;
  p.a = b.act;
  p.d = b.out;
  p.M = M;
  p.N = b.N;
  p.K = b.K;
  p.lda = 4096;
  p.ldb = b_nk ? b.K : b.N;  // the same buffer read as [N, K] or as [K, N]
  p.ldd = b.N;
  p.trans_b = b_nk;
  p.in_dtype = p.out_dtype = DType::kFloat16;
  p.workspace = workspace ? b.workspace : nullptr;
  p.workspace_bytes = workspace ? b.workspace_bytes : 0;
  const float us = time_rotated([&](int i) {
    gemm::GemmProblem q = p;
    q.b = b.w[i];
    CK(gemm::launch_gemm(q, gemm::GemmVariant::kAuto, nullptr));
  });
  std::printf("  %s M=%2d b %s (launch_gemm%s): %7.2f us  %5.3f TB/s\n", force_tile ? "skinny tile   " : "skinny kernels", M,
              b_nk ? "[N,K]" : "[K,N]", workspace ? "" : ", no workspace", us, double(b.N) * b.K * 2 / us * 1e-6);
#ifdef CLO_DEV_STAMPS
  if (force_tile) {
    CK(cudaMemset(b.stamps, 0, 8 * 8 * 2048));
    p.dev_stamps = b.stamps;
    for (int i = 0; i < kBuffers; ++i) {
      p.b = b.w[i];
      CK(gemm::launch_gemm(p, gemm::GemmVariant::kAuto, nullptr));
    }
    CK(cudaDeviceSynchronize());
    print_tile_timeline(b);
  }
#endif
}

int main(int argc, char** argv) {
  const int N = 12288;
  const char* only = argc > 1 ? argv[1] : "";
  for (int K : {4096, 2048}) {
    Buffers b;
    b.N = N;
    b.K = K;
    const size_t elems = size_t(N) * K;
    std::vector<__half> host(elems);
    for (size_t i = 0; i < elems; ++i) host[i] = __float2half(float((i * 2654435761u) % 2001) / 1000.f - 1.f);
    for (int i = 0; i < kBuffers; ++i) {
      __half* w;
      CK(cudaMalloc(&w, elems * 2));
      CK(cudaMemcpy(w, host.data(), elems * 2, cudaMemcpyHostToDevice));
      b.w.push_back(w);
    }
    CK(cudaMalloc(&b.act, 16 * 4096 * 2));
    CK(cudaMemcpy(b.act, host.data(), 16 * 4096 * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&b.sink, 4096 * 4));
    CK(cudaMalloc(&b.stamps, 8 * 8 * 2048));
    CK(cudaMalloc(&b.workspace, b.workspace_bytes));
    CK(cudaMalloc(&b.out, size_t(16) * N * 2));
    std::printf("N=%d K=%d fp16 weight, %.1f MB, L2-cold by rotation over %d buffers\n", N, K, elems * 2e-6, kBuffers);
    if (only[0] == 0 || only[0] == 'c') run_register(b);
    if (only[0] == 0 || only[0] == 't') {
      run_tile(b, 16, true);
      run_tile(b, 1, true);
      run_tile(b, 1, false);
      run_tile(b, 16, true, false);
      run_tile(b, 16, true, true, false);   // b [K, N]: stream-K
      run_tile(b, 16, true, false, false);  // b [K, N]: one CTA per 128-row unit
    }
    if (only[0] == 0 || only[0] == 'r') {
      run_ring<128, 1, 10, true>(b, 1, false, "  <- the skinny tile's pattern");
      run_ring<128, 1, 10, false>(b, 1, false, "");
      run_ring<128, 1, 10, true>(b, 1, true, "");
      run_ring<128, 1, 4, true>(b, 1, false, "");
      run_ring<128, 1, 6, true>(b, 1, false, "");
      run_ring<128, 1, 12, true>(b, 1, false, "");
      run_ring<128, 1, 5, true>(b, 2, false, "");
      run_ring<64, 1, 20, true>(b, 1, false, "");
      run_ring<64, 2, 10, true>(b, 1, false, "");
      run_ring<32, 4, 10, true>(b, 1, false, "");
      run_ring<64, 1, 10, true>(b, 2, false, "");
      run_ring<256, 1, 5, true>(b, 1, false, "");
    }
    for (auto* w : b.w) CK(cudaFree(w));
    CK(cudaFree(b.act));
    CK(cudaFree(b.sink));
    CK(cudaFree(b.stamps));
    CK(cudaFree(b.workspace));
    CK(cudaFree(b.out));
  }
  return 0;
}
