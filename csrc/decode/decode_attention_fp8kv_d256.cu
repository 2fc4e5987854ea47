// Instantiation of the paged decode attention kernels over an FP8 (e4m3) KV cache for
// one head dim, both query dtypes: one file per head dim so the build compiles them in
// parallel.
#include "decode/decode_attention.cuh"

namespace cuda_llm_ops::decode {
CLO_INSTANTIATE_DECODE_FP8_KV(__half, 256)
CLO_INSTANTIATE_DECODE_FP8_KV(__nv_bfloat16, 256)
}  // namespace cuda_llm_ops::decode
