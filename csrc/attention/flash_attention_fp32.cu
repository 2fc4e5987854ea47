// FlashAttention forward for fp32 on CUDA cores (fp32 has no mma.sync path
// short of TF32, which would lose the precision fp32 callers ask for).
//
// A block owns kWarps x 8 query rows; each warp owns 8 rows, so the online
// softmax statistics never leave the warp. K/V tiles of 32 keys stream through
// a double-buffered cp.async pipeline; Q stays in shared memory.
//   S:   lane j computes the scores of key j for the warp's 8 rows: one 16-byte
//        K read feeds 32 FMAs (8 rows x 4), Q reads are warp broadcasts.
//   P V: lane owns 16-byte column chunks of O; P values travel by shuffle.
// Rows are padded by 16 bytes: with a stride of (D + 4) floats, D a multiple of
// 8, the 8 lanes of each 16-byte access phase hit 8 distinct bank groups.
#include "attention/attention.h"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"

namespace cuda_llm_ops {
namespace {

template <int kMaxD>
struct Fp32FlashConfig {
  static constexpr int kWarps = kMaxD <= 128 ? 8 : 4;  // 4 at D=256 keeps smem within sm_80's 163 KB
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = 8;
  static constexpr int kBlockM = kWarps * kRowsPerWarp;
  static constexpr int kBlockN = 32;  // one key per lane
  static constexpr int kStride = kMaxD + 4;
  static constexpr int kOChunks = kMaxD / 4 > 32 ? kMaxD / 4 / 32 : 1;  // 16-byte O chunks per lane
  static constexpr size_t kSmemBytes = size_t(kBlockM + 4 * kBlockN) * kStride * sizeof(float);
};

template <int kRows, int kThreads, int kStride>
__device__ __forceinline__ void load_rows_fp32(float* smem, const float* gmem, int64_t row_stride, int valid_rows,
                                               int d4, int tid) {
  for (int i = tid; i < kRows * d4; i += kThreads) {
    const int r = i / d4, c = i % d4;
    const bool valid = r < valid_rows;
    cp_async_16(smem + r * kStride + c * 4, valid ? gmem + r * row_stride + c * 4 : gmem, valid);
  }
}

template <int kMaxD>
__global__ void __launch_bounds__(Fp32FlashConfig<kMaxD>::kThreads, 1)
    flash_attention_fp32_kernel(const AttentionParams p) {
  using Cfg = Fp32FlashConfig<kMaxD>;
  constexpr int kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kStride = Cfg::kStride, kR = Cfg::kRowsPerWarp;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sK = sQ + kBlockM * kStride;
  float* sV = sK + 2 * kBlockN * kStride;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m_block = p.is_causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int m0 = m_block * kBlockM;
  const int nq = p.seq_len_q, nk = p.seq_len_k, d4 = p.head_dim / 4;
  const int causal_offset = nk - nq;

  const float* q = static_cast<const float*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const float* k = static_cast<const float*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const float* v = static_cast<const float*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  float* o = static_cast<float*>(p.o) + (int64_t(batch) * p.num_q_heads + head) * nq * p.head_dim;

  int n_end = nk;
  if (p.is_causal) n_end = min(nk, min(m0 + kBlockM, nq) + causal_offset);
  const int num_n_tiles = n_end > 0 ? (n_end + kBlockN - 1) / kBlockN : 0;
  if (num_n_tiles == 0) {
    const int rows = min(kBlockM, nq - m0);
    for (int i = tid; i < rows * d4; i += Cfg::kThreads)
      reinterpret_cast<float4*>(o + int64_t(m0) * p.head_dim)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    return;
  }

  load_rows_fp32<kBlockM, Cfg::kThreads, kStride>(sQ, q + int64_t(m0) * p.q_seq_stride, p.q_seq_stride, nq - m0, d4,
                                                  tid);
  load_rows_fp32<kBlockN, Cfg::kThreads, kStride>(sK, k, p.k_seq_stride, nk, d4, tid);
  load_rows_fp32<kBlockN, Cfg::kThreads, kStride>(sV, v, p.v_seq_stride, nk, d4, tid);
  cp_async_commit();

  const float scale_log2 = p.scale * kLog2e;
  const int wrow0 = m0 + warp * kR;  // first row of this warp
  const float* sQw = sQ + warp * kR * kStride;

  float acc[kR][Cfg::kOChunks][4];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int i = 0; i < Cfg::kOChunks; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][i][e] = 0.f;
  float row_max[kR], lane_sum[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) row_max[r] = kNegInf, lane_sum[r] = 0.f;

