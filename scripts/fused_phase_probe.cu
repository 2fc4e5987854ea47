// Dev probe (csrc/fused/NOTES.md): where the fused decode block's time goes. Runs the real
// kernel (csrc/fused/fused_decode_block.cu built with CLO_DEV_STAMPS) at Llama-2-7B shapes
// with a cold L2 (a 256 MB memset before every launch) and reads each block's %globaltimer
// stamps: entry, projection done, cluster barrier 1, attention done, cluster barrier 2,
// output projection done (warp 0), exit. Prints, per phase boundary, the min / median / max
// over blocks of (stamp - the earliest entry), medians over the timed launches, next to the
// kernel's event time (stamps off) and the memory floor; and how many SMs hold two of its
// blocks (the kernel allows two per SM for the cluster scheduler's sake) and those blocks'
// phase ends against the others'. Without -DCLO_DEV_STAMPS: the event times only (the kernel
// as the extension builds it).
//
// Build (one line; the flags as the extension's): nvcc -std=c++20 -O3 --expt-relaxed-constexpr
//   -DCLO_DEV_STAMPS -I csrc/include -I csrc -gencode=arch=compute_90a,code=sm_90a
//   scripts/fused_phase_probe.cu csrc/fused/fused_decode_block.cu -o /tmp/fused_probe
// Run: /tmp/fused_probe [BxN ...]; PROBE_CLUSTER=2 for another cluster size than the default
// (4). CLO_FUSED_CLUSTER must stay unset: the launcher would take it over PROBE_CLUSTER.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fused/fused_decode_block.h"
#include "probe_util.cuh"

using namespace cuda_llm_ops;
using fused::FusedDecodeBlockProblem;

static __half* random_half(size_t n, float scale, unsigned seed) {
  __half* p = nullptr;
  CK(cudaMalloc(&p, n * sizeof(__half)));
  fill_random<<<1024, 256>>>(p, static_cast<int64_t>(n), seed, scale);
  CK(cudaGetLastError());
  return p;
}

