// Hopper flash attention (flash_attention_sm90.cuh), __half instantiation: one
// dtype per file so ninja compiles them in parallel.
#include "attention/flash_attention_sm90.cuh"

namespace cuda_llm_ops {
template cudaError_t launch_flash_attention_sm90<__half>(const AttentionParams&, cudaStream_t);
}  // namespace cuda_llm_ops
