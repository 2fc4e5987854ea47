// Declarations shared by the decode .cu files: the per-(dtype, head_dim, layout)
// instantiations live in separate files so ninja compiles them in parallel.
#pragma once

#include "decode/decode.h"

namespace cuda_llm_ops::decode {

// Attention kernel (+ merge when args.num_splits > 1) for one dtype, head dim and
// KV layout (paged block table or strided cache).
template <typename T, int D, bool kPaged>
cudaError_t run_decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace cuda_llm_ops::decode
