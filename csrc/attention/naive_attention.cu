// Baseline attention, as the seed describes it: one block per
// (batch, head, query row), the row's scores in shared memory, block
// reductions for the softmax. O(Nk) shared memory per block, hence the
// kNaiveAttentionMaxSeqLenK limit (32768 keys = 128 KB of fp32 scores, under
// sm_80's 163 KB and sm_90's 227 KB opt-in limits). Kept simple on purpose: it
// is the correctness baseline the tiled and flash kernels are measured against.
#include "attention/attention.h"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/warp_primitives.cuh"

namespace cuda_llm_ops {
namespace {

constexpr int kNaiveThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kNaiveThreads) naive_attention_kernel(const AttentionParams p) {
  extern __shared__ __align__(16) float naive_smem[];
  const int d = p.head_dim, nk = p.seq_len_k, nq = p.seq_len_q;
  float* q_row = naive_smem;         // [D]
  float* reduce = q_row + d;         // [warps]
  float* scores = reduce + 32;       // [Nk]

  const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = kNaiveThreads / 32;

  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride + row * p.q_seq_stride;
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + ((int64_t(batch) * p.num_q_heads + head) * nq + row) * d;

  // Keys this row sees: [0, visible).
  int visible = nk;
  if (p.is_causal) visible = max(0, min(nk, row + nk - nq + 1));

  for (int i = tid; i < d; i += kNaiveThreads) q_row[i] = to_float(q[i]);
  __syncthreads();

  // Scores: one warp per key, lanes split the head dimension (coalesced K reads).
  float local_max = kNegInf;
  for (int j = warp; j < visible; j += kWarps) {
    const T* kj = k + j * p.k_seq_stride;
    float dot = 0.f;
    for (int i = lane; i < d; i += 32) dot += q_row[i] * to_float(kj[i]);
    dot = warp_reduce_sum(dot) * p.scale;
    if (lane == 0) scores[j] = dot;
    local_max = fmaxf(local_max, dot);
  }
  const float row_max = block_reduce_max<float, kNaiveThreads>(local_max, reduce, kNegInf);

  float local_sum = 0.f;
  for (int j = tid; j < visible; j += kNaiveThreads) {
    const float e = __expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  const float row_sum = block_reduce_sum<float, kNaiveThreads>(local_sum, reduce);  // ends with a barrier
  const float inv = row_sum > 0.f ? 1.f / row_sum : 0.f;  // no visible key: zeros

  // O[i] = sum_j p_j V[j][i]: threads split the head dimension (coalesced V reads).
  for (int i = tid; i < d; i += kNaiveThreads) {
    float acc = 0.f;
    for (int j = 0; j < visible; ++j) acc += scores[j] * to_float(v[j * p.v_seq_stride + i]);
    o[i] = from_float<T>(acc * inv);
  }
}

}  // namespace

cudaError_t launch_naive_attention(const AttentionParams& p, cudaStream_t stream) {
  if (!attention_params_valid(p) || p.seq_len_k > kNaiveAttentionMaxSeqLenK) return cudaErrorInvalidValue;
  const size_t smem = naive_attention_smem_bytes(p.head_dim, p.seq_len_k);
  const dim3 grid(p.seq_len_q, p.num_q_heads, p.batch);
  return dispatch_float_dtype(p.dtype, [&]<typename T>() -> cudaError_t {
    auto kernel = naive_attention_kernel<T>;
    cudaError_t err = set_dynamic_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    kernel<<<grid, kNaiveThreads, smem, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace cuda_llm_ops
