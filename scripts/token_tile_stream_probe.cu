// Dev probe (csrc/gemm/NOTES.md, "Token tiles in 2-CTA clusters"): batched decode's memory side
// alone. Why did the skinny tile's 2-CTA pairs (7777a12, TMA multicast of half a weight unit) run
// 1.2-1.4x slower than single CTAs, while cuBLAS's clusters beat both? No math: each of 128 CTAs
// streams, a k-tile at a time, an own box X and a tile Y (own, or in a 2-CTA cluster each CTA
// fetching half of it and multicasting it into both), through a ring of full/empty mbarriers; one
// consumer thread touches 16 bytes of every landed slot and releases it (in a cluster, on both
// CTAs' empty barriers, as gemm_wgmma_sm90.cuh does).
//
// Rows per CTA and k-tile (weight [4096, K] fp16, tokens [M, K], K = 4096, 128-byte k-tiles):
//   M = 64:  ours (X 64 weight rows, Y 32 tokens), ours as pairs (X 32 tokens, Y 64 weight rows
//            multicast), cuBLAS's 64x32 tile (X 32 weight rows, Y 64 tokens, own or multicast);
//   M = 256: ours (X 64 weight rows, Y 128 tokens), ours as pairs of weight units (Y multicast),
//            cuBLAS's 64x128 tile (X 64 tokens, Y 128 weight rows, own or multicast).
// Printed per row: us a call (L2-cold: 4 weight buffers of 33.5 MB in rotation, 16 launches
// between events, median of 7 loops) and what each SM takes in, in GB/s. The same
// shapes' real kernels under the bench's CUDA graphs, for reference: 17.2 us (ours, M = 64),
// 15.0 (cuBLAS); 21.6 and 19.0 at M = 256 (benchmarks/results/h100_gemm_skinny_pairs_7777a12.json).
// Timed launch by launch, as here, ours took 29.7 us at M = 256 under ncu: compare this probe's
// rows with each other, and check a lead under the bench's conditions (NOTES.md "The kernel in
// turns").
//
//   nvcc -std=c++20 -O3 -I csrc/include -gencode=arch=compute_90a,code=sm_90a \
//        -o /tmp/token_tile_stream_probe scripts/token_tile_stream_probe.cu && /tmp/token_tile_stream_probe
//   /tmp/token_tile_stream_probe 0 6     # only those cases (their row numbers, from 0), e.g. under
//   ncu -k regex:token_tile --launch-skip 8 -c 1 ...  # the first timed launch (after 8 warm-up ones)
#include <cuda_fp16.h>

#include <cstdio>
#include <vector>

#include "cuda_llm_ops/cluster.cuh"
#include "cuda_llm_ops/tma.cuh"
#include "cuda_llm_ops/wgmma.cuh"
#include "probe_util.cuh"

using namespace cuda_llm_ops;

constexpr int kMaxSlots = 32;

struct StreamArgs {
  int ktiles, x_rows, y_rows, slots;
  const int2* offsets;  // [grid]: the CTA's first row of X, and of the whole Y tile
  float* sink;
};

