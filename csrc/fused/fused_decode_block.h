// Launcher of the fused decode attention block (Hopper): QKV projection, rotary embedding,
// KV-cache append, paged attention and output projection of one decode step in one kernel.
// Plain parameters only (no torch), so the .cu file compiles without torch headers.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::fused {

// The one head dim the kernel is built for, and its batch limit (two n8 tiles of rows).
constexpr int kFusedHeadDim = 128;
constexpr int kFusedMaxBatch = 16;

struct FusedDecodeBlockProblem {
  const void* x;             // [batch, hidden]
  const void* w_qkv;         // [3 * heads * 128, hidden]: q heads, then k heads, then v heads
  const void* w_o;           // [hidden, heads * 128]
  void* k_cache;             // [num_blocks, block_size, heads, 128]
  void* v_cache;
  const int* block_tables;   // [batch, max_blocks]
  const int* seq_lens;       // [batch], the new token included
  const void* cos;           // [batch, 128] or null (no rotary embedding)
  const void* sin;
  void* out;                 // [batch, hidden]
  void* workspace;           // fused_decode_block_workspace_bytes, zero before the first call
  int batch, hidden, heads, block_size, max_blocks;
  int64_t num_blocks;
  float scale;               // softmax scale (> 0)
  DType dtype;               // float16 or bfloat16
#ifdef CLO_DEV_STAMPS
  unsigned long long* dev_stamps = nullptr;  // dev probe builds: [blocks][kFusedDevStamps]
#endif
};
#ifdef CLO_DEV_STAMPS
// Per block (scripts/fused_phase_probe.cu): %globaltimer at entry, the projection's last stage
// used, cluster barrier 1 passed, every warp's attention loop done, cluster barrier 2 passed,
// warp 0's output projection done, warp 0's exit; then the block's SM (%smid).
constexpr int kFusedDevStamps = 8;
#endif

// Bytes of the workspace: fp32 output sums and completion counters. The kernel leaves it
// zero, as it found it, so one zeroed workspace serves every later call on one stream.
size_t fused_decode_block_workspace_bytes(int hidden);

// Whether the fused kernel runs on the current device for this problem ("" if it does,
// else why not): sm_90 built and present, MHA, head dim 128, batch <= 16, hidden a
// multiple of 512. The Python layer falls back to unfused ops otherwise.
const char* fused_decode_block_unsupported(int batch, int hidden, int heads, int kv_heads, int head_dim,
                                           int block_size);

// cudaErrorInvalidValue for a problem fused_decode_block_unsupported rejects, else the
// launch status. `cluster_size` 0 takes the default, 4 thread blocks per head (measured
// faster than 2 at every Llama-2-7B shape, NOTES.md).
cudaError_t launch_fused_decode_block(const FusedDecodeBlockProblem& p, int cluster_size, cudaStream_t stream);

}  // namespace cuda_llm_ops::fused
