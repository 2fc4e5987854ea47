// GEMM ops: schemas, input checks, output allocation; kernels in csrc/gemm.
//
//   gemm(a, b, alpha, beta, trans_a, trans_b, c?)      fp32/fp16/bf16 -> input dtype
//   tensor_core_gemm(a, b, alpha, beta, c?)             fp16/bf16 -> fp32
//   tensor_core_gemm_int8(a, b)                         int8 -> int32 (b row-major [K,N] or b.t() of [N,K])
//   gemm_out(out, a, b, alpha, beta, trans_a, trans_b, c?), tensor_core_gemm_int8_out(out, a, b)
//        the same into a given out (may be c itself); out's dtype picks gemm's or tensor_core_gemm's epilogue
//   _gemm_variant(a, b, variant, out_fp32, trans_a, trans_b, alpha, beta, c?)   benchmark/test only: the
//        gemm with a chosen kernel: 0 auto, 1 large-tile pipelined, 2 large-tile unpipelined twin, 3 small
//        tile, 4 generic, 5/6 alternative tiles, 7/8 Hopper wgmma 128x256 / 128x128, 9 skinny (see
//        cuda_llm_ops.gemm._gemm_variant)
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <climits>
#include <cstdint>
#include <optional>

#include "bindings/checks.h"
#include "gemm/gemm.h"