// A kernel's ring: its slots (dynamic shared memory, 128-byte swizzle atoms on 1 KB
// boundaries), each X then Y, and per slot the barriers full (one arrival with the slot's bytes)
// and empty (`releases` arrivals, init_ring). The barriers are function-scope shared memory: one
// set per block of whichever kernel calls it.
struct Ring {
  unsigned char* smem;
  uint64_t *full, *empty;
  uint32_t slot_bytes;
};
__device__ __forceinline__ Ring kernel_ring(const StreamArgs& a) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  return Ring{smem, full, empty, (a.x_rows + a.y_rows) * 128u};
}
__device__ __forceinline__ void init_ring(const Ring& ring, int slots, int releases) {
  for (int s = 0; s < slots; ++s) {
    tma::mbarrier_init(&ring.full[s], 1);
    tma::mbarrier_init(&ring.empty[s], releases);
  }
  tma::mbarrier_init_fence();
}
// The producer (one thread): every k-tile's X box at row off.x and Y tile at row off.y into the
// next slot once it is free; Y whole, or (kMulticastY) this cluster rank's half into both CTAs.
template <bool kMulticastY>
__device__ __forceinline__ void produce(const Ring& ring, const CUtensorMap* map_x, const CUtensorMap* map_y,
                                        const StreamArgs& a, int2 off, int rank) {
  for (int kt = 0, s = 0, phase = 0; kt < a.ktiles; ++kt) {
    if (kt >= a.slots) tma::mbarrier_wait(&ring.empty[s], phase ^ 1);
    tma::mbarrier_arrive_expect_tx(&ring.full[s], ring.slot_bytes);
    unsigned char* slot = ring.smem + s * ring.slot_bytes;
    tma::load_2d(slot, map_x, kt * 64, off.x, &ring.full[s]);
    unsigned char* y = slot + a.x_rows * 128;
    if constexpr (kMulticastY) {
      const int half = a.y_rows / 2;
      tma::load_2d_multicast(y + rank * half * 128, map_y, kt * 64, off.y + rank * half, &ring.full[s], 3);
    } else {
      tma::load_2d(y, map_y, kt * 64, off.y, &ring.full[s]);
    }
    if (++s == a.slots) s = 0, phase ^= 1;
  }
}

// kCoupled (clusters): each slot is released on both CTAs' empty barriers, as a multicast needs;
// without it a cluster launch only (each CTA its own loads and barriers).
template <int kCluster, bool kMulticastY, bool kCoupled = kMulticastY>
__global__ void __launch_bounds__(64, 1) token_tile_stream(const __grid_constant__ CUtensorMap map_x,
                                                           const __grid_constant__ CUtensorMap map_y, StreamArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const Ring ring = kernel_ring(a);
  const int rank = kCluster > 1 ? static_cast<int>(cluster::ctarank()) : 0;
  if (threadIdx.x == 0) {
    tma::prefetch_tensor_map(&map_x);
    tma::prefetch_tensor_map(&map_y);
    init_ring(ring, a.slots, kCoupled ? kCluster : 1);  // the consumer of every CTA the slot's loads fill
  }
  if constexpr (kCluster > 1) {
    cluster::sync();
  } else {
    __syncthreads();
  }
  const int2 off = a.offsets[blockIdx.x];
  if (threadIdx.x == 0) {
    produce<kMulticastY>(ring, &map_x, &map_y, a, off, rank);
  } else if (threadIdx.x == 32) {
    float acc = 0.f;
    for (int kt = 0, s = 0, phase = 0; kt < a.ktiles; ++kt) {
      tma::mbarrier_wait(&ring.full[s], phase);
      const uint4 v = *reinterpret_cast<const uint4*>(ring.smem + s * ring.slot_bytes + (kt % 64) * 16);
      acc += __half2float(*reinterpret_cast<const __half*>(&v.x));
      if constexpr (!kCoupled) {
        tma::mbarrier_arrive(&ring.empty[s]);
      } else {
        for (int r = 0; r < kCluster; ++r) cluster::mbarrier_arrive_remote(cluster::map_shared(&ring.empty[s], r));
      }
      if (++s == a.slots) s = 0, phase ^= 1;
    }
    if (acc == 12345.f) a.sink[blockIdx.x] = acc;
  }
  if constexpr (kCluster > 1) cluster::sync();  // no CTA exits while its peer may still arrive on it
#endif
}

