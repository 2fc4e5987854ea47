// Torch binding of the lightning attention decode kernel: schema, checks,
// launcher call. Two ops share one launcher:
//   lightning_attention_decode(q, k, v, kv, slope, out!, new_kv!)  kv is read only
//   lightning_attention_decode_inplace(q, k, v, kv!, slope, out!)   kv is updated
// so each schema says truthfully which tensors are written (torch.compile and
// opcheck rely on it). The Python wrapper picks one and allocates outputs.
// Checks go through CLO_CHECK (bindings/checks.h): messages are formatted only
// when a check fails, and never through iostreams.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <c10/macros/Macros.h>

#include <climits>
#include <cstdint>
#include <string>

#include "bindings/checks.h"
#include "lightning/lightning.h"

namespace cuda_llm_ops::binding {
namespace {

constexpr const char* kOp = "lightning_attention_decode";
constexpr int kMaxDim = cuda_llm_ops::lightning::kMaxHeadDim;

// The message is formatted only when the check fails.
#define LIGHTNING_REQUIRE(cond, name, what) CLO_CHECK(cond, kOp, ": ", name, " ", what)

// Checks every argument and launches; `in_place`: new_kv is kv itself (the in-place op, whose
// schema says kv is written; the other's says it is only read, so there new_kv must be apart).
void lightning_decode_checked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& kv,
                              const at::Tensor& slope, at::Tensor& out, at::Tensor& new_kv, bool in_place) {
  const at::Tensor* all[] = {&q, &k, &v, &kv, &slope, &out, &new_kv};
  const char* names[] = {"q", "k", "v", "kv", "slope", "out", "new_kv"};
  for (int i = 0; i < 7; ++i) {
    const at::Tensor& t = *all[i];
    LIGHTNING_REQUIRE(t.is_cuda(), names[i], "must be a CUDA tensor, got device " + t.device().str());
    LIGHTNING_REQUIRE(t.device() == q.device(), names[i],
                      "must be on q's device " + q.device().str() + ", got " + t.device().str());
    LIGHTNING_REQUIRE(t.is_contiguous(), names[i], "must be contiguous; call .contiguous() first");
  }
  const auto qt = q.scalar_type();
  LIGHTNING_REQUIRE(qt == at::kFloat || qt == at::kHalf || qt == at::kBFloat16, "q",
                    "must be float32, float16 or bfloat16, got " + concat(qt));
  LIGHTNING_REQUIRE(k.scalar_type() == qt && v.scalar_type() == qt && out.scalar_type() == qt, "k, v and out",
                    "must have q's dtype " + concat(qt) + ", got " + concat(k.scalar_type()) + ", " +
                        concat(v.scalar_type()) + ", " + concat(out.scalar_type()));
  LIGHTNING_REQUIRE(kv.scalar_type() == at::kFloat, "kv",
                    "must have dtype Float, got " + concat(kv.scalar_type()));
  LIGHTNING_REQUIRE(new_kv.scalar_type() == at::kFloat, "new_kv",
                    "must have dtype Float, got " + concat(new_kv.scalar_type()));
  LIGHTNING_REQUIRE(slope.scalar_type() == at::kFloat, "slope",
                    "must have dtype Float, got " + concat(slope.scalar_type()));
  LIGHTNING_REQUIRE(q.dim() == 4, "q", "must be 4-D [batch, heads, n, d], got shape " + concat(q.sizes()));
  LIGHTNING_REQUIRE(v.dim() == 4, "v", "must be 4-D [batch, heads, n, e], got shape " + concat(v.sizes()));
  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), d = q.size(3), e = v.size(3);
  LIGHTNING_REQUIRE(b >= 1 && h >= 1 && n >= 1 && d >= 1 && e >= 1, "q and v",
                    "must have no empty dimension, got " + concat(q.sizes()) + " and " + concat(v.sizes()));
  LIGHTNING_REQUIRE(d <= kMaxDim && e <= kMaxDim, "d and e",
                    "must be <= " + std::to_string(kMaxDim) + ", got d=" + std::to_string(d) +
                        " e=" + std::to_string(e));
  // The grid (one block per head and 32 state columns) and the token count are ints in the kernel.
  const int64_t blocks = b * h * ((e + cuda_llm_ops::lightning::kChunkCols - 1) / cuda_llm_ops::lightning::kChunkCols);
  LIGHTNING_REQUIRE(n <= INT_MAX && blocks <= INT_MAX, "q and v",
                    "must have n <= 2^31 - 1 and batch * heads * ceil(e / 32) <= 2^31 - 1 (one thread block each), "
                    "got n=" + std::to_string(n) + " and " + std::to_string(blocks) + " blocks");
  check_shape(k, kOp, "k", {b, h, n, d}, "[batch, heads, n, d]");
  check_shape(v, kOp, "v", {b, h, n, e}, "[batch, heads, n, e]");
  check_shape(out, kOp, "out", {b, h, n, e}, "[batch, heads, n, e]");
  check_shape(kv, kOp, "kv", {b, h, d, e}, "[batch, heads, d, e]");
  check_shape(new_kv, kOp, "new_kv", {b, h, d, e}, "[batch, heads, d, e]");
  const bool slope_ok =
      slope.numel() == h && (slope.dim() == 1 || (slope.dim() == 3 && slope.size(1) == 1 && slope.size(2) == 1));
  LIGHTNING_REQUIRE(slope_ok, "slope",
                    "must have shape [" + std::to_string(h) + ", 1, 1] or [" + std::to_string(h) + "], got " +
                        concat(slope.sizes()));
  for (int i = 0; i < 5; ++i) {
    LIGHTNING_REQUIRE(!ranges_overlap(out, *all[i]), "out", std::string("must not overlap ") + names[i]);
  }
  LIGHTNING_REQUIRE(!ranges_overlap(out, new_kv), "out", "must not overlap new_kv");
  for (int i : {0, 1, 2, 4}) {
    LIGHTNING_REQUIRE(!ranges_overlap(new_kv, *all[i]), "new_kv", std::string("must not overlap ") + names[i]);
  }
  LIGHTNING_REQUIRE(in_place || !ranges_overlap(new_kv, kv), "new_kv",
                    "must not overlap kv (for the state updated in place: lightning_attention_decode_inplace, or "
                    "new_kv=kv in the Python API)");

