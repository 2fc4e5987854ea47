// Paged KV-cache append (vLLM's reshape_and_cache): the new tokens' K and V rows
// are copied, 16 bytes per thread, into their flat cache slots; into an FP8 cache each
// thread quantizes 16 values (16 bytes of the cache row).
#include "cuda_llm_ops/fp8.cuh"
#include "decode/decode.h"

namespace cuda_llm_ops::decode {

namespace {

// kTokens tokens per thread block; threads cover Hkv x D/8 16-byte chunks of each
// token's K and V rows, with the loads of all its tokens issued before any store.
// 4 tokens per block from kAppendWideMinTokensPerSm tokens per SM (H100, bench at
// T = 4096: 14.2 -> 13.6 us); 1 below, where fewer blocks lose more than the deeper load
// queue gains (T = 16..256: 1.5-2.9 us at 1 token per block, 1.8-3.1 at 4).
constexpr int kAppendWideTokens = 4;
constexpr int kAppendWideMinTokensPerSm = 16;

template <int kTokens, typename SlotT>
__global__ void __launch_bounds__(128)
    paged_kv_append_kernel(const uint4* __restrict__ k, const uint4* __restrict__ v, int64_t k_st, int64_t k_sh,
                           int64_t v_st, int64_t v_sh, uint4* __restrict__ k_cache, uint4* __restrict__ v_cache,
                           const SlotT* __restrict__ slot_mapping, int num_tokens, int num_kv_heads,
                           int chunks_per_head, int64_t num_slots) {
  const int t0 = blockIdx.x * kTokens;
  const int n = min(kTokens, num_tokens - t0);
  // Slot < 0: padding token. Past the cache: never written (the wrapper reports it). The
  // row loads do not wait for the slots (they only predicate the stores).
  int64_t slot[kTokens];
#pragma unroll
  for (int j = 0; j < kTokens; ++j) {
    const int64_t s = j < n ? static_cast<int64_t>(slot_mapping[t0 + j]) : -1;
    slot[j] = s >= 0 && s < num_slots ? s : -1;
  }
  const int64_t row_chunks = static_cast<int64_t>(num_kv_heads) * chunks_per_head;
  for (int c = threadIdx.x; c < row_chunks; c += blockDim.x) {
    const int h = c / chunks_per_head, ch = c % chunks_per_head;
    uint4 kx[kTokens], vx[kTokens];
#pragma unroll
    for (int j = 0; j < kTokens; ++j) {
      if (j < n) {
        kx[j] = k[(t0 + j) * k_st + h * k_sh + ch];
        vx[j] = v[(t0 + j) * v_st + h * v_sh + ch];
      }
    }
#pragma unroll
    for (int j = 0; j < kTokens; ++j) {
      if (slot[j] >= 0) {
        k_cache[slot[j] * row_chunks + c] = kx[j];
        v_cache[slot[j] * row_chunks + c] = vx[j];
      }
    }
  }
}

// One 16-byte chunk of 16 e4m3 values from 16 source values (`in`: 16 / (16 / sizeof(Src))
// chunks of the source row).
template <typename Src>
__device__ __forceinline__ uint4 quantize_e4m3x16(const uint4* in, float inv_scale) {
  constexpr int kPerChunk = 16 / sizeof(Src);
  float f[16];
#pragma unroll
  for (int c = 0; c < 16 / kPerChunk; ++c) {
    const uint4 x = in[c];
    const Src* e = reinterpret_cast<const Src*>(&x);
#pragma unroll
    for (int j = 0; j < kPerChunk; ++j) f[c * kPerChunk + j] = to_float<Src>(e[j]);
  }
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = static_cast<uint32_t>(float2_to_e4m3x2(f[4 * i], f[4 * i + 1], inv_scale)) |
           (static_cast<uint32_t>(float2_to_e4m3x2(f[4 * i + 2], f[4 * i + 3], inv_scale)) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// FP8 cache: threads cover Hkv x D/16 16-byte chunks of the cache rows, one token per
// block (the cache side moves half or a quarter of the source's bytes).
template <typename Src, typename SlotT>
__global__ void __launch_bounds__(128)
    paged_kv_append_fp8_kernel(const uint4* __restrict__ k, const uint4* __restrict__ v, int64_t k_st, int64_t k_sh,
                               int64_t v_st, int64_t v_sh, uint4* __restrict__ k_cache, uint4* __restrict__ v_cache,
                               const SlotT* __restrict__ slot_mapping, int num_kv_heads, int chunks_per_head,
                               int64_t num_slots, float k_inv_scale, float v_inv_scale) {
  constexpr int kSrcChunks = 16 / (16 / sizeof(Src));  // source chunks per cache chunk
  const int t = blockIdx.x;
  const int64_t s = static_cast<int64_t>(slot_mapping[t]);
  if (s < 0 || s >= num_slots) return;
  const int64_t row_chunks = static_cast<int64_t>(num_kv_heads) * chunks_per_head;
  for (int c = threadIdx.x; c < row_chunks; c += blockDim.x) {
    const int h = c / chunks_per_head, ch = c % chunks_per_head;
    k_cache[s * row_chunks + c] = quantize_e4m3x16<Src>(k + t * k_st + h * k_sh + ch * kSrcChunks, k_inv_scale);
    v_cache[s * row_chunks + c] = quantize_e4m3x16<Src>(v + t * v_st + h * v_sh + ch * kSrcChunks, v_inv_scale);
  }
}

}  // namespace

cudaError_t launch_paged_kv_append(DType dtype, DType cache_dtype, float k_scale, float v_scale, const void* k,
                                   const void* v, int64_t k_stride_t, int64_t k_stride_h, int64_t v_stride_t, int64_t v_stride_h, void* k_cache,
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
  const auto* ku = static_cast<const uint4*>(k);
  const auto* vu = static_cast<const uint4*>(v);
  auto* kc = static_cast<uint4*>(k_cache);
  auto* vc = static_cast<uint4*>(v_cache);
  if (cache_dtype == DType::kFloat8E4M3) {
    if (head_dim % 16 != 0 || !(k_scale > 0.f) || !(v_scale > 0.f)) return cudaErrorInvalidValue;
    // x / scale as x * (1 / scale) in float32: the reference (paged_kv_append_reference)
    // computes the same product, so the rounding to e4m3 matches bit for bit.
    const float k_inv = 1.f / k_scale, v_inv = 1.f / v_scale;
    return dispatch_float_dtype(dtype, [&]<typename Src>() {
      auto run = [&](const auto* slots) {
        paged_kv_append_fp8_kernel<Src><<<num_tokens, 128, 0, stream>>>(
            ku, vu, k_stride_t / per_chunk, k_stride_h / per_chunk, v_stride_t / per_chunk, v_stride_h / per_chunk,
            kc, vc, slots, num_kv_heads, head_dim / 16, num_slots, k_inv, v_inv);
      };
      if (slot_is_int64)
        run(static_cast<const int64_t*>(slot_mapping));
      else
        run(static_cast<const int*>(slot_mapping));
      return cudaGetLastError();
    });
  }
  if (cache_dtype != dtype) return cudaErrorInvalidValue;
  auto launch = [&]<int kTokens, typename SlotT>(const SlotT* slots) {
    paged_kv_append_kernel<kTokens, SlotT><<<div_ceil(num_tokens, kTokens), 128, 0, stream>>>(
        ku, vu, k_stride_t / per_chunk, k_stride_h / per_chunk, v_stride_t / per_chunk, v_stride_h / per_chunk, kc,
        vc, slots, num_tokens, num_kv_heads, chunks, num_slots);
  };
  auto launch_tokens = [&](const auto* slots) {
    if (num_tokens >= kAppendWideMinTokensPerSm * device_sm_count())
      launch.template operator()<kAppendWideTokens>(slots);
    else
      launch.template operator()<1>(slots);
  };
  if (slot_is_int64)
    launch_tokens(static_cast<const int64_t*>(slot_mapping));
  else
    launch_tokens(static_cast<const int*>(slot_mapping));
  return cudaGetLastError();
}

}  // namespace cuda_llm_ops::decode