// The same stream with the skinny tile's math (gemm_wgmma_sm90.cuh): X is the 64-row weight box
// (wgmma's A, K-major), Y the token tile (B, K-major, kN rows a consumer), 4 m64nKNk16 a k-tile,
// one wgmma group in flight, each slot released once its group retired. kMath 1: one consumer
// warpgroup on the whole tile (the kernel today at 64-row units); 2: two, each on half the
// token tile's rows (kN = half of them); 3: two, taking the k-tiles in turn (each its own
// accumulators; their sum is left out).
template <int kN>
__device__ __forceinline__ void mma_k16(float (&acc)[kN / 2], uint64_t da, uint64_t db) {
  constexpr wgmma::WgmmaTag<__half> tag{};
  if constexpr (kN == 16) wgmma::wgmma_m64n16k16<0, 0>(tag, acc, da, db);
  else if constexpr (kN == 32) wgmma::wgmma_m64n32k16<0, 0>(tag, acc, da, db);
  else if constexpr (kN == 64) wgmma::wgmma_m64n64k16<0, 0>(tag, acc, da, db);
  else wgmma::wgmma_m64n128k16<0, 0>(tag, acc, da, db);
}

template <int kMath, int kN>
__global__ void __launch_bounds__(384, 1) token_tile_math(const __grid_constant__ CUtensorMap map_x,
                                                          const __grid_constant__ CUtensorMap map_y, StreamArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const Ring ring = kernel_ring(a);
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0), wg_tid = threadIdx.x % 128;
  if (threadIdx.x == 0) init_ring(ring, a.slots, kMath == 2 ? 2 : 1);
  __syncthreads();
  const int2 off = a.offsets[blockIdx.x];
  // Branches on the warp-uniform warpgroup first (a wgmma under a test of threadIdx.x is on a
  // divergent path to ptxas, which then serializes every wgmma: C7520).
  if (warpgroup == 0) {
    if (threadIdx.x != 0) return;
    produce<false>(ring, &map_x, &map_y, a, off, 0);
  } else if (kMath != 1 || warpgroup == 1) {
    const int cw = warpgroup - 1;
    const uint64_t a_desc0 = wgmma::make_desc_sw128(smem_u32addr(ring.smem), 16, 1024);
    const uint64_t b_desc0 = wgmma::make_desc_sw128(
        smem_u32addr(ring.smem) + a.x_rows * 128 + (kMath == 2 ? cw * kN * 128 : 0), 16, 1024);
    // Accumulators from a value ptxas cannot fold, and only two read at the end: a zero start or
    // a sum of all of them made ptxas serialize the wgmmas (C7514), which the real kernel avoids.
    float acc[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[i] = __int_as_float(threadIdx.x & 1);
    // The real kernel's loop shape (no wgmma under a branch; ptxas would serialize them all):
    // this warpgroup's k-tiles kt0, kt0 + step, ...
    const int kt0 = kMath == 3 ? cw : 0, step = kMath == 3 ? 2 : 1;
    int prev = 0;
    for (int kt = kt0; kt < a.ktiles; kt += step) {
      const int s = kt % a.slots;
      tma::mbarrier_wait(&ring.full[s], (kt / a.slots) & 1);
      wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        mma_k16<kN>(acc, wgmma::desc_advance(a_desc0, s * ring.slot_bytes + kk * 32),
                    wgmma::desc_advance(b_desc0, s * ring.slot_bytes + kk * 32));
      }
      wgmma::commit_group();
      if (kt > kt0) {
        wgmma::wait_group<1>();
        if (wg_tid == 0) tma::mbarrier_arrive(&ring.empty[prev]);
      }
      prev = s;
    }
    wgmma::wait_group<0>();
    if (wg_tid == 0) tma::mbarrier_arrive(&ring.empty[prev]);
    if (acc[0] == 12345.f) a.sink[blockIdx.x] = acc[1];
  }
#endif
}

constexpr int kK = 4096, kWeightRows = 4096, kGrid = 128, kBuffers = 4;

CUtensorMap map_rows(const __half* base, int rows, int box_rows) {
  CUtensorMap m;
  const uint64_t dims[2] = {uint64_t(kK), uint64_t(rows)}, strides[1] = {uint64_t(kK) * 2};
  const uint32_t box[2] = {64, uint32_t(box_rows)};
  CK(tma::encode_tiled_16bit(&m, false, base, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                             tma::stream_l2_promotion()));
  return m;
}