namespace cuda_llm_ops::binding {
namespace {

using gemm::GemmProblem;
using gemm::GemmVariant;

constexpr int64_t kMaxGemmDim = int64_t(1) << 30;

void check_matrix(const at::Tensor& t, const char* name, const char* layout) {
  check_cuda(t, name);
  check_dim(t, 2, name, layout);
  CLO_CHECK(t.size(0) > 0 && t.size(1) > 0, name, " must have no empty dimension, got shape ", t.sizes());
  // 2^30, not 2^31 - 1: the kernels count tiles and k-steps in int (div_ceil(K, tile), k0 += tile),
  // which wrap for a dimension within a tile of 2^31 (a silent zero, or reads before the operand).
  CLO_CHECK(t.size(0) <= kMaxGemmDim && t.size(1) <= kMaxGemmDim, name, " dimensions must be <= 2^30 (",
            kMaxGemmDim, "), got shape ", t.sizes());
}

int compute_capability(const at::Tensor& t) {
  int major = 0, minor = 0;
  const int dev = t.device().index();
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor;
}

// The scratch gemm::launch_gemm(p, variant) uses (split-K partials of the skinny kernels and
// of the Hopper split last wave; int8's transposed B), allocated and set in p; an undefined
// tensor when it needs none. The caller keeps the tensor alive until the launch is queued.
at::Tensor allocate_workspace(GemmProblem& p, GemmVariant variant, const at::Tensor& like) {
  p.workspace_bytes = gemm::gemm_workspace_bytes(p, variant);
  if (p.workspace_bytes == 0) return {};
  at::Tensor workspace = at::empty({static_cast<int64_t>(p.workspace_bytes)}, like.options().dtype(at::kByte));
  p.workspace = workspace.data_ptr();
  return workspace;
}

// c or out: [M, N] of out_type, contiguous, on a's device.
void check_mn_operand(const char* op, const at::Tensor& t, const char* name, const at::Tensor& a, int64_t M,
                      int64_t N, at::ScalarType out_type) {
  check_cuda(t, name);
  check_same_device(t, a, name, "a");
  CLO_CHECK(t.scalar_type() == out_type, op, ": ", name, " must have dtype ", out_type, ", got ", t.scalar_type());
  CLO_CHECK(t.dim() == 2 && t.size(0) == M && t.size(1) == N, op, ": ", name, " must have shape [", M, ", ", N,
            "], got ", t.sizes());
  check_contiguous(t, name);
}

// The caller's output, apart from a and b (the kernels read them while tiles of D are
// written). It may be c itself (D = alpha*AB + beta*D): every epilogue reads C[i] and writes
// D[i] from the same thread, C before D.
void check_gemm_out(const char* op, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
                    const std::optional<at::Tensor>& c, int64_t M, int64_t N, at::ScalarType out_type) {
  check_mn_operand(op, out, "out", a, M, N, out_type);
  CLO_CHECK(!ranges_overlap(out, a), op, ": out must not overlap a");
  CLO_CHECK(!ranges_overlap(out, b), op, ": out must not overlap b");
  if (c.has_value()) {
    CLO_CHECK(out.data_ptr() == c->data_ptr() || !ranges_overlap(out, *c), op,
              ": out must be c itself or not overlap it");
  }
}

// Shared by gemm and tensor_core_gemm (and their out= forms): checks, output allocation
// (when `out` is not given), launch. Returns the output.
at::Tensor run_float_gemm(const char* op, const at::Tensor& a, const at::Tensor& b, double alpha, double beta,
                          bool trans_a, bool trans_b, const std::optional<at::Tensor>& c, at::ScalarType out_type,
                          GemmVariant variant, const std::optional<at::Tensor>& out = std::nullopt) {
  check_matrix(a, "a", trans_a ? "[K, M]" : "[M, K]");
  check_matrix(b, "b", trans_b ? "[N, K]" : "[K, N]");
  check_same_device(a, b, "a", "b");
  check_float_dtype(a, "a");
  check_dtype(b, a.scalar_type(), "b");
  check_contiguous(a, "a");
  check_contiguous(b, "b");
  const int64_t M = trans_a ? a.size(1) : a.size(0), K = trans_a ? a.size(0) : a.size(1);
  const int64_t Kb = trans_b ? b.size(1) : b.size(0), N = trans_b ? b.size(0) : b.size(1);
  CLO_CHECK(K == Kb, op, ": inner dimensions differ: op(a) is [", M, ", ", K, "] and op(b) is [", Kb, ", ", N,
              "] (a ", a.sizes(), " trans_a=", trans_a, ", b ", b.sizes(), " trans_b=", trans_b, ")");
  CLO_CHECK(variant != GemmVariant::kSkinny || (!trans_a && M <= gemm::kSkinnyMaxM), op,
            ": the skinny kernels take a stored [M, K] (trans_a=False) with M <= ", gemm::kSkinnyMaxM, ", got M=", M,
            " trans_a=", trans_a ? "true" : "false");
  CLO_CHECK(std::isfinite(static_cast<float>(alpha)) && std::isfinite(static_cast<float>(beta)), op,
            ": alpha and beta must be finite as float32, got ", alpha, " and ", beta);
  c10::cuda::CUDAGuard guard(a.device());
  if (c.has_value()) check_mn_operand(op, *c, "c", a, M, N, out_type);
  if (out.has_value()) check_gemm_out(op, *out, a, b, c, M, N, out_type);
  at::Tensor d = out.has_value() ? *out : at::empty({M, N}, a.options().dtype(out_type));
  GemmProblem p;
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  // beta = 0 does not read c (as BLAS): a NaN or an unset buffer there (out=c over torch.empty) stays out.
  p.c = c.has_value() && static_cast<float>(beta) != 0.0f ? c->data_ptr() : nullptr;
  p.d = d.data_ptr();
  p.M = static_cast<int>(M);
  p.N = static_cast<int>(N);
  p.K = static_cast<int>(K);
  p.lda = a.size(1);
  p.ldb = b.size(1);
  p.ldc = N;
  p.ldd = N;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.alpha = static_cast<float>(alpha);
  p.beta = static_cast<float>(beta);
  p.in_dtype = to_dtype(a.scalar_type());
  p.out_dtype = to_dtype(out_type);
  if (variant != GemmVariant::kAuto && variant != GemmVariant::kGeneric) {
    CLO_CHECK(gemm::gemm_vectorizable(p), op, ": the tile kernels need 16-byte aligned rows (K and N multiples "
                "of ", 16 / a.element_size(), " elements), got a ", a.sizes(), " and b ", b.sizes(),
                "; use variant 0 (auto) or 4 (generic)");
  }
  const at::Tensor workspace = allocate_workspace(p, variant, a);
  check_launch(gemm::launch_gemm(p, variant, current_stream(a)), op);
  return d;
}

at::Tensor gemm_cuda(const at::Tensor& a, const at::Tensor& b, double alpha, double beta, bool trans_a, bool trans_b,
                     const std::optional<at::Tensor>& c) {
  return run_float_gemm("gemm", a, b, alpha, beta, trans_a, trans_b, c, a.scalar_type(), GemmVariant::kAuto);
}

at::Tensor tensor_core_gemm_cuda(const at::Tensor& a, const at::Tensor& b, double alpha, double beta,
                                 const std::optional<at::Tensor>& c) {
  CLO_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
              "tensor_core_gemm: a must be float16 or bfloat16, got ", a.scalar_type());
  return run_float_gemm("tensor_core_gemm", a, b, alpha, beta, false, false, c, at::kFloat, GemmVariant::kAuto);
}

// gemm/tensor_core_gemm into a given out: its dtype picks the epilogue (a's dtype, or float32
// for float16/bfloat16 a, the tensor_core_gemm output).
void gemm_out_cuda(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha, double beta, bool trans_a,
                   bool trans_b, const std::optional<at::Tensor>& c) {
  check_float_dtype(a, "a");
  const auto out_type = out.scalar_type();
  CLO_CHECK(out_type == a.scalar_type() || (out_type == at::kFloat && a.scalar_type() != at::kFloat),
            "gemm_out: out must have a's dtype ", a.scalar_type(),
            (a.scalar_type() == at::kFloat ? "" : " or float32"), ", got ", out_type);
  run_float_gemm("gemm_out", a, b, alpha, beta, trans_a, trans_b, c, out_type, GemmVariant::kAuto, out);
}

at::Tensor run_int8_gemm(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& out) {
  check_matrix(a, "a", "[M, K]");
  check_matrix(b, "b", "[K, N]");
  check_same_device(a, b, "a", "b");
  check_dtype(a, at::kChar, "a");
  check_dtype(b, at::kChar, "b");
  check_contiguous(a, "a");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  CLO_CHECK(b.size(0) == K, "tensor_core_gemm_int8: inner dimensions differ: a is ", a.sizes(), " and b is ",
              b.sizes());
  // b row-major [K, N], or column-major (b = w.t() of a contiguous [N, K] w).
  const bool b_row_major = b.is_contiguous();
  CLO_CHECK(b_row_major || b.t().is_contiguous(),
              "b must be contiguous [K, N] or the transpose of a contiguous [N, K], got strides ", b.strides(),
              " for shape ", b.sizes());
  c10::cuda::CUDAGuard guard(a.device());
  const int cc = compute_capability(a);
  CLO_CHECK(cc >= 80, "tensor_core_gemm_int8 needs int8 tensor cores with mma.sync m16n8k32 "
              "(compute capability >= 8.0), got compute capability ", cc / 10, ".", cc % 10);
  if (out.has_value()) check_gemm_out("tensor_core_gemm_int8", *out, a, b, std::nullopt, M, N, at::kInt);
  at::Tensor d = out.has_value() ? *out : at::empty({M, N}, a.options().dtype(at::kInt));
  GemmProblem p;
  p.a = a.data_ptr();
  p.b = b.data_ptr();
  p.d = d.data_ptr();
  p.M = static_cast<int>(M);
  p.N = static_cast<int>(N);
  p.K = static_cast<int>(K);
  p.lda = K;
  p.trans_b = !b_row_major;  // stored [N, K]
  p.ldb = b_row_major ? N : K;
  p.ldd = N;
  p.in_dtype = DType::kInt8;
  p.out_dtype = DType::kInt32;
  const at::Tensor workspace = allocate_workspace(p, GemmVariant::kAuto, a);  // Hopper: B transposed, split-K
  check_launch(gemm::launch_gemm(p, GemmVariant::kAuto, current_stream(a)), "tensor_core_gemm_int8");
  return d;
}

at::Tensor tensor_core_gemm_int8_cuda(const at::Tensor& a, const at::Tensor& b) {
  return run_int8_gemm(a, b, std::nullopt);
}

void tensor_core_gemm_int8_out_cuda(at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  run_int8_gemm(a, b, out);
}

at::Tensor gemm_variant_cuda(const at::Tensor& a, const at::Tensor& b, int64_t variant, bool out_fp32, bool trans_a,
                             bool trans_b, double alpha, double beta, const std::optional<at::Tensor>& c) {
  CLO_CHECK(variant >= 0 && variant <= 9, "_gemm_variant: variant must be 0 (auto), 1 (pipelined), 2 (unpipelined), "
              "3 (small tile), 4 (generic), 5 (alt_a), 6 (alt_b), 7 (wgmma), 8 (wgmma_n128) or 9 (skinny), got ",
              variant);
  check_float_dtype(a, "a");
  const auto out_type = out_fp32 ? at::kFloat : a.scalar_type();
  if (variant == 7 || variant == 8) {
    CLO_CHECK(a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16,
              "_gemm_variant: the wgmma variants take float16 or bfloat16, got ", a.scalar_type());
    check_cuda(a, "a");
    c10::cuda::CUDAGuard guard(a.device());
    const int cc = compute_capability(a);
    CLO_CHECK(gemm::wgmma_family_available(), "_gemm_variant: the wgmma family needs a compute capability 9.0 "
              "device and a build for sm_90a (TORCH_CUDA_ARCH_LIST=9.0a), got compute capability ", cc / 10, ".",
              cc % 10);
  }
  return run_float_gemm("_gemm_variant", a, b, alpha, beta, trans_a, trans_b, c, out_type,
                        static_cast<GemmVariant>(variant));
}

}  // namespace
}  // namespace cuda_llm_ops::binding

