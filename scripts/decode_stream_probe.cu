// Dev probe (csrc/decode/NOTES.md, v7): how fast can a decode-shaped read stream go
// on this GPU, and which issue pattern gets there? No attention math: each block
// streams the K and V rows of one (sequence, KV head[, split]) of a contiguous
// [B, H, N, D=128] fp16 cache through a cp.async shared-memory pipeline, as the
// decode kernels do, and touches every landed chunk (one 16-byte smem read per
// copy, folded into a checksum so nothing is optimised away).
//
// Knobs per row: chunk keys (CH), chunks per pipeline stage (G: 2 = the K and V
// of a tile together, as decode_attention_kernel issues them; 1 = K and V chunks
// alternate, one array in flight per stage), stages (S: S-1 stages in flight),
// blocks per SM (smem padding), L2 prefetch hint. Also a register-only variant
// (ld.global.nc 16 B, U loads in flight per thread, no smem) as the plain ceiling.
// Per-block %globaltimer stamps give the spread of block start and end times
// (a tail from uneven per-SM rates shows as end spread).
//
//   nvcc -std=c++20 -O3 -I csrc/include -gencode=arch=compute_90a,code=sm_90a \
//        scripts/decode_stream_probe.cu -o /tmp/probe && /tmp/probe
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_llm_ops/pipeline.cuh"
#include "decode/decode_internal.h"
#include "probe_util.cuh"

using namespace cuda_llm_ops;

constexpr int kD = 128;           // head dim (elements)
constexpr int kRowBytes = kD * 2;  // 256 B per key row
constexpr int kThreads = 128;

template <int kHint>
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  const uint32_t d = smem_u32addr(dst);
  if constexpr (kHint == 257)  // the decode kernels' zero-fill form (src-size operand)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(16));
  else if constexpr (kHint == 256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(d), "l"(src));
  else if constexpr (kHint == 128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(d), "l"(src));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

struct Args {
  const __half* k;
  const __half* v;
  int heads, n, keys_per_block, splits;
  float* sink;
  unsigned long long* stamps;  // [blocks][2]
};

// The checksum to the sink (never taken) and the block's start / end stamps.
__device__ void finish_stream_block(const Args& a, float acc, int blk, unsigned long long t0) {
  if (acc == 12345.f) a.sink[blk] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    a.stamps[2 * blk] = t0;
    a.stamps[2 * blk + 1] = global_ns();
  }
}

// One 16-byte smem chunk folded into a checksum term (so no copy is optimised away).
__device__ __forceinline__ float touch16(const unsigned char* p) {
  const uint4 x = *reinterpret_cast<const uint4*>(p);
  return __half2float(*reinterpret_cast<const __half*>(&x.x)) + __half2float(*reinterpret_cast<const __half*>(&x.w));
}

// The cp.async pipeline of the stream kernels: S stages, item t issued S - 1 items
// ahead; touch(t) reads item t once it landed. Returns the checksum.
template <int S, class Issue, class Touch>
__device__ __forceinline__ float run_stream_pipeline(int n_items, Issue issue, Touch touch) {
  for (int s = 0; s < S - 1; ++s) {
    if (s < n_items) issue(s);
    cp_async_commit();
  }
  float acc = 0.f;
  for (int t = 0; t < n_items; ++t) {
    cp_async_wait<S - 2>();
    __syncthreads();
    if (t + S - 1 < n_items) issue(t + S - 1);
    cp_async_commit();
    acc += touch(t);
  }
  cp_async_wait_all();
  return acc;
}

// Chunk c of the block's stream: array c % 2 (K, V), keys (c / 2) * CH ...
template <int CH, int G, int S, int kHint, bool kInterleave = false, bool kPadDst = false>
__global__ void __launch_bounds__(kThreads) stream_smem(Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kChunkBytes = CH * kRowBytes;
  constexpr int kCopies = kChunkBytes / 16 / kThreads;  // per thread per chunk
  static_assert(kCopies >= 1, "chunk too small");
  // No-ops unless launched with the PDL attribute (section g); the stamp is taken after
  // the wait, so a graph's gap between calls reads as next start - previous end.
  pdl_wait_primary();
  pdl_launch_dependents();
  const unsigned long long t0 = global_ns();
  const int blk = blockIdx.x, split = blk % a.splits, bh = blk / a.splits;
  const int64_t base = (int64_t(bh) * a.n + int64_t(split) * a.keys_per_block) * kD;
  const int n_chunks = 2 * (a.keys_per_block / CH);
  const int n_stages_items = n_chunks / G;
  // Chunk bytes in smem: dense, or (kPadDst) the v1-v6 layout of 256-byte rows at a
  // 272-byte stride.
  constexpr int kChunkSmem = kChunkBytes + (kPadDst ? CH * 16 : 0);
  auto dst = [](int g, int off) { return g * kChunkSmem + (kPadDst ? (off / 256) * 272 + off % 256 : off); };
  auto issue = [&](int item) {
    unsigned char* st = smem + (item % S) * G * kChunkSmem;
    if constexpr (kInterleave && G == 2) {  // as decode_attention_kernel: K copy i, V copy i, ...
      const __half* ksrc = a.k + base + int64_t(item) * CH * kD;
      const __half* vsrc = a.v + base + int64_t(item) * CH * kD;
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        const int off = (threadIdx.x + i * kThreads) * 16;
        cp16<kHint>(st + dst(0, off), reinterpret_cast<const unsigned char*>(ksrc) + off);
        cp16<kHint>(st + dst(1, off), reinterpret_cast<const unsigned char*>(vsrc) + off);
      }
      return;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int c = item * G + g;
      const __half* src = ((c & 1) ? a.v : a.k) + base + int64_t(c >> 1) * CH * kD;
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        const int off = (threadIdx.x + i * kThreads) * 16;
        cp16<kHint>(st + dst(g, off), reinterpret_cast<const unsigned char*>(src) + off);
      }
    }
  };
  const float acc = run_stream_pipeline<S>(n_stages_items, issue, [&](int t) {
    const unsigned char* st = smem + (t % S) * G * kChunkSmem;
    float sum = 0.f;
#pragma unroll
    for (int g = 0; g < G; ++g) sum += touch16(st + dst(g, threadIdx.x * 16));
    return sum;
  });
  finish_stream_block(a, acc, blk, t0);
}

// Section g: the same stream through a paged cache [num_blocks, 16, H, D] (block table
// [B, N / 16], shuffled physical blocks), as paged_attention reads it. A block streams
// G heads (hg * G ..) of one sequence's split: each stage holds the K and V of 64 / G keys
// of those heads (32 KB, as the decode kernels' 64-key tiles of one head), i.e. per key
// row a G * 256-byte run at an H * 256-byte stride. G = 1 is paged_attention's
// decomposition (4 runs of 16 rows of 256 bytes per tile); G = H reads whole paged
// blocks (contiguous 16 * H * 256 bytes per array), with G splits per sequence to keep
// the grid. The block's table entries are read after the PDL wait into smem (as the
// kernels must), then the cp.async pipeline of stream_smem.
template <int S, int G, int kHint = 256>
__global__ void __launch_bounds__(kThreads) stream_paged(Args a, const int* table, int table_stride) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kBs = 16, kKeys = 64 / G;  // keys per stage
  constexpr int kRun = G * kRowBytes;      // bytes per key row and array
  constexpr int kHalf = kKeys * kRun;      // K (then V) bytes per stage
  constexpr int kCopies = kHalf / 16 / kThreads;
  static_assert(kCopies >= 1 && kHalf == 64 * kRowBytes, "32 KB stages");
  __shared__ int tbl[1024];
  pdl_wait_primary();
  pdl_launch_dependents();
  const unsigned long long t0 = global_ns();
  const int blk = blockIdx.x, split = blk % a.splits, bh = blk / a.splits;
  const int groups = a.heads / G;
  const int b = bh / groups, hg = bh % groups;
  const int key0 = split * a.keys_per_block;
  const int n_tiles = a.keys_per_block / kKeys;
  for (int i = threadIdx.x; i < a.keys_per_block / kBs; i += kThreads)
    tbl[i] = table[b * table_stride + key0 / kBs + i];
  __syncthreads();
  auto issue = [&](int t) {
    unsigned char* st = smem + (t % S) * 2 * kHalf;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const unsigned char* arr = reinterpret_cast<const unsigned char*>(g ? a.v : a.k);
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        const int off = (threadIdx.x + i * kThreads) * 16;
        const int key = t * kKeys + off / kRun;  // within the block's range
        const int64_t row = int64_t(tbl[key / kBs]) * kBs + key % kBs;
        cp16<kHint>(st + g * kHalf + off, arr + (row * a.heads + hg * G) * kRowBytes + off % kRun);
      }
    }
  };
  const float acc = run_stream_pipeline<S>(n_tiles, issue, [&](int t) {
    const unsigned char* st = smem + (t % S) * 2 * kHalf;
    return touch16(st + threadIdx.x * 16) + touch16(st + kHalf + threadIdx.x * 16);
  });
  finish_stream_block(a, acc, blk, t0);
}

