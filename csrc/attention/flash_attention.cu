// Dispatch of flash attention: fp16/bf16 to the Hopper wgmma kernel where it
// applies (sm_90a image on a cc 9.0 device, D in (32, 256], TMA-describable
// layout), else to the mma.sync kernel of the smallest head-dim bucket that holds
// D (columns past D are zero-filled in shared memory and never stored); fp32 to
// the 3xTF32 tensor-core kernel (flash_attention_fp32.cu).
#include <cstdlib>

#include "attention/attention.h"

namespace cuda_llm_ops {

namespace {
// Dev knob (dev_knob, common.cuh): CUDA_LLM_OPS_FLASH_SM90=0 keeps fp16/bf16 on the
// mma.sync kernels so scripts/bench_attention_dev.py and the tests can run both families
// side by side on one H100.
inline bool sm90_family_allowed() {
  static bool dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_SM90") != nullptr;
  return dev_knob("CUDA_LLM_OPS_FLASH_SM90", dev_mode, 1) != 0;
}

template <typename T>
cudaError_t dispatch_head_dim(const AttentionParams& p, cudaStream_t stream) {
  const int d = p.head_dim;
  if (sm90_family_allowed()) {
    const cudaError_t err = launch_flash_attention_sm90<T>(p, stream);
    if (err != cudaErrorNotSupported) return err;
  }
  if (d <= 32) return launch_flash_attention_mma<T, 32>(p, stream);
  if (d <= 64) return launch_flash_attention_mma<T, 64>(p, stream);
  if (d <= 96) return launch_flash_attention_mma<T, 96>(p, stream);
  if (d <= 128) return launch_flash_attention_mma<T, 128>(p, stream);
  if (d <= 160) return launch_flash_attention_mma<T, 160>(p, stream);
  if (d <= 192) return launch_flash_attention_mma<T, 192>(p, stream);
  if (d <= 224) return launch_flash_attention_mma<T, 224>(p, stream);
  return launch_flash_attention_mma<T, 256>(p, stream);
}
}  // namespace

cudaError_t launch_flash_attention(const AttentionParams& p, cudaStream_t stream) {
  if (!attention_params_valid(p)) return cudaErrorInvalidValue;
  switch (p.dtype) {
    case DType::kFloat32: return launch_flash_attention_fp32(p, stream);
    case DType::kFloat16: return dispatch_head_dim<__half>(p, stream);
    case DType::kBFloat16: return dispatch_head_dim<__nv_bfloat16>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace cuda_llm_ops
