// Instantiation of the paged decode attention kernels at a 160-column row: head pairs of
// 16-bit head dims 72-80 only (decode_pair_kernel_head_dim), which no other call runs.
#include "decode/decode_attention.cuh"

namespace cuda_llm_ops::decode {
CLO_INSTANTIATE_DECODE_PAIRS(__half, 160)
}  // namespace cuda_llm_ops::decode