// Balance probe (v9): the B=16/1K/GQA stream (units of `tiles` 64-key K+V tiles) read by
// (kMode 0) one block per unit, (1) a static even share of the flattened tile list per
// block (grid = SMs), (2) blocks claiming chunks of kChunk tiles from a global counter
// (grid = SMs; the claim for the next chunk rides one chunk ahead of the issue).
template <int kMode, int kChunk, int S>
__global__ void __launch_bounds__(kThreads) stream_balanced(Args a, int units, int tiles, int* counter) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int CH = 64;
  constexpr int kTileBytes = CH * kRowBytes;  // one of K or V
  constexpr int kCopies = kTileBytes / 16 / kThreads;
  constexpr int kRing = 16;
  __shared__ int chunk_ring[kRing];
  const unsigned long long t0 = global_ns();
  const int total = units * tiles;
  const int n_chunks = (total + kChunk - 1) / kChunk;
  int lo = 0, hi = total;
  if (kMode == 0) { lo = blockIdx.x * tiles; hi = lo + tiles; }
  if (kMode == 1) { lo = int(int64_t(total) * blockIdx.x / gridDim.x); hi = int(int64_t(total) * (blockIdx.x + 1) / gridDim.x); }
  if (kMode == 2 && threadIdx.x == 0) chunk_ring[0] = atomicAdd(counter, 1);  // issue(0) claims the next
  __syncthreads();
  // Flat tile of the block's item i, or -1 past its end.
  auto tile_of = [&](int i) -> int {
    if (kMode != 2) return lo + i < hi ? lo + i : -1;
    const int c = chunk_ring[(i / kChunk) % kRing];
    const int t = c * kChunk + i % kChunk;
    return c < n_chunks && t < total ? t : -1;
  };
  auto issue = [&](int item) {
    const int t = tile_of(item);
    if (kMode == 2 && threadIdx.x == 0 && item % kChunk == 0) chunk_ring[(item / kChunk + 1) % kRing] = atomicAdd(counter, 1);
    if (t < 0) return;
    const int64_t base = (int64_t(t / tiles) * a.n + int64_t(t % tiles) * CH) * kD;
    unsigned char* st = smem + (item % S) * 2 * kTileBytes;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const unsigned char* src = reinterpret_cast<const unsigned char*>((g ? a.v : a.k) + base);
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        const int off = (threadIdx.x + i * kThreads) * 16;
        cp16<256>(st + g * kTileBytes + off, src + off);
      }
    }
  };
  for (int s = 0; s < S - 1; ++s) {
    issue(s);
    cp_async_commit();
    if (kMode == 2) __syncthreads();  // the claim ring
  }
  float acc = 0.f;
  int consumed = 0;
  for (int t = 0;; ++t) {
    cp_async_wait<S - 2>();
    __syncthreads();
    if (tile_of(t) < 0) {
      consumed = t;
      break;
    }
    issue(t + S - 1);
    cp_async_commit();
    const unsigned char* st = smem + (t % S) * 2 * kTileBytes;
#pragma unroll
    for (int g = 0; g < 2; ++g) acc += touch16(st + g * kTileBytes + threadIdx.x * 16);
  }
  cp_async_wait_all();
  if (acc == 12345.f) a.sink[blockIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(counter + 1, consumed);  // tiles read: the run checks every tile was read once
    a.stamps[2 * blockIdx.x] = t0;
    a.stamps[2 * blockIdx.x + 1] = global_ns();
  }
}

// Registers only: each thread keeps U 16-byte loads in flight, K and V alternating.
template <int U>
__global__ void __launch_bounds__(kThreads) stream_regs(Args a) {
  const unsigned long long t0 = global_ns();
  const int blk = blockIdx.x, split = blk % a.splits, bh = blk / a.splits;
  const int64_t base = (int64_t(bh) * a.n + int64_t(split) * a.keys_per_block) * kD;
  const uint4* k = reinterpret_cast<const uint4*>(a.k + base);
  const uint4* v = reinterpret_cast<const uint4*>(a.v + base);
  const int n16 = a.keys_per_block * kRowBytes / 16;
  float acc = 0.f;
  for (int i = threadIdx.x; i < n16; i += kThreads * U / 2) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U / 2; ++u) {
      const int j = i + u * kThreads;
      x[2 * u] = j < n16 ? __ldcs(k + j) : make_uint4(0, 0, 0, 0);
      x[2 * u + 1] = j < n16 ? __ldcs(v + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc += __uint_as_float(x[u].x ^ x[u].w);
  }
  if (acc == 12345.f) a.sink[blk] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    a.stamps[2 * blk] = t0;
    a.stamps[2 * blk + 1] = global_ns();
  }
}

// Section k: the resolution of %clock64 and %globaltimer (successive reads, a short
// busy loop between them), since the dev stamps' start-up steps are sub-microsecond.
__global__ void clock_probe(unsigned long long* out, int n) {
  for (int i = 0; i < n; ++i) {
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    out[2 * i] = static_cast<unsigned long long>(clock64());
    out[2 * i + 1] = g;
    for (volatile int j = 0; j < 20; ++j) {}
  }
}

__global__ void flush_read(const float4* p, int64_t n, float* sink) {
  float acc = 0.f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 x = __ldcs(p + i);
    acc += x.x + x.w;
  }
  if (acc == 12345.f) sink[0] = acc;
}

struct Problem {
  int batch, heads, n, splits;
  const char* name;
};

constexpr int64_t kStampSlots = 65536;  // the stamp buffer's 8-byte slots
static float4* g_flush = nullptr;
static int64_t g_flush_n = 0;
static float* g_sink = nullptr;
static int g_sms = 0;
static int64_t max_elems_global = 0;