  for (int n_tile = 0; n_tile < num_n_tiles; ++n_tile) {
    const int buf = n_tile & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile landed; all warps are done with the other buffer
    if (n_tile + 1 < num_n_tiles) {
      const int n_next = (n_tile + 1) * kBlockN;
      load_rows_fp32<kBlockN, Cfg::kThreads, kStride>(sK + (buf ^ 1) * kBlockN * kStride,
                                                      k + int64_t(n_next) * p.k_seq_stride, p.k_seq_stride,
                                                      nk - n_next, d4, tid);
      load_rows_fp32<kBlockN, Cfg::kThreads, kStride>(sV + (buf ^ 1) * kBlockN * kStride,
                                                      v + int64_t(n_next) * p.v_seq_stride, p.v_seq_stride,
                                                      nk - n_next, d4, tid);
      cp_async_commit();
    }
    const float* sKb = sK + buf * kBlockN * kStride;
    const float* sVb = sV + buf * kBlockN * kStride;

    float s[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) s[r] = 0.f;
#pragma unroll 4
    for (int c = 0; c < d4; ++c) {
      const float4 kk = *reinterpret_cast<const float4*>(sKb + lane * kStride + c * 4);
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const float4 qq = *reinterpret_cast<const float4*>(sQw + r * kStride + c * 4);
        s[r] = fmaf(qq.x, kk.x, fmaf(qq.y, kk.y, fmaf(qq.z, kk.z, fmaf(qq.w, kk.w, s[r]))));
      }
    }

    const int key = n_tile * kBlockN + lane;
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      float x = s[r] * scale_log2;
      if (key >= nk || (p.is_causal && key > wrow0 + r + causal_offset)) x = kNegInf;
      const float mx = fmaxf(row_max[r], warp_reduce_max(x));
      const float m_use = mx == kNegInf ? 0.f : mx;  // fully masked so far: exp terms exactly 0
      const float rescale = exp2f(row_max[r] - m_use);
      row_max[r] = mx;
      s[r] = exp2f(x - m_use);
      lane_sum[r] = lane_sum[r] * rescale + s[r];
#pragma unroll
      for (int i = 0; i < Cfg::kOChunks; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[r][i][e] *= rescale;
    }

#pragma unroll 4
    for (int j = 0; j < kBlockN; ++j) {
      float pj[kR];
#pragma unroll
      for (int r = 0; r < kR; ++r) pj[r] = __shfl_sync(kFullMask, s[r], j);
#pragma unroll
      for (int i = 0; i < Cfg::kOChunks; ++i) {
        const int c = lane + 32 * i;
        if (c < d4) {
          const float4 vv = *reinterpret_cast<const float4*>(sVb + j * kStride + c * 4);
#pragma unroll
          for (int r = 0; r < kR; ++r) {
            acc[r][i][0] = fmaf(pj[r], vv.x, acc[r][i][0]);
            acc[r][i][1] = fmaf(pj[r], vv.y, acc[r][i][1]);
            acc[r][i][2] = fmaf(pj[r], vv.z, acc[r][i][2]);
            acc[r][i][3] = fmaf(pj[r], vv.w, acc[r][i][3]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const float l = warp_reduce_sum(lane_sum[r]);
    const float inv = l > 0.f ? 1.f / l : 0.f;  // a row that saw no key outputs zeros
    const int row = wrow0 + r;
    if (row >= nq) continue;
#pragma unroll
    for (int i = 0; i < Cfg::kOChunks; ++i) {
      const int c = lane + 32 * i;
      if (c < d4)
        reinterpret_cast<float4*>(o + int64_t(row) * p.head_dim)[c] =
            make_float4(acc[r][i][0] * inv, acc[r][i][1] * inv, acc[r][i][2] * inv, acc[r][i][3] * inv);
    }
  }
}

template <int kMaxD>
cudaError_t launch_fp32(const AttentionParams& p, cudaStream_t stream) {
  using Cfg = Fp32FlashConfig<kMaxD>;
  auto kernel = flash_attention_fp32_kernel<kMaxD>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.seq_len_q + Cfg::kBlockM - 1) / Cfg::kBlockM, p.num_q_heads, p.batch);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_flash_attention_fp32(const AttentionParams& p, cudaStream_t stream) {
  if (!attention_params_valid(p) || p.dtype != DType::kFloat32) return cudaErrorInvalidValue;
  if (p.head_dim <= 64) return launch_fp32<64>(p, stream);
  if (p.head_dim <= 128) return launch_fp32<128>(p, stream);
  return launch_fp32<256>(p, stream);
}

}  // namespace cuda_llm_ops