  const c10::cuda::CUDAGuard guard(q.device());
  const cudaError_t err = cuda_llm_ops::lightning::launch_lightning_attention_decode(
      q.data_ptr(), k.data_ptr(), v.data_ptr(), kv.data_ptr<float>(), slope.data_ptr<float>(), out.data_ptr(),
      new_kv.data_ptr<float>(), b, h, n, static_cast<int>(d), static_cast<int>(e), to_dtype(qt), current_stream(q));
  check_launch(err, "lightning_attention_decode");
}

void lightning_attention_decode(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& kv,
                                const at::Tensor& slope, at::Tensor& out, at::Tensor& new_kv) {
  lightning_decode_checked(q, k, v, kv, slope, out, new_kv, /*in_place=*/false);
}

void lightning_attention_decode_inplace(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& kv,
                                        const at::Tensor& slope, at::Tensor& out) {
  lightning_decode_checked(q, k, v, kv, slope, out, kv, /*in_place=*/true);
}

}  // namespace
}  // namespace cuda_llm_ops::binding

TORCH_LIBRARY_FRAGMENT(cuda_llm_ops, m) {
  m.def(
      "lightning_attention_decode(Tensor q, Tensor k, Tensor v, Tensor kv, Tensor slope, Tensor(a!) out, "
      "Tensor(b!) new_kv) -> ()");
  m.def(
      "lightning_attention_decode_inplace(Tensor q, Tensor k, Tensor v, Tensor(a!) kv, Tensor slope, "
      "Tensor(b!) out) -> ()");
}

TORCH_LIBRARY_IMPL(cuda_llm_ops, CUDA, m) {
  m.impl("lightning_attention_decode", &cuda_llm_ops::binding::lightning_attention_decode);
  m.impl("lightning_attention_decode_inplace", &cuda_llm_ops::binding::lightning_attention_decode_inplace);
}
