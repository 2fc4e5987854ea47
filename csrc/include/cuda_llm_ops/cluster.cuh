// Hopper (sm_90) thread-block clusters: the CTA's rank, the cluster-wide barrier,
// mbarrier arrivals on and stores into another CTA's shared memory (distributed shared
// memory), and the host side of a cluster launch.
//
// Every function compiles to nothing (or a neutral value) below sm_90, so a header
// that includes this one still builds for sm_80; callers guard their sm_90 paths.
#pragma once

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::cluster {

// This CTA's rank within its cluster (0 outside a cluster launch).
CLO_DEVICE uint32_t ctarank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

// Every thread of every CTA of the cluster arrives and waits: release of this
// thread's prior writes (shared::cluster included), acquire of the others'. Not the
// .aligned form, so a warp whose lanes reach it apart (a producer warp whose lane 0
// ran the copy loop alone) is still correct.
CLO_DEVICE void sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

// The shared::cluster address of `local` (a shared-memory object of this CTA) in the
// CTA of rank `rank`: the same offset in that CTA's shared memory.
CLO_DEVICE uint32_t map_shared(const void* local, uint32_t rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32addr(local)), "r"(rank));
  return remote;
#else
  return 0;
#endif
}

// One arrival on the mbarrier at the shared::cluster address `bar` (map_shared). The
// default .release.cta semantics: enough to order reads whose completion the caller
// has already waited for (wgmma.wait_group) before the owner's next wait completes.
// Release at cluster scope (.release.cluster) halved a GEMM's speed: it waits for the
// caller's outstanding memory operations.
CLO_DEVICE void mbarrier_arrive_remote(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// Stores to the shared::cluster address `addr` (map_shared): distributed shared memory
// writes into another CTA of the cluster. Visible to that CTA after a cluster sync().
CLO_DEVICE void store_remote(uint32_t addr, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
#endif
}
CLO_DEVICE void store_remote(uint32_t addr, float2 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(v.x), "f"(v.y) : "memory");
#endif
}

// Loads from the shared::cluster address `addr` (map_shared): another CTA's shared memory,
// written before a cluster sync() that this thread has passed.
CLO_DEVICE float2 load_remote_float2(uint32_t addr) {
  float2 v = make_float2(0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
#endif
  return v;
}
CLO_DEVICE float4 load_remote_float4(uint32_t addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
#endif
  return v;
}

// A launch of `grid` CTAs of `threads` in clusters of `cluster` CTAs (no cluster attribute
// for one), with programmatic dependent launch when `pdl` (common.cuh's launch_kernel: the
// kernel must call pdl_wait_primary before its first global access). `attr` holds the
// attributes (room for two) and must live until the launch.
inline cudaLaunchConfig_t launch_config(dim3 grid, unsigned threads, size_t smem_bytes, cudaStream_t stream,
                                        dim3 cluster, cudaLaunchAttribute* attr, bool pdl = false) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  if (cluster.x * cluster.y * cluster.z > 1) {
    cudaLaunchAttribute& a = attr[cfg.numAttrs++];
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = cluster.x;
    a.val.clusterDim.y = cluster.y;
    a.val.clusterDim.z = cluster.z;
  }
  if (pdl) attr[cfg.numAttrs++] = pdl_launch_attribute();
  return cfg;
}
// ... in clusters of `cluster_size` along x
inline cudaLaunchConfig_t launch_config(dim3 grid, unsigned threads, size_t smem_bytes, cudaStream_t stream,
                                        int cluster_size, cudaLaunchAttribute* attr, bool pdl = false) {
  return launch_config(grid, threads, smem_bytes, stream, dim3(cluster_size > 1 ? cluster_size : 1), attr, pdl);
}

// Clusters of `cluster_size` CTAs of this kernel (with this block size and dynamic shared
// memory) that fit on the device at once; 0 when the query fails, as it does for more than
// 48 KB of dynamic shared memory unless set_dynamic_smem (common.cuh) has raised the
// kernel's limit first.
template <typename Kernel>
inline int max_active_clusters(Kernel kernel, int cluster_size, int threads, size_t smem_bytes) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = launch_config(dim3(cluster_size), threads, smem_bytes, nullptr, cluster_size, &attr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  return n;
}

}  // namespace cuda_llm_ops::cluster
