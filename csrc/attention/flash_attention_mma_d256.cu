// Tensor-core flash attention, head-dim bucket 256 (fp16 and bf16). The
// kernel lives in flash_attention_mma.cuh; one bucket per file so ninja
// compiles the buckets in parallel.
#include "attention/flash_attention_mma.cuh"

namespace cuda_llm_ops {
CLO_INSTANTIATE_FLASH_MMA(256)
}  // namespace cuda_llm_ops
