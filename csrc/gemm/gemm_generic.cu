// The general GEMM: any row strides and base alignments, element-wise loads
// through padded shared tiles (64x64x16, 256 threads, 4x4 per thread). It is
// the path for shapes whose rows cannot be read 16 bytes at a time (e.g. K or
// N not a multiple of 8 fp16 elements) and never the fast one. fp32
// accumulation for float types, int32 for int8 (exact).
#include <algorithm>
#include <type_traits>

#include "gemm/gemm_common.cuh"

namespace cuda_llm_ops::gemm {
namespace {

constexpr int kGenTile = 64, kGenBK = 16, kGenThreads = 256;

template <typename T> struct GenericAcc { using type = float; };
template <> struct GenericAcc<int8_t> { using type = int32_t; };

template <typename Tin> CLO_DEVICE typename GenericAcc<Tin>::type widen(Tin x) {
  if constexpr (std::is_same_v<Tin, int8_t>) return static_cast<int32_t>(x); else return to_float(x);
}

template <typename Tin, typename TOut>
__global__ void __launch_bounds__(kGenThreads) gemm_generic_kernel(const GemmKernelArgs args, int trans_a, int trans_b) {
  using Acc = typename GenericAcc<Tin>::type;
  __shared__ Acc As[kGenBK][kGenTile + 1];
  __shared__ Acc Bs[kGenBK][kGenTile + 1];
  const Tin* A = static_cast<const Tin*>(args.a);
  const Tin* B = static_cast<const Tin*>(args.b);
  const int M = args.M, N = args.N, K = args.K;
  // element strides of op(A) (m, k) and op(B) (k, n)
  const long long a_sm = trans_a ? 1 : args.lda, a_sk = trans_a ? args.lda : 1;
  const long long b_sk = trans_b ? 1 : args.ldb, b_sn = trans_b ? args.ldb : 1;
  const int tid = threadIdx.x, tm = tid / 16, tn = tid % 16;
  const int m_tiles = (M + kGenTile - 1) / kGenTile, n0 = blockIdx.x * kGenTile;
  // grid.y holds at most 65535 row tiles: a taller op(A) loops over the rest.
  for (int m_tile = blockIdx.y; m_tile < m_tiles; m_tile += gridDim.y) {
    const int m0 = m_tile * kGenTile;
    Acc acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += kGenBK) {
      for (int i = tid; i < kGenBK * kGenTile; i += kGenThreads) {
        // A: the m index runs fastest when A is stored transposed (coalesced either way for one layout).
        const int kk = trans_a ? i / kGenTile : i % kGenBK;
        const int mm = trans_a ? i % kGenTile : i / kGenBK;
        const int gm = m0 + mm, gk = k0 + kk;
        As[kk][mm] = (gm < M && gk < K) ? widen(A[gm * a_sm + gk * a_sk]) : Acc(0);
        const int kb = trans_b ? i % kGenBK : i / kGenTile;
        const int nn = trans_b ? i / kGenBK : i % kGenTile;
        const int gn = n0 + nn, gkb = k0 + kb;
        Bs[kb][nn] = (gn < N && gkb < K) ? widen(B[gkb * b_sk + gn * b_sn]) : Acc(0);
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kGenBK; ++kk) {
        Acc a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = As[kk][tm + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tn + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = m0 + tm + 16 * i;
      if (row >= M) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = n0 + tn + 16 * j;
        if (col >= N) continue;
        if constexpr (std::is_same_v<Tin, int8_t>) {
          store_one<int32_t>(args, row, col, acc[i][j]);  // exact: no alpha
        } else {
          store_one<TOut>(args, row, col, args.alpha * acc[i][j]);
        }
      }
    }
  }
}

template <typename Tin, typename TOut>
cudaError_t launch_generic(const GemmProblem& p, cudaStream_t stream) {
  const dim3 grid(div_ceil(p.N, kGenTile), std::min(div_ceil(p.M, kGenTile), 65535));
  gemm_generic_kernel<Tin, TOut><<<grid, kGenThreads, 0, stream>>>(make_kernel_args(p), p.trans_a, p.trans_b);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemm_generic(const GemmProblem& p, cudaStream_t stream) {
  switch (p.in_dtype) {
    case DType::kFloat32:
      return p.out_dtype == DType::kFloat32 ? launch_generic<float, float>(p, stream) : cudaErrorInvalidValue;
    case DType::kFloat16:
      return p.out_dtype == DType::kFloat32 ? launch_generic<__half, float>(p, stream)
                                            : launch_generic<__half, __half>(p, stream);
    case DType::kBFloat16:
      return p.out_dtype == DType::kFloat32 ? launch_generic<__nv_bfloat16, float>(p, stream)
                                            : launch_generic<__nv_bfloat16, __nv_bfloat16>(p, stream);
    case DType::kInt8:
      return p.out_dtype == DType::kInt32 && p.c == nullptr ? launch_generic<int8_t, int32_t>(p, stream)
                                                            : cudaErrorInvalidValue;
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cuda_llm_ops::gemm
