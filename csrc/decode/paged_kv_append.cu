// Paged KV-cache append (vLLM's reshape_and_cache): the new tokens' K and V rows
// are copied, 16 bytes per thread, into their flat cache slots; into an FP8 cache each
// thread quantizes 16 values (16 bytes of the cache row). With the decode step's glue
// (slots from the block table, the rotary embedding on q and k) one general kernel does
// it all in one launch: in PyTorch ops the same glue took ~20 kernels, 45-57 us of a
// Llama decode step on CUDA graphs (csrc/decode/NOTES.md "The decode step's glue").
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
  pack_e4m3<16>(f, inv_scale, w);
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

// A group: the 16 bytes of one source row a thread loads (8 16-bit or 4 fp32 values).
template <typename Src>
constexpr int kGroup = 16 / sizeof(Src);

template <typename Src>
CLO_DEVICE void load_group(const Src* p, float (&f)[kGroup<Src>]) {
  const uint4 x = *reinterpret_cast<const uint4*>(p);
  const Src* e = reinterpret_cast<const Src*>(&x);
#pragma unroll
  for (int j = 0; j < kGroup<Src>; ++j) f[j] = to_float<Src>(e[j]);
}

// Rounds to Src (as a separate op's output would be) and stores 16 bytes.
template <typename Src>
CLO_DEVICE void store_group(Src* p, const float (&f)[kGroup<Src>]) {
  uint4 x;
  Src* e = reinterpret_cast<Src*>(&x);
#pragma unroll
  for (int j = 0; j < kGroup<Src>; ++j) e[j] = from_float<Src>(f[j]);
  *reinterpret_cast<uint4*>(p) = x;
}

// The cache's copy of a group: Src values as they are (`kFp8` false), or e4m3 of the
// values rounded to Src first (what appending a separate op's rounded output stores).
template <typename Src, bool kFp8>
CLO_DEVICE void store_cache_group(void* cache, int64_t elem, const float (&f)[kGroup<Src>], float inv_scale) {
  if constexpr (!kFp8) {
    store_group<Src>(static_cast<Src*>(cache) + elem, f);
  } else {
    float rounded[kGroup<Src>];
#pragma unroll
    for (int j = 0; j < kGroup<Src>; ++j) rounded[j] = to_float<Src>(from_float<Src>(f[j]));
    uint32_t w[kGroup<Src> / 4];
    pack_e4m3<kGroup<Src>>(rounded, inv_scale, w);
    uint8_t* out = static_cast<uint8_t*>(cache) + elem;
    if constexpr (kGroup<Src> == 8)
      *reinterpret_cast<uint2*>(out) = make_uint2(w[0], w[1]);
    else
      *reinterpret_cast<uint32_t*>(out) = w[0];
  }
}

// Rotate-half rotary embedding of one pair of groups: `lo` at column c, `hi` at c + D/2.
// float32 products and sums rounded one by one (no fused multiply-add), as PyTorch's
// `x * cos + rotate_half(x) * sin` in float32 computes them.
template <typename Src>
CLO_DEVICE void rotate_pair(float (&lo)[kGroup<Src>], float (&hi)[kGroup<Src>], const Src* cos, const Src* sin,
                            int c, int half) {
  float cl[kGroup<Src>], ch[kGroup<Src>], sl[kGroup<Src>], sh[kGroup<Src>];
  load_group<Src>(cos + c, cl);
  load_group<Src>(cos + c + half, ch);
  load_group<Src>(sin + c, sl);
  load_group<Src>(sin + c + half, sh);
#pragma unroll
  for (int j = 0; j < kGroup<Src>; ++j) {
    const float l = __fadd_rn(__fmul_rn(lo[j], cl[j]), -__fmul_rn(hi[j], sl[j]));
    const float h = __fadd_rn(__fmul_rn(hi[j], ch[j]), __fmul_rn(lo[j], sh[j]));
    lo[j] = l;
    hi[j] = h;
  }
}

// Token t's flat slot, or -1 where it is skipped (AppendSlots).
CLO_DEVICE int64_t append_slot(const AppendSlots& a, int t) {
  const int64_t num_slots = static_cast<int64_t>(a.num_blocks) * a.block_size;
  if (a.slot_mapping != nullptr) {
    const int64_t s = a.slot_is_int64 ? static_cast<const int64_t*>(a.slot_mapping)[t]
                                      : static_cast<int64_t>(static_cast<const int*>(a.slot_mapping)[t]);
    return s >= 0 && s < num_slots ? s : -1;
  }
  const int len = a.seq_lens[t];
  if (len <= 0) return -1;
  const int pos = len - 1, page = pos / a.block_size;
  if (page >= a.max_blocks_per_seq) return -1;
  const int blk = a.block_tables[t * a.table_stride + page];
  if (blk < 0 || blk >= a.num_blocks) return -1;
  return static_cast<int64_t>(blk) * a.block_size + pos % a.block_size;
}

