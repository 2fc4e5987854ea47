// fp16 tensor-core GEMM instantiations (see gemm_mma_f16.cuh).
#include "gemm/gemm_mma_f16.cuh"

namespace cuda_llm_ops::gemm {
cudaError_t launch_gemm_f16(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  return launch_mma_f16<__half>(p, variant, stream);
}
}  // namespace cuda_llm_ops::gemm
