// FlashAttention forward for fp32 inputs on the TF32 tensor cores at fp32 accuracy
// (3xTF32: every operand split into a TF32 "big" part and the TF32 "small" rest, three
// mma.sync m16n8k8 per product, the small x small term dropped; split_tf32, mma.cuh). The
// error is ~1e-6 of the output, as with fp32 FMAs; PyTorch's mem-efficient SDPA (CUTLASS
// "fast fp32") does the same. Needs sm_80.
//
// Design: FA2 as in flash_attention_mma.cuh (4 or 8 warps of 16 query rows, K/V tiles through a
// double-buffered cp.async pipeline, online softmax in registers, the shared softmax step
// of flash_common.cuh) with fp32 fragments loaded 16 bytes at a time, no ldmatrix:
//   S = Q K^T   the k (head-dim) order inside each 16 columns is permuted so a thread's
//               A and B elements of two k8 steps are 4 adjacent floats: logical k t / t+4
//               of step s <-> columns 4t + 2s / 4t + 2s + 1 (a dot product does not care)
//   O += P V    the key order inside each 8 keys is permuted (logical k t / t+4 <-> keys
//               2t / 2t + 1) so P's A fragment is the thread's own S accumulators, and O's
//               columns inside each 32 are permuted (n-tile j, column n <-> 4n + j) so one
//               16-byte V read feeds four n-tiles and a thread's O values are 8 adjacent
//               columns, stored to global directly.
// Shared-memory strides (floats): Q and K rows D + 16 (= 16 mod 32: the 16-byte reads of
// rows g and g + 1 fall in different halves of the banks), V rows D + 4 (keys 2t of a
// quarter warp 8 banks apart).
// Accuracy: S and each key tile's P V sum in fresh tensor-core accumulators (32 head-dim
// columns, one key tile) added with FADDs; the tensor cores' accumulation truncates, and
// running sums over all of D and all keys drifted to 1.5e-5 of the output at N = 2048.
//
// It replaced a CUDA-core kernel that ran 0.40-0.46x SDPA's mem-efficient one (NOTES.md v7).
#include <cstdlib>

#include "attention/attention.h"
#include "attention/flash_common.cuh"
#include "cuda_llm_ops/mma.cuh"
#include "cuda_llm_ops/online_softmax.cuh"
#include "cuda_llm_ops/pipeline.cuh"