// The general append, one token per block: q's rotation (in place), k's rotated groups
// and v's groups are dealt over the threads. kRope false: a copy (or quantization) with
// slots from the block table.
template <typename Src, bool kFp8, bool kRope>
__global__ void __launch_bounds__(128) paged_kv_append_general_kernel(const PagedKvAppendArgs a) {
  constexpr int G = kGroup<Src>;
  const int t = blockIdx.x;
  const int64_t slot = append_slot(a, t);
  const int d = a.head_dim, half = d / 2;
  const int row_groups = d / G, pair_groups = half / G;
  const int q_items = kRope && a.q != nullptr ? a.num_q_heads * pair_groups : 0;
  const int k_items = slot < 0 ? 0 : a.num_kv_heads * (kRope ? pair_groups : row_groups);
  const int v_items = slot < 0 ? 0 : a.num_kv_heads * row_groups;
  const Src* cos = static_cast<const Src*>(a.cos) + (kRope ? t * a.cos_stride_t : 0);
  const Src* sin = static_cast<const Src*>(a.sin) + (kRope ? t * a.sin_stride_t : 0);
  const float k_inv = 1.f / a.k_scale, v_inv = 1.f / a.v_scale;
  const int64_t cache_row = slot * a.num_kv_heads;  // in rows of D
  for (int i = threadIdx.x; i < q_items + k_items + v_items; i += blockDim.x) {
    if (i < q_items) {
      const int h = i / pair_groups, c = (i % pair_groups) * G;
      Src* row = static_cast<Src*>(a.q) + t * a.q_stride_t + h * a.q_stride_h;
      float lo[G], hi[G];
      load_group<Src>(row + c, lo);
      load_group<Src>(row + c + half, hi);
      rotate_pair<Src>(lo, hi, cos, sin, c, half);
      store_group<Src>(row + c, lo);
      store_group<Src>(row + c + half, hi);
    } else if (i < q_items + k_items) {
      const int j = i - q_items;
      const Src* row = static_cast<const Src*>(a.k) + t * a.k_stride_t;
      if constexpr (kRope) {
        const int h = j / pair_groups, c = (j % pair_groups) * G;
        row += h * a.k_stride_h;
        float lo[G], hi[G];
        load_group<Src>(row + c, lo);
        load_group<Src>(row + c + half, hi);
        rotate_pair<Src>(lo, hi, cos, sin, c, half);
        store_cache_group<Src, kFp8>(a.k_cache, (cache_row + h) * d + c, lo, k_inv);
        store_cache_group<Src, kFp8>(a.k_cache, (cache_row + h) * d + c + half, hi, k_inv);
      } else {
        const int h = j / row_groups, c = (j % row_groups) * G;
        float f[G];
        load_group<Src>(row + h * a.k_stride_h + c, f);
        store_cache_group<Src, kFp8>(a.k_cache, (cache_row + h) * d + c, f, k_inv);
      }
    } else {
      const int j = i - q_items - k_items;
      const int h = j / row_groups, c = (j % row_groups) * G;
      float f[G];
      load_group<Src>(static_cast<const Src*>(a.v) + t * a.v_stride_t + h * a.v_stride_h + c, f);
      store_cache_group<Src, kFp8>(a.v_cache, (cache_row + h) * d + c, f, v_inv);
    }
  }
}

// MLA latent rows: one thread per 16-byte piece of a row (64 from kv_c, then 8 from k_pe).
constexpr int kMlaAppendPieces = kMlaHeadDimQK * 2 / 16;
constexpr int kMlaAppendThreads = 256;
__global__ void __launch_bounds__(kMlaAppendThreads) paged_mla_append_kernel(const MlaAppendArgs a) {
  constexpr int kLatentPieces = kMlaHeadDimV * 2 / 16;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kMlaAppendThreads + threadIdx.x;
  const int t = static_cast<int>(i / kMlaAppendPieces), c = static_cast<int>(i % kMlaAppendPieces);
  if (t >= a.num_tokens) return;
  const int64_t slot = append_slot(a, t);
  if (slot < 0) return;
  const uint4* src = c < kLatentPieces
                         ? static_cast<const uint4*>(a.kv_c) + t * (a.kv_c_stride_t / 8) + c
                         : static_cast<const uint4*>(a.k_pe) + t * (a.k_pe_stride_t / 8) + (c - kLatentPieces);
  static_cast<uint4*>(a.kv_cache)[slot * kMlaAppendPieces + c] = *src;
}

}  // namespace

