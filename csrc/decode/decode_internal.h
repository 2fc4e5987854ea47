// Declarations shared by the decode .cu files: the per-(dtype, head_dim, layout)
// instantiations live in separate files so ninja compiles them in parallel.
#pragma once

#include "decode/decode.h"

namespace cuda_llm_ops::decode {

// Dev knob CLO_DECODE_VARIANT (NOTES.md, "Kernel choice"): which decode kernel runs.
// Unset when the process's first decode call runs: always the automatic choice, and the
// environment is never read again. Set then (to anything, e.g. 0): read again on every
// call, so one process can switch between calls (os.environ in Python; a CUDA graph
// keeps what it captured). 0 (or unknown): automatic; 1: the cp.async kernel; 2: the
// TMA kernel wherever it can run (sm_90, a cache TMA can describe), else the cp.async one.
constexpr int kDecodeKernelAuto = 0;
constexpr int kDecodeKernelCpAsync = 1;
constexpr int kDecodeKernelTma = 2;
int decode_dev_kernel();
// Dev knob CLO_DECODE_PDL, read like CLO_DECODE_VARIANT: "0" launches the decode
// kernels without programmatic dependent launch (on sm_90 they use it by default).
bool decode_dev_pdl();
#ifdef CLO_DEV_STAMPS
unsigned long long* decode_dev_stamps();
void decode_dev_set_stamps(unsigned long long* p);
#endif

// Whether grids of >= kLargeGridBlocksPerSm blocks per SM run the TMA kernel with 2
// stages and 1 split (NOTES.md v7: at D = 128 on sm_90). The kernel choice and the split
// heuristic both ask this one question.
inline bool decode_tma_takes_large_grids(int head_dim) { return head_dim == 128 && device_cc_major() >= 9; }

// Attention kernel (+ merge when args.num_splits > 1) for one dtype, head dim and
// KV layout (paged block table or strided cache).
template <typename T, int D, bool kPaged>
cudaError_t run_decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace cuda_llm_ops::decode