namespace cuda_llm_ops {
namespace {

// kHeadDim: a multiple of 32 (O's column groups); kBlockN: keys a K/V tile.
template <int kHeadDim_, int kBlockN_, int kWarps_>
struct Tf32x3Config {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kStrideQK = kHeadDim + 16;
  static constexpr int kStrideV = kHeadDim + 4;
  static constexpr int kNTilesS = kBlockN / 8;
  static constexpr int kNTilesO = kHeadDim / 8;
  static constexpr size_t kSmemBytes =
      size_t(kBlockM * kStrideQK + 2 * kBlockN * kStrideQK + 2 * kBlockN * kStrideV) * sizeof(float);
  static_assert(kHeadDim % 32 == 0 && kBlockN % 8 == 0, "head-dim buckets are multiples of 32");
};

// Key tiles: 64 to D = 64, 32 to D = 128, 16 beyond (sm_80's 163 KB with 4 warps).
template <int kHeadDim>
using Tf32x3Default = Tf32x3Config<kHeadDim, kHeadDim <= 64 ? 64 : (kHeadDim <= 128 ? 32 : 16), 4>;

CLO_DEVICE float4 ld_shared_f4(const float* p) { return *reinterpret_cast<const float4*>(p); }

template <typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) flash_attention_fp32_tf32x3_kernel(const AttentionParams p) {
  constexpr int kHeadDim = Cfg::kHeadDim, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN;
  constexpr int kSQK = Cfg::kStrideQK, kSV = Cfg::kStrideV, kNS = Cfg::kNTilesS, kNO = Cfg::kNTilesO;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* sQ = reinterpret_cast<float*>(smem_raw);
  float* sK = sQ + kBlockM * kSQK;  // 2 buffers
  float* sV = sK + 2 * kBlockN * kSQK;  // 2 buffers

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Causal: the last query blocks see the most keys; start them first.
  const int m_block = p.is_causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int m0 = m_block * kBlockM;
  const int nq = p.seq_len_q, nk = p.seq_len_k, d_real = p.head_dim;

  const float* q = static_cast<const float*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const float* k = static_cast<const float*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const float* v = static_cast<const float*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  float* o = static_cast<float*>(p.o) + ((int64_t(batch) * p.num_q_heads + head) * nq) * d_real;

  const int n_end = flash_key_end(p, m0, kBlockM);
  const int num_n_tiles = n_end > 0 ? (n_end + kBlockN - 1) / kBlockN : 0;
  if (num_n_tiles == 0) {  // every row of the block sees no key: zeros
    flash_store_zero_rows(o, p, m0, kBlockM, tid, Cfg::kThreads);
    return;
  }

  flash_load_tile<float, kBlockM, kHeadDim, kSQK, Cfg::kThreads>(sQ, q + int64_t(m0) * p.q_seq_stride,
                                                                 p.q_seq_stride, nq - m0, d_real, tid);
  flash_load_tile<float, kBlockN, kHeadDim, kSQK, Cfg::kThreads>(sK, k, p.k_seq_stride, nk, d_real, tid);
  flash_load_tile<float, kBlockN, kHeadDim, kSV, Cfg::kThreads>(sV, v, p.v_seq_stride, nk, d_real, tid);
  cp_async_commit();

  const float scale_log2 = p.scale * kLog2e;
  const int g = lane >> 2, t = lane & 3;
  const int warp_row0 = m0 + warp * 16;  // this thread's rows: warp_row0 + g (+ 8)
  const float* sQ_warp = sQ + warp * 16 * kSQK;

  float acc_o[1][kNO][4];
#pragma unroll
  for (int i = 0; i < kNO; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc_o[0][i][j] = 0.f;
  float row_max[1][2] = {{kNegInf, kNegInf}}, row_sum[1][2] = {{0.f, 0.f}};

  for (int n_tile = 0; n_tile < num_n_tiles; ++n_tile) {
    const int buf = n_tile & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile n_tile landed; every warp is done with the other buffer
    if (n_tile + 1 < num_n_tiles) {
      const int n_next = (n_tile + 1) * kBlockN;
      flash_load_tile<float, kBlockN, kHeadDim, kSQK, Cfg::kThreads>(
          sK + (buf ^ 1) * kBlockN * kSQK, k + int64_t(n_next) * p.k_seq_stride, p.k_seq_stride, nk - n_next,
          d_real, tid);
      flash_load_tile<float, kBlockN, kHeadDim, kSV, Cfg::kThreads>(
          sV + (buf ^ 1) * kBlockN * kSV, v + int64_t(n_next) * p.v_seq_stride, p.v_seq_stride, nk - n_next,
          d_real, tid);
      cp_async_commit();
    }
    const float* sK_buf = sK + buf * kBlockN * kSQK;
    const float* sV_buf = sV + buf * kBlockN * kSV;

    // S = Q K^T, two k8 steps per 16 head-dim columns (the thread's 4 adjacent columns).
    // Each 32 columns sum in fresh accumulators, added to S with FADDs: the tensor cores'
    // accumulation truncates, and a running sum over all of D drifted by ~2^-24 a step.
    float acc_s[1][kNS][4];
#pragma unroll
    for (int kc = 0; kc < kHeadDim / 32; ++kc) {
      float part[kNS][4];
#pragma unroll
      for (int i = 0; i < kNS; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) part[i][j] = 0.f;
#pragma unroll
      for (int kp = 2 * kc; kp < 2 * kc + 2; ++kp) {
        const float4 q_lo = ld_shared_f4(sQ_warp + g * kSQK + kp * 16 + 4 * t);
        const float4 q_hi = ld_shared_f4(sQ_warp + (g + 8) * kSQK + kp * 16 + 4 * t);
        const float qa[2][4] = {{q_lo.x, q_hi.x, q_lo.y, q_hi.y}, {q_lo.z, q_hi.z, q_lo.w, q_hi.w}};
        uint32_t a_big[2][4], a_small[2][4];
        split_tf32_fragment(qa[0], a_big[0], a_small[0]);
        split_tf32_fragment(qa[1], a_big[1], a_small[1]);
#pragma unroll
        for (int nb = 0; nb < kNS; ++nb) {
          const float4 kv = ld_shared_f4(sK_buf + (nb * 8 + g) * kSQK + kp * 16 + 4 * t);
          const float kb[2][2] = {{kv.x, kv.y}, {kv.z, kv.w}};
#pragma unroll
          for (int s = 0; s < 2; ++s) mma_m16n8k8_3xtf32(part[nb], a_big[s], a_small[s], kb[s][0], kb[s][1]);
        }
      }
#pragma unroll
      for (int i = 0; i < kNS; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc_s[0][i][j] = kc == 0 ? part[i][j] : acc_s[0][i][j] + part[i][j];
    }

    flash_mma_softmax_step(acc_s, acc_o, row_max, row_sum, p, n_tile * kBlockN, m0, warp_row0, lane, scale_log2);

    // O += P V, one k8 step per 8 keys: P's A fragment is this thread's own S values of
    // keys 2t, 2t + 1 (split once); V rows 2t and 2t + 1, 16 bytes each per 32 columns
    // (four n-tiles). As for S, a tile's P V sums in fresh accumulators, added to O with
    // FADDs (a running O in the tensor cores drifted by ~2^-24 an mma over the keys).
    uint32_t p_big[kNS][4], p_small[kNS][4];
#pragma unroll
    for (int kb = 0; kb < kNS; ++kb) {
      const float pa[4] = {acc_s[0][kb][0], acc_s[0][kb][2], acc_s[0][kb][1], acc_s[0][kb][3]};
      split_tf32_fragment(pa, p_big[kb], p_small[kb]);
    }
#pragma unroll
    for (int grp = 0; grp < kHeadDim / 32; ++grp) {
      float part[4][4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int j = 0; j < 4; ++j) part[jj][j] = 0.f;
#pragma unroll
      for (int kb = 0; kb < kNS; ++kb) {
        const float* v0 = sV_buf + (kb * 8 + 2 * t) * kSV + 4 * g + grp * 32;
        const float4 x0 = ld_shared_f4(v0), x1 = ld_shared_f4(v0 + kSV);
        const float vb[4][2] = {{x0.x, x1.x}, {x0.y, x1.y}, {x0.z, x1.z}, {x0.w, x1.w}};
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) mma_m16n8k8_3xtf32(part[jj], p_big[kb], p_small[kb], vb[jj][0], vb[jj][1]);
      }
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc_o[0][grp * 4 + jj][j] += part[jj][j];
    }
  }

  // Normalise and store: n-tiles 4 grp .. 4 grp + 3 hold this thread's columns
  // 32 grp + 8t .. + 7 of rows g and g + 8 (c0 of each, then c1), two 16-byte stores a row.
  float inv[1][2];
  flash_mma_row_inverse(row_sum, inv);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp_row0 + g + 8 * r;
    if (row >= nq) continue;
    float* orow = o + int64_t(row) * d_real;
#pragma unroll
    for (int grp = 0; grp < kHeadDim / 32; ++grp) {
      const int col = grp * 32 + 8 * t;
      if (col >= d_real) continue;
      const float(&a)[4] = acc_o[0][grp * 4], (&b)[4] = acc_o[0][grp * 4 + 1];
      const float(&c)[4] = acc_o[0][grp * 4 + 2], (&d)[4] = acc_o[0][grp * 4 + 3];
      const float s = inv[0][r];
      *reinterpret_cast<float4*>(orow + col) =
          make_float4(a[2 * r] * s, b[2 * r] * s, c[2 * r] * s, d[2 * r] * s);
      *reinterpret_cast<float4*>(orow + col + 4) =
          make_float4(a[2 * r + 1] * s, b[2 * r + 1] * s, c[2 * r + 1] * s, d[2 * r + 1] * s);
    }
  }
}

template <typename Cfg>
cudaError_t launch_tf32x3(const AttentionParams& p, cudaStream_t stream) {
  auto kernel = flash_attention_fp32_tf32x3_kernel<Cfg>;
  cudaError_t err = set_dynamic_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.seq_len_q + Cfg::kBlockM - 1) / Cfg::kBlockM, p.num_q_heads, p.batch);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// Dev knob (dev_knob, common.cuh) for scripts/bench_attention_dev.py --fp32 and the tests:
