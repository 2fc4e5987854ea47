// Instantiation of the decode attention kernels (paged and strided) for one
// dtype and head dim: one file each so the build compiles them in parallel.
#include "decode/decode_attention.cuh"

namespace cuda_llm_ops::decode {
CLO_INSTANTIATE_DECODE(__half, 128)
}  // namespace cuda_llm_ops::decode