struct Case {
  const char* name;
  int tokens;
  bool x_is_weight;  // else Y is the weight
  int x_rows, y_rows, cluster, slots;
  bool multicast_y, coupled;
  int2 (*offset)(int cta);  // the CTA's first X row and first row of its whole Y tile
  int math = 0;             // token_tile_math's kMath (single CTAs, X the 64-row weight box); 0: none
};

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<__half*> weights(kBuffers);
  for (auto& w : weights) {
    CK(cudaMalloc(&w, size_t(kWeightRows) * kK * 2));
    fill_random<<<1024, 256>>>(w, int64_t(kWeightRows) * kK, 7u);
  }
  __half* tokens = nullptr;
  CK(cudaMalloc(&tokens, size_t(256) * kK * 2));
  fill_random<<<256, 256>>>(tokens, int64_t(256) * kK, 11u);
  float* sink = nullptr;
  CK(cudaMalloc(&sink, kGrid * sizeof(float)));
  int2* offsets = nullptr;
  CK(cudaMalloc(&offsets, kGrid * sizeof(int2)));

  const Case cases[] = {
      {"M=64 ours: 64 weight + 32 tokens", 64, true, 64, 32, 1, 18, false, false,
       [](int c) { return int2{c / 2 * 64, c % 2 * 32}; }},
      {"M=64 ours, 8 slots", 64, true, 64, 32, 1, 8, false, false, [](int c) { return int2{c / 2 * 64, c % 2 * 32}; }},
      {"M=64 ours as pairs: 32 tokens + 64 weight mc", 64, false, 32, 64, 2, 18, true, true,
       [](int c) { return int2{c % 2 * 32, c / 2 * 64}; }},
      {"M=64 cuBLAS 64x32: 32 weight + 64 tokens", 64, true, 32, 64, 1, 18, false, false,
       [](int c) { return int2{c * 32, 0}; }},
      {"M=64 cuBLAS 64x32: 32 weight + 64 tokens mc", 64, true, 32, 64, 2, 18, true, true,
       [](int c) { return int2{c * 32, 0}; }},
      {"M=64 cuBLAS 64x32, pairs coupled, no mc", 64, true, 32, 64, 2, 18, false, true,
       [](int c) { return int2{c * 32, 0}; }},
      {"M=64 cuBLAS 64x32, cluster launch only", 64, true, 32, 64, 2, 18, false, false,
       [](int c) { return int2{c * 32, 0}; }},
      {"M=64 cuBLAS 64x32 mc, 10 slots", 64, true, 32, 64, 2, 10, true, true,
       [](int c) { return int2{c * 32, 0}; }},
      {"M=256 ours: 64 weight + 128 tokens", 256, true, 64, 128, 1, 9, false, false,
       [](int c) { return int2{c / 2 * 64, c % 2 * 128}; }},
      {"M=256 ours as pairs: 64 weight + 128 tokens mc", 256, true, 64, 128, 2, 9, true, true,
       [](int c) { return int2{(c / 4 * 2 + c % 2) * 64, c / 2 % 2 * 128}; }},
      {"M=256 cuBLAS 64x128: 64 tokens + 128 weight", 256, false, 64, 128, 1, 9, false, false,
       [](int c) { return int2{c % 4 * 64, c / 4 * 128}; }},
      {"M=256 cuBLAS 64x128: 64 tokens + 128 weight mc", 256, false, 64, 128, 2, 9, true, true,
       [](int c) { return int2{c % 4 * 64, c / 4 * 128}; }},
      {"M=256 cuBLAS 64x128, pairs coupled, no mc", 256, false, 64, 128, 2, 9, false, true,
       [](int c) { return int2{c % 4 * 64, c / 4 * 128}; }},
      {"M=256 cuBLAS 64x128, cluster launch only", 256, false, 64, 128, 2, 9, false, false,
       [](int c) { return int2{c % 4 * 64, c / 4 * 128}; }},
      {"M=256 ours + math, 1 WG m64n128", 256, true, 64, 128, 1, 9, false, false,
       [](int c) { return int2{c / 2 * 64, c % 2 * 128}; }, 1},
      {"M=256 ours + math, 2 WG m64n64 (halves)", 256, true, 64, 128, 1, 9, false, false,
       [](int c) { return int2{c / 2 * 64, c % 2 * 128}; }, 2},
      {"M=256 ours + math, 2 WG m64n128 (k-tiles in turn)", 256, true, 64, 128, 1, 9, false, false,
       [](int c) { return int2{c / 2 * 64, c % 2 * 128}; }, 3},
  };
  std::printf("%d SMs, %d CTAs, K = %d, weight %d rows (33.5 MB) x %d buffers\n", sms, kGrid, kK, kWeightRows,
              kBuffers);
  std::printf("%-50s %9s %12s\n", "case", "us/call", "GB/s per SM");
  for (int ci = 0; ci < int(sizeof(cases) / sizeof(cases[0])); ++ci) {
    bool chosen = argc == 1;
    for (int i = 1; i < argc; ++i) chosen |= std::atoi(argv[i]) == ci;
    if (!chosen) continue;
    const Case& c = cases[ci];
    if (c.slots > kMaxSlots) {
      std::fprintf(stderr, "%s: %d slots, at most %d\n", c.name, c.slots, kMaxSlots);
      return 1;
    }
    std::vector<int2> host(kGrid);
    for (int i = 0; i < kGrid; ++i) host[i] = c.offset(i);
    CK(cudaMemcpy(offsets, host.data(), kGrid * sizeof(int2), cudaMemcpyHostToDevice));
    const int y_box = c.multicast_y ? c.y_rows / 2 : c.y_rows;
    std::vector<CUtensorMap> mx(kBuffers), my(kBuffers);
    for (int b = 0; b < kBuffers; ++b) {
      mx[b] = c.x_is_weight ? map_rows(weights[b], kWeightRows, c.x_rows) : map_rows(tokens, c.tokens, c.x_rows);
      my[b] = c.x_is_weight ? map_rows(tokens, c.tokens, y_box) : map_rows(weights[b], kWeightRows, y_box);
    }
    StreamArgs a{kK / 64, c.x_rows, c.y_rows, c.slots, offsets, sink};
    const size_t smem = size_t(c.slots) * (c.x_rows + c.y_rows) * 128 + 1024;
    auto kernel = c.cluster == 1 ? token_tile_stream<1, false>
                  : c.multicast_y ? token_tile_stream<2, true>
                  : c.coupled     ? token_tile_stream<2, false, true>
                                  : token_tile_stream<2, false, false>;
    int threads = 64;
    if (c.math != 0) {
      threads = 384;
      if (c.y_rows != 128) {  // (at 32 tokens ptxas serialized the probe's wgmmas, C7514: not kept)
        std::fprintf(stderr, "%s: the math rows take 128-token tiles\n", c.name);
        return 1;
      }
      kernel = c.math == 1 ? token_tile_math<1, 128> : c.math == 2 ? token_tile_math<2, 64> : token_tile_math<3, 128>;
    }
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    auto launch = [&](int b) {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg = cluster::launch_config(dim3(kGrid), threads, smem, nullptr, c.cluster, &attr);
      CK(cudaLaunchKernelEx(&cfg, kernel, mx[b], my[b], a));
    };
    const double us = time_rotated(launch, kBuffers);
    const double per_sm = double(c.x_rows + c.y_rows) * 128 * (kK / 64) / us / 1e3;  // GB/s
    std::printf("%-50s %9.1f %12.1f\n", c.name, us, per_sm);
  }
  return 0;
}