int main(int argc, char** argv) {
  std::vector<std::pair<int, int>> shapes;
  for (int i = 1; i < argc; ++i) {
    int b = 0, n = 0;
    if (std::sscanf(argv[i], "%dx%d", &b, &n) == 2) shapes.push_back({b, n});
  }
  if (shapes.empty()) shapes = {{1, 1024}, {1, 4096}, {1, 16384}, {16, 1024}, {16, 4096}};
  constexpr int kHidden = 4096, kHeads = 32, kD = 128, kBlock = 16, kIters = 15;
  const size_t flush_bytes = size_t(256) << 20;
  void* flush = nullptr;
  CK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::mt19937 rng(7);
  const int cluster = std::getenv("PROBE_CLUSTER") ? std::atoi(std::getenv("PROBE_CLUSTER")) : 0;  // 0: default
  if (std::getenv("CLO_FUSED_CLUSTER") != nullptr) {  // the stamps would be sized for another grid
    std::fprintf(stderr, "unset CLO_FUSED_CLUSTER; PROBE_CLUSTER picks the cluster size here\n");
    return 1;
  }
  std::printf("cluster size %d (0: the launcher's default)\n", cluster);
  for (auto [B, N] : shapes) {
    const int max_blocks = (N + kBlock - 1) / kBlock;
    const int64_t num_blocks = int64_t(B) * max_blocks + 7;
    __half* x = random_half(size_t(B) * kHidden, 1.f, 1);
    __half* w_qkv = random_half(size_t(3) * kHeads * kD * kHidden, 0.02f, 2);
    __half* w_o = random_half(size_t(kHidden) * kHeads * kD, 0.02f, 3);
    __half* kc = random_half(size_t(num_blocks) * kBlock * kHeads * kD, 1.f, 4);
    __half* vc = random_half(size_t(num_blocks) * kBlock * kHeads * kD, 1.f, 5);
    __half* cs = random_half(size_t(B) * kD, 1.f, 6);
    __half* sn = random_half(size_t(B) * kD, 1.f, 7);
    __half* out = nullptr;
    CK(cudaMalloc(&out, size_t(B) * kHidden * sizeof(__half)));
    std::vector<int> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // physical blocks scattered, as in a serving pool
    std::vector<int> table(size_t(B) * max_blocks), lens(B, N);
    for (size_t i = 0; i < table.size(); ++i) table[i] = perm[i];
    int *d_table = nullptr, *d_lens = nullptr;
    CK(cudaMalloc(&d_table, table.size() * sizeof(int)));
    CK(cudaMalloc(&d_lens, B * sizeof(int)));
    CK(cudaMemcpy(d_table, table.data(), table.size() * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_lens, lens.data(), B * sizeof(int), cudaMemcpyHostToDevice));
    void* ws = nullptr;
    const size_t ws_bytes = fused::fused_decode_block_workspace_bytes(kHidden);
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaMemset(ws, 0, ws_bytes));

    FusedDecodeBlockProblem p{};
    p.x = x; p.w_qkv = w_qkv; p.w_o = w_o; p.k_cache = kc; p.v_cache = vc;
    p.block_tables = d_table; p.seq_lens = d_lens; p.cos = cs; p.sin = sn; p.out = out; p.workspace = ws;
    p.batch = B; p.hidden = kHidden; p.heads = kHeads; p.block_size = kBlock; p.max_blocks = max_blocks;
    p.num_blocks = num_blocks; p.scale = 1.f / std::sqrt(float(kD)); p.dtype = DType::kFloat16;

    // Event time, no stamps.
    std::vector<double> event_us;
    for (int it = 0; it < kIters + 2; ++it) {
      CK(cudaMemsetAsync(flush, it & 0xff, flush_bytes));
      CK(cudaEventRecord(e0));
      CK(fused::launch_fused_decode_block(p, cluster, 0));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (it >= 2) event_us.push_back(ms * 1e3);
    }
    const double kv_mb = 2.0 * B * double(N - 1) * kHeads * kD * 2 / 1e6;
    const double bytes = 2.0 * (3.0 * kHeads * kD * kHidden + double(kHidden) * kHeads * kD) + kv_mb * 1e6;  // + x, out: ~0
    std::printf("B=%d N=%d: kernel %.1f us (events, cold L2, median of %d); floor %.1f us (%.0f MB at 3.0 TB/s; "
                "w_qkv 100.7 MB, w_o 33.6 MB, KV %.1f MB)\n",
                B, N, median_of(event_us), kIters, bytes / 3.0e12 * 1e6, bytes / 1e6, kv_mb);
#ifdef CLO_DEV_STAMPS
    // Stamped launches.
    const char* names[] = {"entry", "proj done", "cluster 1", "attn done", "cluster 2", "o-proj done", "exit"};
    const int grid_blocks = (cluster == 0 ? 4 : cluster) * kHeads;  // one batch group
    unsigned long long* d_stamps = nullptr;
    CK(cudaMalloc(&d_stamps, size_t(grid_blocks) * fused::kFusedDevStamps * sizeof(unsigned long long)));
    p.dev_stamps = d_stamps;
    const int kS = fused::kFusedDevStamps, kTimes = 7;
    std::vector<std::vector<double>> lo(kTimes), mid(kTimes), hi(kTimes), shared_mid(kTimes), alone_mid(kTimes);
    std::vector<double> shared_sms;
    std::vector<unsigned long long> h(size_t(grid_blocks) * kS);
    for (int it = 0; it < kIters + 2; ++it) {
      CK(cudaMemsetAsync(flush, it & 0xff, flush_bytes));
      CK(cudaMemsetAsync(d_stamps, 0, h.size() * sizeof(unsigned long long)));
      CK(fused::launch_fused_decode_block(p, cluster, 0));
      CK(cudaDeviceSynchronize());
      if (it < 2) continue;
      CK(cudaMemcpy(h.data(), d_stamps, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      unsigned long long t0 = ~0ull;
      for (int b = 0; b < grid_blocks; ++b) t0 = std::min(t0, h[size_t(b) * kS]);
      std::vector<int> per_sm(1024, 0);
      for (int b = 0; b < grid_blocks; ++b) ++per_sm[h[size_t(b) * kS + 7] % 1024];
      shared_sms.push_back(std::count_if(per_sm.begin(), per_sm.end(), [](int c) { return c > 1; }));
      for (int s = 0; s < kTimes; ++s) {
        std::vector<double> v(grid_blocks), vs, va;
        for (int b = 0; b < grid_blocks; ++b) {
          v[b] = (h[size_t(b) * kS + s] - t0) * 1e-3;
          (per_sm[h[size_t(b) * kS + 7] % 1024] > 1 ? vs : va).push_back(v[b]);
        }
        std::sort(v.begin(), v.end());
        lo[s].push_back(v.front());
        mid[s].push_back(v[v.size() / 2]);
        hi[s].push_back(v.back());
        shared_mid[s].push_back(vs.empty() ? -1.0 : median_of(vs));
        alone_mid[s].push_back(va.empty() ? -1.0 : median_of(va));
      }
    }
    std::printf("  SMs holding two blocks: %.0f (median over launches). Columns: min / median / max over all blocks, "
                "then the median of blocks sharing an SM and of blocks alone (-1: none)\n",
                median_of(shared_sms));
    std::printf("  %-12s %8s %8s %8s %8s %8s   (us after the first block's entry; medians over launches)\n", "stamp",
                "min", "median", "max", "shared", "alone");
    for (int s = 0; s < kTimes; ++s) {
      std::printf("  %-12s %8.1f %8.1f %8.1f %8.1f %8.1f\n", names[s], median_of(lo[s]), median_of(mid[s]), median_of(hi[s]),
                  median_of(shared_mid[s]), median_of(alone_mid[s]));
    }
    CK(cudaFree(d_stamps));
#endif
    for (void* q : std::initializer_list<void*>{x, w_qkv, w_o, kc, vc, cs, sn, out, d_table, d_lens, ws}) {
      CK(cudaFree(q));
    }
  }
  return 0;
}