template <typename Launch>
void time_it(const char* label, const Problem& pr, Launch launch, unsigned long long* d_stamps, int iters) {
  const int blocks = pr.batch * pr.heads * pr.splits;
  const double bytes = 2.0 * pr.batch * pr.heads * double(pr.n) * kRowBytes;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  std::vector<unsigned long long> st(2 * blocks);
  double end_spread = 0, start_spread = 0, dur_mean = 0, dur_max = 0, dur_min = 1e30;
  for (int it = 0; it < iters + 2; ++it) {
    flush_read<<<g_sms * 4, 512>>>(g_flush, g_flush_n, g_sink);
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (it < 2) continue;
    ts.push_back(ms);
    if (it == iters + 1) {
      CK(cudaMemcpy(st.data(), d_stamps, st.size() * 8, cudaMemcpyDeviceToHost));
      unsigned long long s0 = ~0ull, s1 = 0, e_0 = ~0ull, e_1 = 0;
      for (int b = 0; b < blocks; ++b) {
        s0 = std::min(s0, st[2 * b]);
        s1 = std::max(s1, st[2 * b]);
        e_0 = std::min(e_0, st[2 * b + 1]);
        e_1 = std::max(e_1, st[2 * b + 1]);
        const double d = double(st[2 * b + 1] - st[2 * b]);
        dur_mean += d / blocks;
        dur_max = std::max(dur_max, d);
        dur_min = std::min(dur_min, d);
      }
      start_spread = double(s1 - s0);
      end_spread = double(e_1 - e_0);
    }
  }
  std::sort(ts.begin(), ts.end());
  const double med = ts[ts.size() / 2] * 1e3;  // us
  std::printf("%-22s %-34s %8.1f us %6.3f TB/s | block us min/mean/max %6.1f %6.1f %6.1f | start spread %5.1f end spread %5.1f\n",
              pr.name, label, med, bytes / (med * 1e-6) / 1e12, dur_min / 1e3, dur_mean / 1e3, dur_max / 1e3,
              start_spread / 1e3, end_spread / 1e3);
  std::fflush(stdout);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
}

template <int CH, int G, int S, int kHint, bool kInterleave = false, bool kPadDst = false>
void run_smem(const Problem& pr, Args a, unsigned long long* stamps, int per_sm, int iters) {
  auto kern = stream_smem<CH, G, S, kHint, kInterleave, kPadDst>;
  const int need = S * G * CH * (kRowBytes + (kPadDst ? 16 : 0));
  const int smem = std::max(need, (227 * 1024) / per_sm - 2048);
  if (need > 227 * 1024) return;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, kThreads, smem));
  const int blocks = pr.batch * pr.heads * pr.splits;
  char label[96];
  std::snprintf(label, sizeof label, "smem CH%d G%d S%d L2:%d%s%s %d/SM(%dKB)", CH, G, S, kHint,
                kInterleave ? " il" : "", kPadDst ? " pad272" : "", occ, need / 1024);
  time_it(label, pr, [&] { kern<<<blocks, kThreads, smem>>>(a); }, stamps, iters);
}

// A device block table 0 .. nb - 1 in a fixed shuffled order (physical blocks scattered,
// as the bench's caches); the caller frees it.
static int* shuffled_block_table(int nb) {
  std::vector<int> h(nb);
  for (int i = 0; i < nb; ++i) h[i] = i;
  uint32_t r = 12345u;
  for (int i = nb - 1; i > 0; --i) {
    r = r * 1664525u + 1013904223u;
    std::swap(h[i], h[r % (i + 1)]);
  }
  int* table = nullptr;
  CK(cudaMalloc(&table, nb * 4));
  CK(cudaMemcpy(table, h.data(), nb * 4, cudaMemcpyHostToDevice));
  return table;
}

// Median time per call (us) of `iters` replays of `ge`, a graph of `calls` calls (after 2
// warm-up replays), as `llm-speed bench` divides a replay.
static double graph_us_per_call(cudaGraphExec_t ge, cudaStream_t st, int iters, int calls) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int it = 0; it < iters + 2; ++it) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (it >= 2) ts.push_back(ms / calls);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2] * 1e3;
}

// Section g: the plain stream timed as `llm-speed bench` times (one graph of back-to-back
// calls over rotated K/V sets, per-call time = replay / calls), PDL off / on, with the
// per-call timeline from the stamps of the last replay: the gap between one call's last
// block end and the next call's first post-wait start, and each call's end spread.
// kHeadsPerBlock 0: the contiguous cache (stream_smem); >= 1: the paged cache
// (stream_paged with that many heads per block and as many splits per sequence).
// kHint: the cp.async L2 prefetch hint (256, 128 or 0: none).
template <int CH, int G, int S, int kHeadsPerBlock = 0, int kHint = 256>
void run_smem_graph(const Problem& pr, __half* k, __half* v, unsigned long long* stamps, int per_sm, int iters,
                    const int* table = nullptr) {
  constexpr bool kPaged = kHeadsPerBlock > 0;
  static_assert(!kPaged || (CH == 64 && G == 2), "stream_paged streams 32-KB K+V stages");
  auto kern = stream_smem<CH, G, S, kHint>;
  auto paged_kern = stream_paged<S, kPaged ? kHeadsPerBlock : 1, kHint>;
  const int splits = pr.splits * (kPaged ? kHeadsPerBlock : 1);
  const int need = S * G * CH * kRowBytes;
  const int blocks = pr.batch * pr.heads * pr.splits;
  const int64_t set_elems = int64_t(pr.batch) * pr.heads * pr.n * kD;
  const int sets = int(std::min<int64_t>(4, max_elems_global / set_elems));
  const int calls = 3 * sets;
  const char* skip = need > 227 * 1024                          ? "stages do not fit in smem"
                     : int64_t(calls) * 2 * blocks > kStampSlots ? "more block stamps than the buffer holds"
                     : kPaged && pr.n / splits / 16 > 1024      ? "more table entries per block than 1024"
                                                                : nullptr;
  if (skip != nullptr) {
    std::printf("%-22s graph CH%d G%d S%d: skipped (%s)\n", pr.name, CH, G, S, skip);
    return;
  }
  // stream_paged's static table takes 4 KB of the block's share.
  const int smem = std::max(need, (227 * 1024) / per_sm - 2048 - (kPaged ? 4096 : 0));
  if constexpr (kPaged) CK(cudaFuncSetAttribute(paged_kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  else CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double bytes = 2.0 * set_elems * 2;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (int pdl = 0; pdl < 2; ++pdl) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) {
      Args a{k + (i % sets) * set_elems, v + (i % sets) * set_elems, pr.heads, pr.n, pr.n / splits, splits,
             g_sink, stamps + int64_t(i) * 2 * blocks};
      if constexpr (kPaged)
        CK(launch_kernel(paged_kern, dim3(blocks), dim3(kThreads), smem, st, pdl == 1, a, table, pr.n / 16));
      else
        CK(launch_kernel(kern, dim3(blocks), dim3(kThreads), smem, st, pdl == 1, a));
    }
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    const double med = graph_us_per_call(ge, st, iters, calls);
    std::vector<unsigned long long> h(size_t(calls) * 2 * blocks);
    CK(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost));
    std::vector<double> gaps, spreads, bodies;
    unsigned long long prev_end = 0;
    for (int i = 0; i < calls; ++i) {
      unsigned long long s0 = ~0ull, e_0 = ~0ull, e_1 = 0;
      for (int b = 0; b < blocks; ++b) {
        s0 = std::min(s0, h[(size_t(i) * blocks + b) * 2]);
        e_0 = std::min(e_0, h[(size_t(i) * blocks + b) * 2 + 1]);
        e_1 = std::max(e_1, h[(size_t(i) * blocks + b) * 2 + 1]);
      }
      // Differences in integers first: epoch ns (~1.8e18) in a double step by 256 ns.
      if (i > 0) gaps.push_back(double(int64_t(s0 - prev_end)) / 1e3);
      spreads.push_back(double(e_1 - e_0) / 1e3);
      bodies.push_back(double(e_1 - s0) / 1e3);
      prev_end = e_1;
    }
    char label[96];
    char layout[24] = "";
    if (kPaged) std::snprintf(layout, sizeof layout, " paged %dh", kHeadsPerBlock);
    std::snprintf(label, sizeof label, "graph%s CH%d G%d S%d L2:%d %d/SM PDL %s", layout, CH, G, S, kHint, per_sm,
                  pdl ? "on" : "off");
    std::printf("%-22s %-34s %8.1f us %6.3f TB/s | per call: start->last end %5.2f, end spread %5.2f, "
                "gap to next start %5.2f us\n",
                pr.name, label, med, bytes / (med * 1e-6) / 1e12, median_of(bodies), median_of(spreads),
                median_of(gaps));
    std::fflush(stdout);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  CK(cudaStreamDestroy(st));
}

