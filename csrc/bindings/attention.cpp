// Schemas and CUDA implementations of the prefill attention ops. The Python
// wrappers (cuda_llm_ops/attention.py) validate first with richer messages and
// resolve scale=0 to 1/sqrt(D); these checks keep a direct torch.ops call from
// reaching a kernel with inputs it would read out of bounds.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>

#include "attention/attention.h"
#include "bindings/checks.h"

namespace cuda_llm_ops::binding {
namespace {

void check_rows(const at::Tensor& t, const char* name) {
  const int64_t elem = t.element_size();
  bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int i = 0; i < 3; ++i) aligned = aligned && (t.stride(i) * elem) % 16 == 0;
  CLO_CHECK(t.stride(3) == 1 && aligned, name,
              " must have a contiguous last dimension and 16-byte aligned rows, got strides ", t.strides(),
              "; call .contiguous()");
}

AttentionParams make_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                            bool is_causal, const char* op) {
  check_dim(q, 4, "q", "[batch, num_q_heads, seq_len_q, head_dim]");
  check_dim(k, 4, "k", "[batch, num_kv_heads, seq_len_k, head_dim]");
  check_dim(v, 4, "v", "[batch, num_kv_heads, seq_len_k, head_dim]");
  check_cuda(q, "q");
  check_same_device(q, k, "q", "k");
  check_same_device(q, v, "q", "v");
  check_float_dtype(q, "q");
  check_dtype(k, q.scalar_type(), "k");
  check_dtype(v, q.scalar_type(), "v");
  CLO_CHECK(k.sizes() == v.sizes(), "k and v must have the same shape, got k ", k.sizes(), " and v ", v.sizes());
  CLO_CHECK(k.size(0) == q.size(0), "k batch size (dim 0) must match q's (", q.size(0), "), got ", k.size(0));
  CLO_CHECK(k.size(3) == q.size(3), "k head_dim (dim 3) must match q's (", q.size(3), "), got ", k.size(3));
  for (int i = 0; i < 4; ++i) {
    CLO_CHECK(q.size(i) > 0 && k.size(i) > 0, op, ": empty dimension, q ", q.sizes(), ", k ", k.sizes());
  }
  CLO_CHECK(q.size(1) % k.size(1) == 0, "q's number of heads (", q.size(1),
              ") must be a multiple of k/v's number of heads, got num_kv_heads=", k.size(1));
  const int64_t d = q.size(3);
  CLO_CHECK(d % 8 == 0 && d <= kAttentionMaxHeadDim, "head_dim must be a multiple of 8 between 8 and ",
              kAttentionMaxHeadDim, ", got ", d);
  CLO_CHECK(q.size(0) <= 65535 && q.size(1) <= 65535, op, ": batch and num_q_heads must be <= 65535, got ",
              q.sizes());
  CLO_CHECK(q.size(2) < (int64_t(1) << 31) && k.size(2) < (int64_t(1) << 31), op,
              ": sequence lengths must be < 2^31");
  check_rows(q, "q");
  check_rows(k, "k");
  check_rows(v, "v");

  AttentionParams p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(1), p.q_seq_stride = q.stride(2);
  p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(1), p.k_seq_stride = k.stride(2);
  p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(1), p.v_seq_stride = v.stride(2);
  p.batch = static_cast<int>(q.size(0));
  p.num_q_heads = static_cast<int>(q.size(1));
  p.num_kv_heads = static_cast<int>(k.size(1));
  p.seq_len_q = static_cast<int>(q.size(2));
  p.seq_len_k = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(d);
  p.scale = checked_softmax_scale(scale, op);
  p.is_causal = is_causal;
  p.dtype = to_dtype(q.scalar_type());
  return p;
}

// The CUDA-core kernels' shared memory against this GPU's (asked under the device guard).
void check_naive_smem(const AttentionParams& p) {
  const size_t need = naive_attention_smem_bytes(p.head_dim, p.seq_len_k);
  const int64_t allow = smem_budget_per_block();
  CLO_CHECK(need <= static_cast<size_t>(allow), "naive_attention keeps one fp32 score per key in shared memory: "
            "seq_len_k ", p.seq_len_k, " at head_dim ", p.head_dim, " needs ", need, " bytes per block, more than "
            "this GPU allows (", allow, " bytes: seq_len_k <= ", allow / 4 - 32 - p.head_dim,
            " here); use flash_attention");
}

void check_tiled_smem(const AttentionParams& p) {
  const size_t need = tiled_attention_smem_bytes(p.head_dim);
  const int64_t allow = smem_budget_per_block();
  CLO_CHECK(need <= static_cast<size_t>(allow), "tiled_attention at head_dim ", p.head_dim, " needs ", need,
            " bytes of shared memory per block, more than this GPU allows (", allow,
            " bytes); use flash_attention");
}

void no_smem_check(const AttentionParams&) {}  // flash_attention picks tiles that fit (or falls back)

template <cudaError_t (*Launch)(const AttentionParams&, cudaStream_t), void (*CheckSmem)(const AttentionParams&)>
at::Tensor run_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool is_causal,
                         const char* op) {
  AttentionParams p = make_params(q, k, v, scale, is_causal, op);
  const c10::cuda::CUDAGuard guard(q.device());
  CheckSmem(p);
  at::Tensor out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  p.o = out.data_ptr();
  check_launch(Launch(p, current_stream(q)), op);
  return out;
}

at::Tensor naive_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                           bool is_causal) {
  CLO_CHECK(k.dim() != 4 || k.size(2) <= kNaiveAttentionMaxSeqLenK,
              "naive_attention keeps one score row in shared memory and supports seq_len_k <= ",
              kNaiveAttentionMaxSeqLenK, " (NAIVE_MAX_SEQ_LEN_K), got ", k.size(2),
              "; use flash_attention for longer sequences");
  return run_attention<launch_naive_attention, check_naive_smem>(q, k, v, scale, is_causal, "naive_attention");
}

at::Tensor tiled_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                           bool is_causal) {
  return run_attention<launch_tiled_attention, check_tiled_smem>(q, k, v, scale, is_causal, "tiled_attention");
}

at::Tensor flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                           bool is_causal) {
  return run_attention<launch_flash_attention, no_smem_check>(q, k, v, scale, is_causal, "flash_attention");
}

}  // namespace
}  // namespace cuda_llm_ops::binding

TORCH_LIBRARY_FRAGMENT(cuda_llm_ops, m) {
  m.def("naive_attention(Tensor q, Tensor k, Tensor v, float scale, bool is_causal) -> Tensor");
  m.def("tiled_attention(Tensor q, Tensor k, Tensor v, float scale, bool is_causal) -> Tensor");
  m.def("flash_attention(Tensor q, Tensor k, Tensor v, float scale, bool is_causal) -> Tensor");
}

TORCH_LIBRARY_IMPL(cuda_llm_ops, CUDA, m) {
  m.impl("naive_attention", &cuda_llm_ops::binding::naive_attention);
  m.impl("tiled_attention", &cuda_llm_ops::binding::tiled_attention);
  m.impl("flash_attention", &cuda_llm_ops::binding::flash_attention);
}