TORCH_LIBRARY_FRAGMENT(cuda_llm_ops, m) {
  m.def("gemm(Tensor a, Tensor b, float alpha, float beta, bool trans_a, bool trans_b, Tensor? c) -> Tensor");
  m.def("tensor_core_gemm(Tensor a, Tensor b, float alpha, float beta, Tensor? c) -> Tensor");
  m.def("tensor_core_gemm_int8(Tensor a, Tensor b) -> Tensor");
  // out= forms: write the caller's tensor (no allocation: CUDA-graph and serving friendly).
  m.def("gemm_out(Tensor(a!) out, Tensor a, Tensor b, float alpha, float beta, bool trans_a, bool trans_b, "
        "Tensor? c) -> ()");
  m.def("tensor_core_gemm_int8_out(Tensor(a!) out, Tensor a, Tensor b) -> ()");
  m.def("_gemm_variant(Tensor a, Tensor b, int variant, bool out_fp32, bool trans_a=False, bool trans_b=False, "
        "float alpha=1.0, float beta=0.0, Tensor? c=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(cuda_llm_ops, CUDA, m) {
  m.impl("gemm", &cuda_llm_ops::binding::gemm_cuda);
  m.impl("tensor_core_gemm", &cuda_llm_ops::binding::tensor_core_gemm_cuda);
  m.impl("tensor_core_gemm_int8", &cuda_llm_ops::binding::tensor_core_gemm_int8_cuda);
  m.impl("gemm_out", &cuda_llm_ops::binding::gemm_out_cuda);
  m.impl("tensor_core_gemm_int8_out", &cuda_llm_ops::binding::tensor_core_gemm_int8_out_cuda);
  m.impl("_gemm_variant", &cuda_llm_ops::binding::gemm_variant_cuda);
}
