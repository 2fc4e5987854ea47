// Tiled attention on CUDA cores (every dtype), the seed's second step: tiles
// of BLOCK_M = 32 query rows and BLOCK_N = 32 keys staged in shared memory as
// fp32, with the seed's +1 padding so that the column walks below are free of
// bank conflicts (row stride D + 1 and 33 floats shift consecutive rows by one
// bank). Unlike the seed's sketch it keeps an online softmax across K tiles,
// so it works for any Nk with O(BLOCK) shared memory; the scores of one tile
// live in shared memory (smem_S) between the two phases.
//
// 256 threads; thread (r = tid / 8, c = tid % 8) owns score columns c + 8i of
// row r and output columns c + 8i of row r, so the 8 threads of a row hold its
// softmax statistics and reduce them with 3 shuffles.
// Shared memory: (3 x 32 x (D + 1) + 32 x 33) floats: 103 KB at D = 256, above
// the 48 KB default, so the launcher raises the dynamic limit.
#include "attention/attention.h"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"

namespace cuda_llm_ops {
namespace {

constexpr int kTiledBlockM = kTiledAttentionBlockM;
constexpr int kTiledBlockN = kTiledAttentionBlockN;
constexpr int kTiledThreads = 256;
constexpr int kTiledThreadsPerRow = kTiledThreads / kTiledBlockM;  // 8

template <typename T>
__device__ __forceinline__ void load_tile_as_float(float* smem, const T* gmem, int64_t row_stride, int valid_rows,
                                                   int d, int tid) {
  const int stride = d + 1;
  for (int i = tid; i < kTiledBlockM * d; i += kTiledThreads) {
    const int r = i / d, c = i % d;
    smem[r * stride + c] = r < valid_rows ? to_float(gmem[r * row_stride + c]) : 0.f;
  }
}

// kMaxCols = max head_dim / 8: output columns per thread (registers).
template <typename T, int kMaxCols>
__global__ void __launch_bounds__(kTiledThreads) tiled_attention_kernel(const AttentionParams p) {
  extern __shared__ __align__(16) float tiled_smem[];
  const int d = p.head_dim, stride = d + 1;
  float* sQ = tiled_smem;
  float* sK = sQ + kTiledBlockM * stride;
  float* sV = sK + kTiledBlockN * stride;
  float* sS = sV + kTiledBlockN * stride;  // [BLOCK_M][BLOCK_N + 1]

  const int tid = threadIdx.x;
  const int r = tid / kTiledThreadsPerRow, c = tid % kTiledThreadsPerRow;
  const int m_block = p.is_causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int m0 = m_block * kTiledBlockM;
  const int nq = p.seq_len_q, nk = p.seq_len_k;
  const int causal_offset = nk - nq;
  const int row = m0 + r;

  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + (int64_t(batch) * p.num_q_heads + head) * nq * d;

  int n_end = nk;
  if (p.is_causal) n_end = max(0, min(nk, min(m0 + kTiledBlockM, nq) + causal_offset));

  load_tile_as_float(sQ, q + int64_t(m0) * p.q_seq_stride, p.q_seq_stride, nq - m0, d, tid);

  float acc[kMaxCols];
#pragma unroll
  for (int i = 0; i < kMaxCols; ++i) acc[i] = 0.f;
  float row_max = kNegInf, row_sum = 0.f;
  const float scale_log2 = p.scale * kLog2e;

  for (int n0 = 0; n0 < n_end; n0 += kTiledBlockN) {
    __syncthreads();  // previous tile fully consumed (and sQ stored, first time)
    load_tile_as_float(sK, k + int64_t(n0) * p.k_seq_stride, p.k_seq_stride, nk - n0, d, tid);
    load_tile_as_float(sV, v + int64_t(n0) * p.v_seq_stride, p.v_seq_stride, nk - n0, d, tid);
    __syncthreads();

    // Phase 1: this thread's 4 scores of row r, then the row's online softmax.
    float s[kTiledBlockN / kTiledThreadsPerRow];
    float tile_max = kNegInf;
#pragma unroll
    for (int i = 0; i < kTiledBlockN / kTiledThreadsPerRow; ++i) {
      const int col = c + i * kTiledThreadsPerRow;
      float dot = 0.f;
      for (int e = 0; e < d; ++e) dot += sQ[r * stride + e] * sK[col * stride + e];
      const int key = n0 + col;
      dot *= scale_log2;
      if (key >= nk || (p.is_causal && key > row + causal_offset)) dot = kNegInf;
      s[i] = dot;
      tile_max = fmaxf(tile_max, dot);
    }
    tile_max = group_reduce_max<kTiledThreadsPerRow>(tile_max);
    const float m_new = fmaxf(row_max, tile_max);
    const float m_use = m_new == kNegInf ? 0.f : m_new;  // fully masked so far: exp terms exactly 0
    const float rescale = exp2f(row_max - m_use);
    row_max = m_new;
    float tile_sum = 0.f;
#pragma unroll
    for (int i = 0; i < kTiledBlockN / kTiledThreadsPerRow; ++i) {
      const float e = exp2f(s[i] - m_use);
      sS[r * (kTiledBlockN + 1) + c + i * kTiledThreadsPerRow] = e;
      tile_sum += e;
    }
    row_sum = row_sum * rescale + group_reduce_sum<kTiledThreadsPerRow>(tile_sum);
    __syncwarp();  // a row's 8 threads share a warp: their P values are visible to each other

    // Phase 2: O[r][c + 8i] = O * rescale + sum_j P[r][j] V[j][c + 8i].
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) {
      const int col = c + i * kTiledThreadsPerRow;
      if (col < d) {
        float a = acc[i] * rescale;
        for (int j = 0; j < kTiledBlockN; ++j) a += sS[r * (kTiledBlockN + 1) + j] * sV[j * stride + col];
        acc[i] = a;
      }
    }
  }

  if (row < nq) {
    const float inv = row_sum > 0.f ? 1.f / row_sum : 0.f;  // a row that saw no key outputs zeros
#pragma unroll
    for (int i = 0; i < kMaxCols; ++i) {
      const int col = c + i * kTiledThreadsPerRow;
      if (col < d) o[int64_t(row) * d + col] = from_float<T>(acc[i] * inv);
    }
  }
}

template <int kMaxCols>
cudaError_t launch_tiled(const AttentionParams& p, cudaStream_t stream) {
  const size_t smem = tiled_attention_smem_bytes(p.head_dim);
  const dim3 grid((p.seq_len_q + kTiledBlockM - 1) / kTiledBlockM, p.num_q_heads, p.batch);
  return dispatch_float_dtype(p.dtype, [&]<typename T>() -> cudaError_t {
    auto kernel = tiled_attention_kernel<T, kMaxCols>;
    cudaError_t err = set_dynamic_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    kernel<<<grid, kTiledThreads, smem, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t launch_tiled_attention(const AttentionParams& p, cudaStream_t stream) {
  if (!attention_params_valid(p)) return cudaErrorInvalidValue;
  if (p.head_dim <= 64) return launch_tiled<64 / kTiledThreadsPerRow>(p, stream);
  if (p.head_dim <= 128) return launch_tiled<128 / kTiledThreadsPerRow>(p, stream);
  return launch_tiled<256 / kTiledThreadsPerRow>(p, stream);
}

}  // namespace cuda_llm_ops