static int g_counter_call = 0;

template <int kMode, int kChunk, int S>
void run_balanced(const Problem& pr, Args a, unsigned long long* stamps, int iters, int* counters) {
  auto kern = stream_balanced<kMode, kChunk, S>;
  const int smem = S * 2 * 64 * kRowBytes;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int units = pr.batch * pr.heads, tiles = pr.n / 64;
  const int blocks = kMode == 0 ? units : g_sms;
  Problem p = pr;  // time_it reads blocks as batch * heads * splits
  p.batch = 1; p.heads = blocks; p.splits = 1;
  p.n = int(int64_t(pr.batch) * pr.heads * pr.n / blocks);  // bytes only (approximately equal)
  char label[96];
  std::snprintf(label, sizeof label, "bal mode %d chunk %d S%d (%d blk)", kMode, kChunk, S, blocks);
  // A fresh zeroed counter per launch (no memset inside the timed span), over all variants.
  time_it(label, p, [&] { kern<<<blocks, kThreads, smem>>>(a, units, tiles, counters + (g_counter_call++ % 4096) * 32); },
          stamps, iters);
  int read[2];
  CK(cudaMemcpy(read, counters + ((g_counter_call - 1) % 4096) * 32, 8, cudaMemcpyDeviceToHost));
  if (read[1] != units * tiles) std::printf("   ^ WRONG: %d of %d tiles read\n", read[1], units * tiles);
}

template <int U>
void run_regs(const Problem& pr, Args a, unsigned long long* stamps, int iters) {
  const int blocks = pr.batch * pr.heads * pr.splits;
  char label[64];
  std::snprintf(label, sizeof label, "regs U%d", U);
  time_it(label, pr, [&] { stream_regs<U><<<blocks, kThreads>>>(a); }, stamps, iters);
}

#ifdef CLO_DEV_STAMPS
// The earliest stamp-0 (%globaltimer) value over `nblk` blocks' stamps (0 skipped).
static unsigned long long first_stamp(const unsigned long long* h, int nblk) {
  unsigned long long m = ~0ull;
  for (int b = 0; b < nblk; ++b) {
    const unsigned long long t = h[size_t(cuda_llm_ops::decode::kDecodeDevStamps) * b];
    if (t != 0) m = std::min(m, t);
  }
  return m;
}
// The TMA kernel's dev stamps of `nblk` blocks in ns after `base` (a %globaltimer value
// at or before every stamp; 0 where a stamp was not taken): 0 and 4 are %globaltimer,
// the rest %clock64, mapped through the block's own clock at 0 (slot 8) and the median
// clock rate over the blocks (cycles per ns from 8..9 over 0..4). Epoch ns (~1.8e18)
// must not go into a double as they are: it steps by 256 ns there.
static std::vector<double> stamps_ns(const unsigned long long* h, int nblk, unsigned long long base) {
  constexpr int kS = cuda_llm_ops::decode::kDecodeDevStamps;
  std::vector<double> rates, out(size_t(nblk) * kS, 0.0);
  for (int b = 0; b < nblk; ++b) {
    const unsigned long long* c = h + size_t(kS) * b;
    if (c[4] > c[0] && c[9] > c[8]) rates.push_back(double(c[9] - c[8]) / double(c[4] - c[0]));
  }
  const double rate = median_of(rates);
  for (int b = 0; b < nblk && rate > 0; ++b) {
    const unsigned long long* c = h + size_t(kS) * b;
    if (c[0] == 0) continue;
    for (int k = 0; k < kS; ++k) {
      if (k == 8 || k == 9 || k == 20) continue;  // 20: the SM id + 1, not a time
      if (k == 0 || k == 4) out[size_t(kS) * b + k] = double(c[k] - base);
      else if (c[k] != 0) out[size_t(kS) * b + k] = double(c[0] - base) + double(int64_t(c[k] - c[8])) / rate;
    }
  }
  return out;
}
#endif

// Our decode kernels through the raw launcher (decode.h), same buffers, flush and timer.
struct OursCase {
  int batch, hkv, n;
  bool paged;
  int splits;   // 0: the heuristic's
  int variant;  // CLO_DECODE_VARIANT: 0 auto, 1 cp.async, 2 TMA
  int block_size = 16;  // paged
};

