// fp16 instantiations of the Hopper wgmma/TMA GEMM (see gemm_wgmma_sm90.cuh).
#include <cstdlib>

#include "gemm/gemm_wgmma_sm90.cuh"

namespace cuda_llm_ops::gemm {
// Every skinny kernel has the same block and shared memory, so one pair kernel's cluster
// occupancy answers for all (defined here, beside an instantiation of it).
long long skinny_pair_cta_slots() {
  static bool dev_pair = std::getenv("CLO_GEMM_SKINNY_PAIR") != nullptr;
  if (dev_knob("CLO_GEMM_SKINNY_PAIR", dev_pair, 1) == 0 || !wgmma_family_available()) return 0;
  static int slots[64] = {0};  // per device; -1: none fit
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev < 0 || dev >= 64) dev = 0;
  if (slots[dev] == 0) {
    using Cfg = SkinnyWgmmaConfig<64>;
    auto kernel = gemm_wgmma_sm90_kernel<__half, false, true, 64, skinny_wgmma_stages<64>(), 2, true>;
    const int clusters = set_dynamic_smem(kernel, Cfg::kSmemBytes) == cudaSuccess
                             ? cluster::max_active_clusters(kernel, 2, Cfg::kThreads, Cfg::kSmemBytes)
                             : 0;
    slots[dev] = clusters > 0 ? 2 * clusters : -1;
  }
  return slots[dev] > 0 ? slots[dev] : 0;
}

cudaError_t launch_gemm_wgmma_f16(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream) {
  return launch_wgmma_typed<__half>(p, sch, stream);
}
}  // namespace cuda_llm_ops::gemm