cudaError_t launch_paged_mla_append(const MlaAppendArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return cudaSuccess;
  if ((a.dtype != DType::kFloat16 && a.dtype != DType::kBFloat16) || a.kv_c_stride_t % 8 || a.k_pe_stride_t % 8 ||
      (a.slot_mapping == nullptr && (a.block_tables == nullptr || a.seq_lens == nullptr)))
    return cudaErrorInvalidValue;
  const int64_t blocks = div_ceil<int64_t>(static_cast<int64_t>(a.num_tokens) * kMlaAppendPieces, kMlaAppendThreads);
  paged_mla_append_kernel<<<static_cast<unsigned>(blocks), kMlaAppendThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_paged_kv_append(const PagedKvAppendArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return cudaSuccess;
  if (a.dtype != DType::kFloat16 && a.dtype != DType::kBFloat16 && a.dtype != DType::kFloat32)
    return cudaErrorInvalidValue;
  const bool fp8 = a.cache_dtype == DType::kFloat8E4M3;
  if (!fp8 && a.cache_dtype != a.dtype) return cudaErrorInvalidValue;
  const int per_chunk = 16 / (a.dtype == DType::kFloat32 ? 4 : 2);
  const bool rope = a.cos != nullptr;
  if (a.head_dim % per_chunk != 0 || a.k_stride_t % per_chunk || a.k_stride_h % per_chunk ||
      a.v_stride_t % per_chunk || a.v_stride_h % per_chunk)
    return cudaErrorInvalidValue;
  if (fp8 && (a.head_dim % 16 != 0 || !(a.k_scale > 0.f) || !(a.v_scale > 0.f))) return cudaErrorInvalidValue;
  if (a.slot_mapping == nullptr && (a.block_tables == nullptr || a.seq_lens == nullptr)) return cudaErrorInvalidValue;
  if (rope && (a.sin == nullptr || a.head_dim % (2 * per_chunk) != 0 || a.cos_stride_t % per_chunk ||
               a.sin_stride_t % per_chunk || (a.q != nullptr && (a.q_stride_t % per_chunk || a.q_stride_h % per_chunk))))
    return cudaErrorInvalidValue;
  if (rope || a.slot_mapping == nullptr) {
    return dispatch_float_dtype(a.dtype, [&]<typename Src>() {
      auto launch = [&]<bool kFp8, bool kRope>() {
        paged_kv_append_general_kernel<Src, kFp8, kRope><<<a.num_tokens, 128, 0, stream>>>(a);
      };
      if (fp8)
        rope ? launch.template operator()<true, true>() : launch.template operator()<true, false>();
      else
        rope ? launch.template operator()<false, true>() : launch.template operator()<false, false>();
      return cudaGetLastError();
    });
  }
  const int chunks = a.head_dim / per_chunk;
  const int64_t num_slots = static_cast<int64_t>(a.num_blocks) * a.block_size;
  const auto* ku = static_cast<const uint4*>(a.k);
  const auto* vu = static_cast<const uint4*>(a.v);
  auto* kc = static_cast<uint4*>(a.k_cache);
  auto* vc = static_cast<uint4*>(a.v_cache);
  const int64_t kst = a.k_stride_t / per_chunk, ksh = a.k_stride_h / per_chunk;
  const int64_t vst = a.v_stride_t / per_chunk, vsh = a.v_stride_h / per_chunk;
  if (fp8) {
    // x / scale as x * (1 / scale) in float32: the reference (paged_kv_append_reference)
    // computes the same product, so the rounding to e4m3 matches bit for bit.
    const float k_inv = 1.f / a.k_scale, v_inv = 1.f / a.v_scale;
    return dispatch_float_dtype(a.dtype, [&]<typename Src>() {
      auto run = [&](const auto* slots) {
        paged_kv_append_fp8_kernel<Src><<<a.num_tokens, 128, 0, stream>>>(
            ku, vu, kst, ksh, vst, vsh, kc, vc, slots, a.num_kv_heads, a.head_dim / 16, num_slots, k_inv, v_inv);
      };
      if (a.slot_is_int64)
        run(static_cast<const int64_t*>(a.slot_mapping));
      else
        run(static_cast<const int*>(a.slot_mapping));
      return cudaGetLastError();
    });
  }
  auto launch = [&]<int kTokens, typename SlotT>(const SlotT* slots) {
    paged_kv_append_kernel<kTokens, SlotT><<<div_ceil(a.num_tokens, kTokens), 128, 0, stream>>>(
        ku, vu, kst, ksh, vst, vsh, kc, vc, slots, a.num_tokens, a.num_kv_heads, chunks, num_slots);
  };
  auto launch_tokens = [&](const auto* slots) {
    if (a.num_tokens >= kAppendWideMinTokensPerSm * device_sm_count())
      launch.template operator()<kAppendWideTokens>(slots);
    else
      launch.template operator()<1>(slots);
  };
  if (a.slot_is_int64)
    launch_tokens(static_cast<const int64_t*>(a.slot_mapping));
  else
    launch_tokens(static_cast<const int*>(a.slot_mapping));
  return cudaGetLastError();
}

}  // namespace cuda_llm_ops::decode