void run_ours(const OursCase& c, __half* k, __half* v, unsigned long long* stamps, int iters) {
  using namespace cuda_llm_ops::decode;
  constexpr int kHq = 32;
  const int D = kD;
  char env[8];
  std::snprintf(env, sizeof env, "%d", c.variant);
  setenv("CLO_DECODE_VARIANT", env, 1);
  __half *q = nullptr, *out = nullptr;
  CK(cudaMalloc(&q, size_t(c.batch) * kHq * D * 2));
  CK(cudaMalloc(&out, size_t(c.batch) * kHq * D * 2));
  fill_random<<<256, 256>>>(q, int64_t(c.batch) * kHq * D, 7u);
  DecodeAttentionArgs a;
  a.dtype = DType::kFloat16;
  a.head_dim = D;
  a.batch = c.batch;
  a.num_q_heads = kHq;
  a.num_kv_heads = c.hkv;
  a.seq_len_q = 1;
  a.q = q;
  a.q_stride_b = int64_t(kHq) * D;
  a.q_stride_h = D;
  a.q_stride_n = D;
  a.out = out;
  a.o_stride_b = int64_t(kHq) * D;
  a.o_stride_h = D;
  a.o_stride_n = D;
  a.k = k;
  a.v = v;
  a.scale = 1.f / std::sqrt(float(D));
  int* table = nullptr;
  int* lens = nullptr;
  if (c.paged) {
    const int bs = c.block_size, per_seq = c.n / bs, nb = c.batch * per_seq;
    std::vector<int> h_lens(c.batch, c.n);
    table = shuffled_block_table(nb);
    CK(cudaMalloc(&lens, c.batch * 4));
    CK(cudaMemcpy(lens, h_lens.data(), c.batch * 4, cudaMemcpyHostToDevice));
    a.paged = true;
    a.block_tables = table;
    a.table_stride = per_seq;
    a.max_blocks_per_seq = per_seq;
    a.num_blocks = nb;
    a.block_size = bs;
    a.seq_lens = lens;
  } else {
    a.k_stride_b = a.v_stride_b = int64_t(c.hkv) * c.n * D;
    a.k_stride_h = a.v_stride_h = int64_t(c.n) * D;
    a.k_stride_n = a.v_stride_n = D;
    a.seq_len_k = c.n;
  }
  a.num_splits = c.splits > 0 ? c.splits
                              : decode_attention_num_splits(c.batch, c.hkv, kHq / c.hkv, c.n, D, DType::kFloat16,
                                                            c.paged, 1);
  float* ws = nullptr;
  const int64_t wsf = decode_attention_workspace_floats(c.batch, kHq, 1, D, a.num_splits);
  if (wsf > 0) {
    CK(cudaMalloc(&ws, wsf * 4));
    CK(decode_workspace_init(ws, wsf, nullptr));  // counters at rest (decode.h)
    a.workspace = ws;
    a.workspace_floats = wsf;
  }
  Problem pr{c.batch, c.hkv, c.n, 1, c.paged ? "ours paged" : "ours contiguous"};
  char label[96];
  std::snprintf(label, sizeof label, "B%d N%d Hkv%d splits %d var %d bs %d", c.batch, c.n, c.hkv, a.num_splits,
                c.variant, c.paged ? c.block_size : 0);
  // Block stamps are not written by our kernels: the spread columns read the last pattern's.
  setenv("CLO_DECODE_PDL", "0", 1);
#ifdef CLO_DEV_STAMPS
  unsigned long long* ds = nullptr;
  // Slots for every block of the grid: 16-row blocks of 32-row units (two per unit) and a
  // balanced grid of one block per SM included.
  const int nblk = 2 * c.batch * c.hkv * std::max(a.num_splits, 1) + g_sms;
  constexpr int kS = cuda_llm_ops::decode::kDecodeDevStamps;
  CK(cudaMalloc(&ds, nblk * kS * 8));
  CK(cudaMemset(ds, 0, nblk * kS * 8));
  cuda_llm_ops::decode::decode_dev_set_stamps(ds);
#endif
  time_it(label, pr, [&] { CK(launch_decode_attention(a, 0)); }, stamps, iters);
  CK(cudaDeviceSynchronize());
#ifdef CLO_DEV_STAMPS
  {  // the last single launch's per-block timeline (TMA kernel only), us from the first block's entry
    std::vector<unsigned long long> raw(nblk * kS);
    CK(cudaMemcpy(raw.data(), ds, raw.size() * 8, cudaMemcpyDeviceToHost));
    const std::vector<double> h = stamps_ns(raw.data(), nblk, first_stamp(raw.data(), nblk) - 1);
    double t0 = 1e300, tend = 0;
    for (int i = 0; i < nblk; ++i) if (h[kS * i]) { t0 = std::min(t0, h[kS * i]); tend = std::max(tend, h[kS * i + 4]); }
    const char* names[kS] = {"start (after the PDL wait)", "first issue", "tile0 landed", "loop done", "end",
                             "len+table in regs", "after start-up barrier", "last tile landed", "", "",
                             "epilogue barrier 1", "epilogue barrier 2", "last QK", "last softmax", "last PV",
                             "out index / partials", "out merge / counted", "out store / merged",
                             "merge batch 1 folded", "merge folded"};
    std::printf("   stamps (%d blocks, span %.2f us):", nblk, (tend - t0) / 1e3);
    {  // SMs holding two or more of the blocks, and those blocks' start / end
      std::vector<int> per_sm_count(1024, 0);
      for (int i = 0; i < nblk; ++i) if (raw[kS * i + 20]) ++per_sm_count[int(raw[kS * i + 20] - 1) & 1023];
      int shared = 0;
      for (int c : per_sm_count) shared += c > 1;
      std::printf(" SMs holding 2+ blocks: %d;", shared);
      for (int i = 0; i < nblk && shared; ++i) {
        if (!raw[kS * i + 20] || per_sm_count[int(raw[kS * i + 20] - 1) & 1023] < 2) continue;
        std::printf(" [sm %d blk %d %.2f-%.2f]", int(raw[kS * i + 20] - 1), i, (h[kS * i] - t0) / 1e3,
                    (h[kS * i + 4] - t0) / 1e3);
      }
    }
    for (int k = 0; k < kS; ++k) {
      if (k == 8 || k == 9 || k == 20) continue;
      std::vector<double> v;
      for (int i = 0; i < nblk; ++i) if (h[kS * i + k]) v.push_back((h[kS * i + k] - t0) / 1e3);
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      std::printf(" | %s min/med/max %.2f/%.2f/%.2f", names[k], v.front(), v[v.size() / 2], v.back());
    }
    std::printf("\n");
    cuda_llm_ops::decode::decode_dev_set_stamps(nullptr);
    cudaFree(ds);
  }
#endif
  // As `llm-speed bench` times it: one CUDA graph of back-to-back calls over rotated
  // K/V copies (cold L2 without a flush), per-call time = replay / calls; PDL off / on.
  const int64_t set_elems = int64_t(c.batch) * c.hkv * c.n * D;
  const int sets = int(std::min<int64_t>(4, max_elems_global / set_elems));
  const int calls = sets > 1 ? 3 * sets : 4;
  const double bytes = 2.0 * set_elems * 2;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (int pdl = 0; pdl < 2; ++pdl) {
    setenv("CLO_DECODE_PDL", pdl ? "1" : "0", 1);
    cudaGraph_t g;
    cudaGraphExec_t ge;
#ifdef CLO_DEV_STAMPS
    // One stamp region per captured call (the pointer is read at launch, i.e. capture).
    unsigned long long* gs = nullptr;
    CK(cudaMalloc(&gs, size_t(calls) * nblk * kS * 8));
    CK(cudaMemset(gs, 0, size_t(calls) * nblk * kS * 8));
#endif
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) {
      DecodeAttentionArgs ai = a;
      ai.k = k + (i % sets) * set_elems;
      ai.v = v + (i % sets) * set_elems;
#ifdef CLO_DEV_STAMPS
      cuda_llm_ops::decode::decode_dev_set_stamps(gs + size_t(i) * nblk * kS);
#endif
      CK(launch_decode_attention(ai, st));
    }
#ifdef CLO_DEV_STAMPS
    cuda_llm_ops::decode::decode_dev_set_stamps(nullptr);
#endif
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    const double med = graph_us_per_call(ge, st, iters, calls);
    std::printf("%-22s %-34s %8.1f us %6.3f TB/s   (graph of %d calls over %d sets, PDL %s)\n", pr.name, label, med,
                bytes / (med * 1e-6) / 1e12, calls, sets, pdl ? "on" : "off");
#ifdef CLO_DEV_STAMPS
    {  // the last replay's per-call timeline (TMA kernel only): medians over calls, us
      std::vector<unsigned long long> raw(size_t(calls) * nblk * kS);
      CK(cudaMemcpy(raw.data(), gs, raw.size() * 8, cudaMemcpyDeviceToHost));
      const unsigned long long base = first_stamp(raw.data(), calls * nblk) - 1;
      std::vector<double> gap, issue, land, last_land, loop_med, loop_spread, epi, tail, end_spread, body, len_in, synced,
          epi1, epi2, epi3, m1, m2, m3, o1, o2, o3, mload, mfold;
      double prev_end = 0;
      for (int i = 0; i < calls; ++i) {
        const std::vector<double> h = stamps_ns(raw.data() + size_t(i) * nblk * kS, nblk, base);
        const double* c = h.data();
        if (c[0] == 0) continue;
        double s0 = 1e300, e1 = 0;
        std::vector<double> iss, lan, lal, lo, en, li, sy, tl, e1v, e2v, e3v, m1v, m2v, m3v, o1v, o2v, o3v, ml, mf;
        for (int b = 0; b < nblk; ++b) {
          if (c[kS * b] == 0) continue;  // a block that did not run (or an unused slot)
          s0 = std::min(s0, c[kS * b]);
          e1 = std::max(e1, c[kS * b + 4]);
        }
        auto rel = [&](int b, int k, std::vector<double>& v) { if (c[kS * b + k]) v.push_back((c[kS * b + k] - s0) / 1e3); };
        for (int b = 0; b < nblk; ++b) {
          rel(b, 1, iss); rel(b, 2, lan); rel(b, 7, lal); rel(b, 5, li); rel(b, 6, sy); rel(b, 3, lo); rel(b, 4, en);
          if (c[kS * b + 7]) tl.push_back((c[kS * b + 4] - c[kS * b + 7]) / 1e3);
          if (c[kS * b + 12] && c[kS * b + 14]) {  // the last tile's math: QK^T, softmax, PV
            m1v.push_back((c[kS * b + 12] - c[kS * b + 7]) / 1e3);
            m2v.push_back((c[kS * b + 13] - c[kS * b + 12]) / 1e3);
            m3v.push_back((c[kS * b + 14] - c[kS * b + 13]) / 1e3);
          }
          if (c[kS * b + 17] && c[kS * b + 18] && c[kS * b + 19]) {  // the split merger: first batch, rest
            ml.push_back((c[kS * b + 18] - c[kS * b + 16]) / 1e3);
            mf.push_back((c[kS * b + 19] - c[kS * b + 18]) / 1e3);
          }
          if (c[kS * b + 15] && c[kS * b + 17]) {  // the 1-split output: index math, warp merge, store
            o1v.push_back((c[kS * b + 15] - c[kS * b + 11]) / 1e3);
            o2v.push_back((c[kS * b + 16] - c[kS * b + 15]) / 1e3);
            o3v.push_back((c[kS * b + 17] - c[kS * b + 16]) / 1e3);
          }
          if (c[kS * b + 10] && c[kS * b + 11]) {  // the epilogue: first barrier, second barrier, rest
            e1v.push_back((c[kS * b + 10] - c[kS * b + 3]) / 1e3);
            e2v.push_back((c[kS * b + 11] - c[kS * b + 10]) / 1e3);
            e3v.push_back((c[kS * b + 4] - c[kS * b + 11]) / 1e3);
          }
        }
        if (i > 0 && prev_end > 0) gap.push_back((s0 - prev_end) / 1e3);
        prev_end = e1;
        issue.push_back(median_of(iss));
        len_in.push_back(median_of(li));
        synced.push_back(median_of(sy));
        land.push_back(median_of(lan));
        last_land.push_back(median_of(lal));
        loop_med.push_back(median_of(lo));
        tail.push_back(median_of(tl));
        epi1.push_back(median_of(e1v));
        epi2.push_back(median_of(e2v));
        epi3.push_back(median_of(e3v));
        m1.push_back(median_of(m1v));
        m2.push_back(median_of(m2v));
        m3.push_back(median_of(m3v));
        o1.push_back(median_of(o1v));
        o2.push_back(median_of(o2v));
        o3.push_back(median_of(o3v));
        mload.push_back(median_of(ml));
        mfold.push_back(median_of(mf));
        std::sort(lo.begin(), lo.end());
        loop_spread.push_back(lo.back() - lo.front());
        std::sort(en.begin(), en.end());
        epi.push_back(en[en.size() / 2] - lo[lo.size() / 2]);
        end_spread.push_back(en.back() - en[en.size() / 2]);
        body.push_back(en.back());
      }
      std::printf("   per call (medians, us from the first post-wait start): len+table %.2f, barrier %.2f, first issue "
                  "%.2f, tile0 landed %.2f, last tile landed %.2f, loop done %.2f (spread %.2f), epilogue %.2f, "
                  "last tile -> end %.2f, last end %.2f (+%.2f over median end), gap to next %.2f; epilogue parts %.2f %.2f %.2f; last tile QK %.2f softmax %.2f PV %.2f; 1-split output index / merge / store, or the last split block partials / count / merge: %.2f %.2f %.2f (merge: first batch %.2f, rest %.2f)\n",
                  median_of(len_in), median_of(synced), median_of(issue), median_of(land), median_of(last_land),
                  median_of(loop_med), median_of(loop_spread), median_of(epi), median_of(tail), median_of(body),
                  median_of(end_spread), median_of(gap), median_of(epi1), median_of(epi2), median_of(epi3), median_of(m1),
                  median_of(m2), median_of(m3), median_of(o1), median_of(o2), median_of(o3), median_of(mload),
                  median_of(mfold));
    }
    CK(cudaFree(gs));
#endif
    std::fflush(stdout);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  CK(cudaStreamDestroy(st));
  cudaFree(q);
  cudaFree(out);
  if (table) cudaFree(table);
  if (lens) cudaFree(lens);
  if (ws) cudaFree(ws);
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 15;
  // c: patterns on constant data, r: on random, o: ours, s: ours on 128-block grids, b: balance,
  // g: plain streams in graphs, k: clock resolution, h: the H200's ceiling patterns
  // x: B=17/1K (136 units on 132 SMs): streams, even shares and ours
  // w: ours at 4, 16 and 32 query rows per KV head on the same bytes and grid (stop 70)
  // n: the H200's paged layout at the 128-B hint: heads per block, against contiguous
  // r: ours on the bench's grids around the plane-box rule (one block per SM and beyond)
  // m: one-token MQA on the two-row-tile balanced schedule, paged and contiguous (stop 84)
  // l: one-token MQA at half a 32-row unit per SM: 16-row blocks, 1 split, balanced (stop 105)
  const char* sections = argc > 2 ? argv[2] : "cro";
  auto has = [&](char ch) { return std::strchr(sections, ch) != nullptr; };
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, g_sms, prop.l2CacheSize >> 20);
  g_flush_n = (256ll << 20) / 16;
  CK(cudaMalloc(&g_flush, g_flush_n * 16));
  CK(cudaMemset(g_flush, 1, g_flush_n * 16));
  CK(cudaMalloc(&g_sink, 4096 * 4));
  const int64_t max_elems = 64ll * 32 * 4096 * kD;  // B=64, H=32, N=4096
  max_elems_global = max_elems;
  setenv("CLO_DECODE_PDL", "0", 1);  // dev knobs are read per call only when set at the first call
  setenv("CLO_DECODE_VARIANT", "0", 1);
  setenv("CLO_DECODE_MERGE_APART", "2", 1);  // automatic (section w switches it)
  setenv("CLO_DECODE_SPREAD", "2", 1);  // automatic (decode_internal.h); section x forces it on and off
  setenv("CLO_DECODE_WIDE_ROWS", "2", 1);  // automatic; section l forces it
  __half *k = nullptr, *v = nullptr;
  CK(cudaMalloc(&k, max_elems * 2));
  CK(cudaMalloc(&v, max_elems * 2));
  unsigned long long* stamps = nullptr;
  CK(cudaMalloc(&stamps, kStampSlots * sizeof(unsigned long long)));

  // Copy ceiling (read + write of 2 x 1 GB), as the notes' % copy figures use.
  {
    const size_t n = 1ull << 30;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ts;
    for (int it = 0; it < 7; ++it) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(v, k, n, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    std::printf("copy 1 GB: %.3f TB/s (read + write)\n", 2.0 * n / (ts[3] * 1e-3) / 1e12);
  }

  const Problem problems[] = {
      {16, 8, 1024, 1, "B16 N1K H8 (128 blk)"},
      {16, 8, 4096, 1, "B16 N4K H8 (128 blk)"},
      {64, 32, 4096, 1, "B64 N4K H32 (2048)"},
  };
  auto patterns = [&](const char* data) {
    std::printf("-- stream patterns, %s data\n", data);
    for (const Problem& pr : problems) {
      Args a{k, v, pr.heads, pr.n, pr.n / pr.splits, pr.splits, g_sink, stamps};
      const bool large = pr.batch * pr.heads * pr.splits > 2 * g_sms;
      run_smem<64, 2, 3, 256>(pr, a, stamps, large ? 2 : 1, iters);  // the cp.async kernel's pattern
      run_smem<64, 2, 3, 256, false, true>(pr, a, stamps, large ? 2 : 1, iters);  // ... into 272-byte rows (v6)
      run_smem<64, 2, 2, 256>(pr, a, stamps, large ? 2 : 1, iters);
      run_smem<64, 2, 2, 256, false, true>(pr, a, stamps, large ? 2 : 1, iters);
      run_smem<128, 2, 2, 256>(pr, a, stamps, large ? 2 : 1, iters);
      run_smem<64, 2, 4, 256>(pr, a, stamps, large ? 2 : 1, iters);
      run_smem<64, 2, 3, 257>(pr, a, stamps, large ? 2 : 1, iters);  // zero-fill form
      run_smem<64, 2, 3, 256, true>(pr, a, stamps, large ? 2 : 1, iters);  // K/V copies interleaved per thread
    }
  };
  if (has('c')) {
    CK(cudaMemset(k, 0x3c, max_elems * 2));
    CK(cudaMemset(v, 0x3b, max_elems * 2));
    patterns("constant");
  }
  fill_random<<<g_sms * 8, 512>>>(k, max_elems, 1u);
  fill_random<<<g_sms * 8, 512>>>(v, max_elems, 2u);
  CK(cudaDeviceSynchronize());
  if (has('r')) patterns("random");
  if (has('n')) {  // one launch each, for ncu: the pure stream and ours at the large grid
    const Problem pr{64, 32, 4096, 1, "B64 N4K H32 (2048)"};
    Args a{k, v, pr.heads, pr.n, pr.n, 1, g_sink, stamps};
    auto kern = stream_smem<64, 2, 3, 256>;
    const int smem = (227 * 1024) / 2 - 2048;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kern<<<2048, kThreads, smem>>>(a);
    CK(cudaDeviceSynchronize());
    run_ours({64, 32, 4096, false, 1, 1}, k, v, stamps, 1);
  }
  if (has('b')) {  // balance probe (v9), random data
    std::printf("-- balance: one block per unit vs an even share per SM vs claimed chunks\n");
    int* counters = nullptr;
    CK(cudaMalloc(&counters, 4096 * 32 * 4));
    CK(cudaMemset(counters, 0, 4096 * 32 * 4));
    // B=1/16K/GQA in 16 splits is the same flat stream as B=16/1K/GQA (128 units of 1024 keys).
    const Problem bp[] = {{16, 8, 1024, 1, "B16 N1K H8"}, {16, 8, 4096, 1, "B16 N4K H8"}};
    for (const Problem& pr : bp) {
      Args a{k, v, pr.heads, pr.n, pr.n, 1, g_sink, stamps};
      run_balanced<0, 1, 3>(pr, a, stamps, iters, counters);
      run_balanced<0, 1, 4>(pr, a, stamps, iters, counters);
      run_balanced<1, 1, 3>(pr, a, stamps, iters, counters);
      run_balanced<1, 1, 4>(pr, a, stamps, iters, counters);
      run_balanced<2, 1, 3>(pr, a, stamps, iters, counters);
      run_balanced<2, 2, 3>(pr, a, stamps, iters, counters);
      run_balanced<2, 4, 3>(pr, a, stamps, iters, counters);
      run_balanced<2, 2, 4>(pr, a, stamps, iters, counters);
    }
    cudaFree(counters);
  }
  if (has('g')) {  // plain streams timed as the bench times (graph replays), random data
    std::printf("-- plain streams in graphs (bench timing), PDL off/on\n");
    const Problem g1{16, 8, 1024, 1, "B16 N1K H8 (128 blk)"}, g2{16, 8, 1024, 2, "B16 N1K H8 x2 (256)"},
        g4{16, 8, 4096, 1, "B16 N4K H8 (128 blk)"};
    run_smem_graph<64, 2, 3>(g1, k, v, stamps, 2, iters);
    run_smem_graph<64, 2, 3>(g1, k, v, stamps, 1, iters);
    run_smem_graph<64, 2, 4>(g1, k, v, stamps, 1, iters);
    run_smem_graph<64, 2, 6>(g1, k, v, stamps, 1, iters);
    run_smem_graph<64, 2, 3>(g2, k, v, stamps, 2, iters);
    run_smem_graph<64, 2, 3>(g4, k, v, stamps, 2, iters);
    // Paged: a shuffled table over the B * N / 16 blocks of one set (every set the same table).
    for (const Problem* pr : {&g1, &g4}) {
      int* table = shuffled_block_table(pr->batch * pr->n / 16);
      run_smem_graph<64, 2, 3, 1>(*pr, k, v, stamps, 2, iters, table);
      run_smem_graph<64, 2, 3, 1>(*pr, k, v, stamps, 1, iters, table);
      run_smem_graph<64, 2, 4, 1>(*pr, k, v, stamps, 1, iters, table);
      // The same bytes with 2, 4, 8 heads per block (8: whole paged blocks), 128 blocks.
      run_smem_graph<64, 2, 3, 2>(*pr, k, v, stamps, 2, iters, table);
      run_smem_graph<64, 2, 3, 4>(*pr, k, v, stamps, 2, iters, table);
      run_smem_graph<64, 2, 3, 8>(*pr, k, v, stamps, 2, iters, table);
      run_smem_graph<64, 2, 3, 8>(*pr, k, v, stamps, 1, iters, table);
      CK(cudaFree(table));
    }
  }
  if (has('k')) {
    constexpr int n = 64;
    std::vector<unsigned long long> h(2 * n);
    clock_probe<<<1, 1>>>(stamps, n);
    CK(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost));
    std::printf("clock64 / globaltimer deltas over successive reads:");
    for (int i = 1; i < 24; ++i) std::printf(" %llu/%llu", h[2 * i] - h[2 * i - 2], h[2 * i + 1] - h[2 * i - 1]);
    std::printf("\n  span: %llu cycles, %llu ns\n", h[2 * n - 2] - h[0], h[2 * n - 1] - h[1]);
  }
  if (has('h')) {  // the H200's ceiling patterns (NOTES.md, "H200"): L2 hints, K/V order, depth, registers
    std::printf("-- H200 ceiling patterns, random data\n");
    const Problem hp[] = {{64, 32, 4096, 1, "B64 N4K H32 (2048)"}, {16, 8, 4096, 1, "B16 N4K H8 (128 blk)"}};
    for (const Problem& pr : hp) {
      Args a{k, v, pr.heads, pr.n, pr.n, 1, g_sink, stamps};
      const int per_sm = pr.batch * pr.heads > 2 * g_sms ? 2 : 1;
      run_smem<64, 2, 3, 256>(pr, a, stamps, per_sm, iters);  // the cp.async kernel's pattern
      run_smem<64, 2, 3, 128>(pr, a, stamps, per_sm, iters);
      run_smem<64, 2, 3, 0>(pr, a, stamps, per_sm, iters);
      run_smem<64, 1, 4, 256>(pr, a, stamps, per_sm, iters);  // K and V chunks alternate
      run_smem<128, 1, 3, 256>(pr, a, stamps, per_sm, iters);  // 32-KB chunks, K then V (cuDNN's tile)
      run_smem<128, 1, 3, 0>(pr, a, stamps, per_sm, iters);
      run_smem<64, 2, 2, 256>(pr, a, stamps, 3, iters);
      run_smem<32, 2, 6, 256>(pr, a, stamps, per_sm, iters);
      run_regs<8>(pr, a, stamps, iters);
      run_regs<16>(pr, a, stamps, iters);
      run_regs<32>(pr, a, stamps, iters);
    }
  }
  if (has('n')) {  // the H200's paged layout (stop 64): one KV head's 256-B rows at an H x 256-B stride
    // against G heads per block (G x 256-B runs; 8 = whole paged blocks) and the contiguous
    // cache, at the 128-B hint the H200's decode maps take (NOTES.md "L2 promotion on the H200")
    std::printf("-- H200 paged layout: heads per block, 128-B hint, random data\n");
    const Problem np[] = {{16, 8, 4096, 1, "B16 N4K H8 (128 blk)"}, {46, 8, 8192, 1, "B46 N8K H8 (368 blk)"},
                          {64, 32, 1024, 1, "B64 N1K H32 (2048)"}, {64, 8, 4096, 1, "B64 N4K H8 (512 blk)"}};
    for (const Problem& pr : np) {
      const int per_sm = pr.batch * pr.heads > g_sms ? 2 : 1;
      run_smem_graph<64, 2, 3, 0, 128>(pr, k, v, stamps, per_sm, iters);
      int* table = shuffled_block_table(pr.batch * pr.n / 16);
      run_smem_graph<64, 2, 3, 1, 128>(pr, k, v, stamps, per_sm, iters, table);
      run_smem_graph<64, 2, 3, 1, 256>(pr, k, v, stamps, per_sm, iters, table);
      run_smem_graph<64, 2, 3, 2, 128>(pr, k, v, stamps, per_sm, iters, table);
      run_smem_graph<64, 2, 3, 4, 128>(pr, k, v, stamps, per_sm, iters, table);
      run_smem_graph<64, 2, 3, 8, 128>(pr, k, v, stamps, per_sm, iters, table);
      CK(cudaFree(table));
    }
  }
  if (has('x')) {  // B=17/1K/GQA (136 units on 132 SMs): plain streams, even shares, ours
    std::printf("-- B=17/1K: 136 units\n");
    const Problem x17{17, 8, 1024, 1, "B17 N1K H8 (136 blk)"}, x16{16, 8, 1024, 1, "B16 N1K H8 (128 blk)"};
    run_smem_graph<64, 2, 3>(x17, k, v, stamps, 1, iters);
    run_smem_graph<64, 2, 3>(x17, k, v, stamps, 2, iters);
    run_smem_graph<64, 2, 4>(x17, k, v, stamps, 1, iters);
    int* table = shuffled_block_table(x17.batch * x17.n / 16);
    run_smem_graph<64, 2, 3, 1>(x17, k, v, stamps, 1, iters, table);
    run_smem_graph<64, 2, 3, 1>(x17, k, v, stamps, 2, iters, table);
    run_smem_graph<64, 2, 4, 1>(x17, k, v, stamps, 1, iters, table);
    CK(cudaFree(table));
    int* counters = nullptr;
    CK(cudaMalloc(&counters, 4096 * 32 * 4));
    CK(cudaMemset(counters, 0, 4096 * 32 * 4));
    for (const Problem* pr : {&x16, &x17}) {
      Args a{k, v, pr->heads, pr->n, pr->n, 1, g_sink, stamps};
      run_balanced<0, 1, 3>(*pr, a, stamps, iters, counters);
      run_balanced<1, 1, 3>(*pr, a, stamps, iters, counters);
      run_balanced<1, 1, 4>(*pr, a, stamps, iters, counters);
      run_balanced<2, 1, 4>(*pr, a, stamps, iters, counters);
    }
    cudaFree(counters);
    run_ours({16, 8, 1024, true, 0, 0}, k, v, stamps, iters);
    // Unsplit, then the spread tail (132 whole units, the other 4 in 16 / 8 / 4 pieces beside them).
    setenv("CLO_DECODE_SPREAD", "0", 1);
    for (int sp : {1, 8}) run_ours({17, 8, 1024, true, sp, 0}, k, v, stamps, iters);
    run_ours({20, 8, 1024, true, 1, 0}, k, v, stamps, iters);
    setenv("CLO_DECODE_SPREAD", "1", 1);
    for (int sp : {16, 8, 4}) run_ours({17, 8, 1024, true, sp, 0}, k, v, stamps, iters);
    for (int sp : {16, 8}) run_ours({17, 8, 1024, false, sp, 0}, k, v, stamps, iters);
    run_ours({20, 8, 1024, true, 4, 0}, k, v, stamps, iters);
    setenv("CLO_DECODE_SPREAD", "2", 1);
  }
  if (has('s')) {  // ours on the two 128-block grids only
    run_ours({16, 8, 1024, true, 0, 0}, k, v, stamps, iters);
    run_ours({1, 8, 16384, true, 0, 0}, k, v, stamps, iters);
  }
  if (has('w')) {  // stop 70: rows per KV head at equal bytes and grid (8 units x 16 splits of 1024 keys)
    std::printf("-- ours (raw launcher), random data: 4 / 16 / 32 rows per KV head, the same K/V bytes\n");
    const OursCase cases[] = {{1, 8, 16384, true, 0, 0}, {4, 2, 16384, true, 0, 0}, {8, 1, 16384, true, 0, 0},
                              {1, 8, 16384, false, 0, 0}, {4, 2, 16384, false, 0, 0}, {8, 1, 16384, false, 0, 0}};
    for (const char* apart : {"0", "1"}) {  // the last split block merges, then a merge kernel
      setenv("CLO_DECODE_MERGE_APART", apart, 1);
      std::printf("-- CLO_DECODE_MERGE_APART=%s\n", apart);
      for (const OursCase& c : cases) run_ours(c, k, v, stamps, iters);
    }
    setenv("CLO_DECODE_MERGE_APART", "2", 1);
  }
  if (has('r')) {  // stop 64: the bench's grids around the plane-box rule, for builds of two trees (SRC_ROOT)
    std::printf("-- ours (raw launcher), random data: one block per SM and beyond\n");
    const OursCase cases[] = {{16, 8, 16384, true, 0, 0}, {16, 8, 1024, true, 0, 0}, {1, 8, 16384, true, 0, 0},
                              {46, 8, 8192, true, 0, 0},  {64, 32, 1024, true, 0, 0}, {64, 8, 4096, true, 0, 0}};
    for (const OursCase& c : cases) run_ours(c, k, v, stamps, iters);
  }
  if (has('m')) {  // stop 84: one-token MQA on the two-row-tile balanced schedule, paged against contiguous
    std::printf("-- ours (raw launcher), random data: MQA balanced rows, paged / contiguous\n");
    const OursCase cases[] = {{136, 1, 2048, true, 0, 0}, {136, 1, 2048, true, 0, 0, 64},
                              {136, 1, 2048, false, 0, 0}, {150, 1, 4096, true, 0, 0},
                              {150, 1, 4096, true, 0, 0, 64}, {150, 1, 4096, false, 0, 0}};
    for (const OursCase& c : cases) run_ours(c, k, v, stamps, iters);
  }
  if (has('l')) {  // stop 105: one-token MQA below one 32-row unit per SM (16-row, 1 split, balanced)
    std::printf("-- ours (raw launcher), random data: MQA at 0.5-0.53 units per SM; GQA 128-block baseline\n");
    struct LowBandCase {
      OursCase c;
      const char* wide_rows;  // CLO_DECODE_WIDE_ROWS: 2 auto, 1 two-row tiles at the count, 3 balanced
    };
    const LowBandCase cases[] = {{{16, 8, 4096, true, 0, 0}, "2"},  {{66, 1, 4096, true, 0, 0}, "2"},
                                 {{66, 1, 4096, true, 2, 0}, "3"},  {{70, 1, 4096, true, 0, 0}, "2"},
                                 {{70, 1, 4096, true, 1, 0}, "1"},  {{70, 1, 16384, true, 0, 0}, "2"},
                                 {{70, 1, 4096, false, 2, 0}, "3"}, {{70, 1, 2048, true, 2, 0}, "3"}};
    for (const LowBandCase& lc : cases) {
      setenv("CLO_DECODE_WIDE_ROWS", lc.wide_rows, 1);
      std::printf("-- CLO_DECODE_WIDE_ROWS=%s\n", lc.wide_rows);
      run_ours(lc.c, k, v, stamps, iters);
    }
    setenv("CLO_DECODE_WIDE_ROWS", "2", 1);
  }
  if (has('o')) {
    std::printf("-- ours (raw launcher), random data\n");
    const OursCase cases[] = {
        {16, 8, 1024, true, 0, 0},   {16, 8, 1024, true, 0, 1},   {16, 8, 1024, false, 0, 1},
        {16, 8, 1024, false, 0, 2},  {16, 8, 4096, true, 0, 0},   {16, 8, 4096, false, 0, 1},
        {16, 8, 4096, false, 0, 2},  {1, 8, 16384, true, 0, 0},   {1, 8, 16384, false, 0, 1},
        {1, 8, 16384, false, 0, 2},  {64, 32, 4096, false, 0, 1}, {64, 32, 4096, false, 1, 1},
        {64, 32, 4096, true, 0, 1},  {64, 32, 4096, true, 1, 1},  {64, 32, 4096, true, 1, 2},
        {16, 32, 1024, true, 0, 0},  {16, 32, 1024, false, 0, 0}, {1, 32, 16384, true, 0, 0},
        {16, 8, 16384, true, 0, 0},  {4, 8, 4096, true, 0, 0},
    };
    for (const OursCase& c : cases) run_ours(c, k, v, stamps, iters);
  }
  std::printf("done\n");
  return 0;
}
