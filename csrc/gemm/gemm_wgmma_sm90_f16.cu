// fp16 instantiations of the Hopper wgmma/TMA GEMM (see gemm_wgmma_sm90.cuh).
#include "gemm/gemm_wgmma_sm90.cuh"

namespace cuda_llm_ops::gemm {
cudaError_t launch_gemm_wgmma_f16(const GemmProblem& p, const WgmmaSchedule& sch, cudaStream_t stream) {
  return launch_wgmma_typed<__half>(p, sch, stream);
}
}  // namespace cuda_llm_ops::gemm
