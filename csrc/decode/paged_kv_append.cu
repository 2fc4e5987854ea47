// Paged KV-cache append (vLLM's reshape_and_cache): the new tokens' K and V rows
// are copied, 16 bytes per thread, into their flat cache slots.
#include "decode/decode.h"

namespace cuda_llm_ops::decode {

namespace {

// One thread block per token; threads cover Hkv x D/8 chunks of K and V.
template <typename SlotT>
__global__ void __launch_bounds__(128)
    paged_kv_append_kernel(const uint4* __restrict__ k, const uint4* __restrict__ v, int64_t k_st, int64_t k_sh,
                           int64_t v_st, int64_t v_sh, uint4* __restrict__ k_cache, uint4* __restrict__ v_cache,
                           const SlotT* __restrict__ slot_mapping, int num_kv_heads, int chunks_per_head,
                           int64_t num_slots) {
  const int t = blockIdx.x;
  const int64_t slot = static_cast<int64_t>(slot_mapping[t]);
  // Negative: padding token. Past the cache: never written (the wrapper reports it).
  // The K and V loads do not wait for the slot (a predicate on the stores only): the
  // slot and the rows are one DRAM round trip, not two in a row.
  const bool write = slot >= 0 && slot < num_slots;
  const int64_t row_chunks = static_cast<int64_t>(num_kv_heads) * chunks_per_head;
  uint4* kdst = k_cache + (write ? slot : 0) * row_chunks;
  uint4* vdst = v_cache + (write ? slot : 0) * row_chunks;
#pragma unroll 4
  for (int c = threadIdx.x; c < row_chunks; c += blockDim.x) {
    const int h = c / chunks_per_head, ch = c % chunks_per_head;
    const uint4 kx = k[t * k_st + h * k_sh + ch];
    const uint4 vx = v[t * v_st + h * v_sh + ch];
    if (write) {
      kdst[c] = kx;
      vdst[c] = vx;
    }
  }
}

}  // namespace

cudaError_t launch_paged_kv_append(DType dtype, const void* k, const void* v, int64_t k_stride_t,
                                   int64_t k_stride_h, int64_t v_stride_t, int64_t v_stride_h, void* k_cache,
                                   void* v_cache, const void* slot_mapping, bool slot_is_int64, int num_tokens,
                                   int num_kv_heads, int head_dim, int num_blocks, int block_size,
                                   cudaStream_t stream) {
  if (num_tokens == 0) return cudaSuccess;
  const int elem = dtype == DType::kFloat32 ? 4 : 2;
  const int per_chunk = 16 / elem;
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16 && dtype != DType::kFloat32) return cudaErrorInvalidValue;
  if (head_dim % per_chunk != 0 || k_stride_t % per_chunk || k_stride_h % per_chunk || v_stride_t % per_chunk ||
      v_stride_h % per_chunk)
    return cudaErrorInvalidValue;
  const int chunks = head_dim / per_chunk;
  const int64_t num_slots = static_cast<int64_t>(num_blocks) * block_size;
  const dim3 grid(num_tokens);
  const auto* ku = static_cast<const uint4*>(k);
  const auto* vu = static_cast<const uint4*>(v);
  auto* kc = static_cast<uint4*>(k_cache);
  auto* vc = static_cast<uint4*>(v_cache);
  if (slot_is_int64) {
    paged_kv_append_kernel<int64_t><<<grid, 128, 0, stream>>>(
        ku, vu, k_stride_t / per_chunk, k_stride_h / per_chunk, v_stride_t / per_chunk, v_stride_h / per_chunk, kc,
        vc, static_cast<const int64_t*>(slot_mapping), num_kv_heads, chunks, num_slots);
  } else {
    paged_kv_append_kernel<int><<<grid, 128, 0, stream>>>(
        ku, vu, k_stride_t / per_chunk, k_stride_h / per_chunk, v_stride_t / per_chunk, v_stride_h / per_chunk, kc,
        vc, static_cast<const int*>(slot_mapping), num_kv_heads, chunks, num_slots);
  }
  return cudaGetLastError();
}

}  // namespace cuda_llm_ops::decode