// CUDA_LLM_OPS_FLASH_FP32_TILE=1 forces 4 warps (64 rows a CTA), 2 forces 8 warps (128 rows),
// 3 the compact tile of GPUs with 99 KB of shared memory a block.
int fp32_tile_variant() {
  static bool dev_mode = std::getenv("CUDA_LLM_OPS_FLASH_FP32_TILE") != nullptr;
  return dev_knob("CUDA_LLM_OPS_FLASH_FP32_TILE", dev_mode, 0);
}

template <int kHeadDim>
cudaError_t launch_tf32x3_bucket(const AttentionParams& p, cudaStream_t stream) {
  using Four = Tf32x3Default<kHeadDim>;
  using Eight = Tf32x3Config<kHeadDim, Four::kBlockN, 8>;
  // 8-key tiles (and 32 rows at D = 256) fit the 99 KB of sm_86/89/120 (54-79 KB).
  using Compact = Tf32x3Config<kHeadDim, 8, (kHeadDim > 192 ? 2 : 4)>;
  switch (fp32_tile_variant()) {
    case 1: return launch_tf32x3<Four>(p, stream);
    case 2: return launch_tf32x3<Eight>(p, stream);
    case 3: return launch_tf32x3<Compact>(p, stream);
    default: break;
  }
  const size_t smem = size_t(smem_budget_per_block());
  // From D = 128, 8 warps (128 rows a CTA, one CTA an SM) where they fit (D = 256 takes
  // 203 KB: Hopper): 1.22-1.29x 4 warps at D = 128 (whose 255 registers spill), 1.7-2x
  // at D = 256 (one 4-warp CTA an SM); at D <= 96 4 warps ran 1.00-1.04x (NOTES.md v7).
  if constexpr (kHeadDim >= 128) {
    if (smem >= Eight::kSmemBytes) return launch_tf32x3<Eight>(p, stream);
  }
  if (smem >= Four::kSmemBytes) return launch_tf32x3<Four>(p, stream);
  return launch_tf32x3<Compact>(p, stream);
}

}  // namespace

cudaError_t launch_flash_attention_fp32(const AttentionParams& p, cudaStream_t stream) {
  if (!attention_params_valid(p) || p.dtype != DType::kFloat32) return cudaErrorInvalidValue;
  const int d = p.head_dim;
  if (d <= 32) return launch_tf32x3_bucket<32>(p, stream);
  if (d <= 64) return launch_tf32x3_bucket<64>(p, stream);
  if (d <= 96) return launch_tf32x3_bucket<96>(p, stream);
  if (d <= 128) return launch_tf32x3_bucket<128>(p, stream);
  if (d <= 192) return launch_tf32x3_bucket<192>(p, stream);
  return launch_tf32x3_bucket<256>(p, stream);
}

}  // namespace cuda_llm_ops
