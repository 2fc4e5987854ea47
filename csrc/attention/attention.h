// Launchers of the prefill attention kernels (naive, tiled, flash). Plain
// parameters only: the binding layer (csrc/bindings/attention.cpp) checks the
// tensors and fills AttentionParams; no torch here.
//
// Layout: q [B, Hq, Nq, D], k and v [B, Hkv, Nk, D], each with its own batch,
// head and sequence strides in elements (the last dimension is contiguous and
// rows are 16-byte aligned); o is a contiguous [B, Hq, Nq, D] in q's dtype.
// Query head h reads KV head h / (Hq / Hkv). Causal: query i sees key j when
// j <= i + Nk - Nq (bottom-right aligned); a row that sees no key outputs zeros.
#pragma once

#include <cstdint>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops {

struct AttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int64_t q_batch_stride = 0, q_head_stride = 0, q_seq_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_seq_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_seq_stride = 0;
  int batch = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int seq_len_q = 0;
  int seq_len_k = 0;
  int head_dim = 0;
  float scale = 0.f;  // softmax scale (already resolved: never 0 here)
  bool is_causal = false;
  DType dtype = DType::kFloat32;
};

// Largest head_dim any attention kernel supports (multiples of 8 up to this).
constexpr int kAttentionMaxHeadDim = 256;
// naive_attention keeps one fp32 score per key in shared memory.
constexpr int kNaiveAttentionMaxSeqLenK = 32768;

// Dynamic shared memory per block of the CUDA-core kernels (the bindings check it against
// smem_budget_per_block: 99-KB GPUs (sm_86/89/120) hold naive's scores up to ~25K keys and
// tiled's tiles up to head_dim 248). naive: the query row, 32 reduction slots, one score per key.
inline size_t naive_attention_smem_bytes(int head_dim, int seq_len_k) {
  return (size_t(head_dim) + 32 + size_t(seq_len_k)) * sizeof(float);
}
// tiled: Q, K and V tiles of 32 rows at stride head_dim + 1, and a 32 x 33 score tile, in fp32.
constexpr int kTiledAttentionBlockM = 32;
constexpr int kTiledAttentionBlockN = 32;
inline size_t tiled_attention_smem_bytes(int head_dim) {
  return (size_t(kTiledAttentionBlockM + 2 * kTiledAttentionBlockN) * (head_dim + 1) +
          size_t(kTiledAttentionBlockM) * (kTiledAttentionBlockN + 1)) * sizeof(float);
}

// Returns cudaErrorInvalidValue for parameters the kernels do not support
// (bad dtype, head_dim, sizes); the binding checks them first with clear messages.
cudaError_t launch_naive_attention(const AttentionParams& p, cudaStream_t stream);
cudaError_t launch_tiled_attention(const AttentionParams& p, cudaStream_t stream);
// fp16/bf16: tensor cores (mma.sync m16n8k16, on Hopper wgmma); fp32: 3xTF32 on the
// tensor cores (mma.sync m16n8k8), fp32-accurate.
cudaError_t launch_flash_attention(const AttentionParams& p, cudaStream_t stream);

// Per-head-dim-bucket launchers of the tensor-core flash kernel (one .cu per
// bucket so they compile in parallel). T is __half or __nv_bfloat16.
template <typename T, int kHeadDim>
cudaError_t launch_flash_attention_mma(const AttentionParams& p, cudaStream_t stream);
cudaError_t launch_flash_attention_fp32(const AttentionParams& p, cudaStream_t stream);
// Hopper (sm_90a) wgmma/TMA flash kernel for fp16/bf16 and D in (64, 128]
// (flash_attention_sm90.cuh); cudaErrorNotSupported, launching nothing, where it does
// not apply, so the dispatch falls back to the mma.sync kernel.
template <typename T>
cudaError_t launch_flash_attention_sm90(const AttentionParams& p, cudaStream_t stream);

// Host-side validation shared by every launcher.
inline bool attention_params_valid(const AttentionParams& p) {
  return p.q && p.k && p.v && p.o && p.batch > 0 && p.num_q_heads > 0 && p.num_kv_heads > 0 &&
         p.num_q_heads % p.num_kv_heads == 0 && p.seq_len_q > 0 && p.seq_len_k > 0 && p.head_dim > 0 &&
         p.head_dim % 8 == 0 && p.head_dim <= kAttentionMaxHeadDim && p.scale > 0.f && p.batch <= 65535 &&
         p.num_q_heads <= 65535;
}

}  // namespace cuda_llm_ops
