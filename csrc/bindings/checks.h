// Shared helpers of the binding layer: torch -> plain launcher parameters, and
// argument checks whose messages name the argument, the expected and the
// actual value. The Python wrappers validate first with richer messages; these
// checks keep a direct torch.ops call from ever reaching a kernel with inputs
// it would read out of bounds.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::binding {

// Error messages are built with std::to_string/snprintf, never with iostreams.
// On the GPU image torch is built with gcc-toolset-13 and this extension with
// the system gcc: formatting a number through an ostringstream inside this
// library (what TORCH_CHECK's c10::str does with extra arguments) crashed the
// process instead of raising (H100 machine, 2026-11-22), while a message passed
// as one finished std::string raises normally. So every check goes through
// CLO_CHECK, which hands TORCH_CHECK a single string.
namespace msg_detail {
inline void append(std::string& s, const char* v) { s += v ? v : "(null)"; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }
inline void append(std::string& s, char v) { s += v; }
inline void append(std::string& s, bool v) { s += v ? "true" : "false"; }
template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                           !std::is_same_v<T, char>, int> = 0>
inline void append(std::string& s, T v) { s += std::to_string(v); }
inline void append(std::string& s, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  s += buf;
}
inline void append(std::string& s, float v) { append(s, static_cast<double>(v)); }
inline void append(std::string& s, c10::IntArrayRef v) {
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  s += ']';
}
inline void append(std::string& s, at::ScalarType v) { s += c10::toString(v); }
inline void append(std::string& s, const c10::Device& v) { s += v.str(); }
}  // namespace msg_detail

template <typename... Args>
std::string concat(const Args&... args) {
  std::string s;
  (msg_detail::append(s, args), ...);
  return s;
}

#define CLO_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (C10_UNLIKELY(!(cond))) {                                                   \
      TORCH_CHECK(false, ::cuda_llm_ops::binding::concat(__VA_ARGS__));           \
    }                                                                              \
  } while (0)

// float32's smallest normal value (FLT_MIN). A factor the kernels multiply every score by
// (the softmax scale, FP8's k_scale folded in) or divide it by (a soft cap) is taken as a
// normal float32 whose product with log2(e) stays finite: at most kMaxScoreFactor.
constexpr float kMinNormalFloat = std::numeric_limits<float>::min();
constexpr float kMaxScoreFactor = std::numeric_limits<float>::max() / 2;
inline bool score_factor_ok(float x) { return x >= kMinNormalFloat && x <= kMaxScoreFactor; }

// The attention ops' raw schemas take the resolved softmax scale (the Python wrappers map 0 to
// 1/sqrt(head_dim)), so 0, a negative, infinite or NaN scale is a caller's bug, not a request.
// Checked as the float the kernels get: a double past float's range (or under its smallest
// subnormal) is inf (or 0) there.
inline float checked_softmax_scale(double scale, const char* op) {
  const float s = static_cast<float>(scale);
  CLO_CHECK(std::isfinite(s) && s > 0.0f, op,
            ": scale must be finite and > 0 as a float32 (the Python wrapper resolves 0 to 1/sqrt(head_dim)), got ",
            scale);
  CLO_CHECK(score_factor_ok(s), op,
            ": scale must be a normal float32 of at most 1.7e38 (the kernels take scale * log2(e)), got ", scale);
  return s;
}

inline DType to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kChar: return DType::kInt8;
    case at::kInt: return DType::kInt32;
    case at::kFloat8_e4m3fn: return DType::kFloat8E4M3;
    default: CLO_CHECK(false, "unsupported dtype ", t);
  }
}

inline std::string shape_str(const at::Tensor& t) { return concat(t.sizes()); }

inline void check_cuda(const at::Tensor& t, const char* name) {
  CLO_CHECK(t.is_cuda(), name, " must be a CUDA tensor, got device ", t.device());
}

inline void check_contiguous(const at::Tensor& t, const char* name) {
  CLO_CHECK(t.is_contiguous(), name, " must be contiguous (strides ", t.strides(), " for shape ", t.sizes(),
              "); call .contiguous() first");
}

inline void check_dim(const at::Tensor& t, int64_t dim, const char* name, const char* layout) {
  CLO_CHECK(t.dim() == dim, name, " must be ", dim, "-D ", layout, ", got ", t.dim(), "-D with shape ", t.sizes());
}

// "op: name must have shape [..] = layout, got [..]".
inline void check_shape(const at::Tensor& t, const char* op, const char* name, c10::IntArrayRef want,
                        const char* layout) {
  CLO_CHECK(t.sizes() == want, op, ": ", name, " must have shape ", want, " = ", layout, ", got ", t.sizes());
}

inline void check_dtype(const at::Tensor& t, at::ScalarType expected, const char* name) {
  CLO_CHECK(t.scalar_type() == expected, name, " must have dtype ", expected, ", got ", t.scalar_type());
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* name_a, const char* name_b) {
  CLO_CHECK(a.device() == b.device(), name_a, " and ", name_b, " must be on the same device, got ", a.device(),
              " and ", b.device());
}

inline void check_float_dtype(const at::Tensor& t, const char* name) {
  const auto s = t.scalar_type();
  CLO_CHECK(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, name,
              " must be float32, float16 or bfloat16, got ", s);
}

// Rows read 16 bytes at a time: contiguous last dim, 16-byte aligned rows.
inline void check_rows_aligned(const at::Tensor& t, const char* name) {
  const int64_t elem = t.element_size();
  CLO_CHECK(t.size(-1) * elem % 16 == 0, name, " rows must be a multiple of 16 bytes (head_dim ", t.size(-1),
              " x ", elem, " bytes), got ", t.size(-1) * elem);
  CLO_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, name,
              " must start at a 16-byte aligned address (a view at an odd element offset?), got offset ",
              reinterpret_cast<uintptr_t>(t.data_ptr()) % 16, " bytes");
  bool ok = t.stride(-1) == 1;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) ok = ok && (t.stride(i) * elem) % 16 == 0;
  CLO_CHECK(ok, name, " must have a contiguous last dimension and 16-byte aligned rows, got strides ",
              t.strides());
}

// The bytes from a tensor's first element to the end of its last: its size when contiguous
// (or a transpose of contiguous), more for a strided view (a q sliced from a fused qkv buffer
// spans the k and v columns between its rows).
inline int64_t span_bytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return (last + 1) * static_cast<int64_t>(t.element_size());
}

// Whether two tensors' spans (span_bytes) intersect: ranges_overlap's first test and its answer
// where the exact one does not apply.
inline bool spans_overlap(const at::Tensor& a, const at::Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  const int64_t na = span_bytes(a), nb = span_bytes(b);
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

// The dimensions of size > 1 of two views as levels of distinct strides, largest first, with
// each view's size there (1 where it has none); false where a view has two dims of one stride.
struct StrideLevel {
  int64_t stride, size_a, size_b;
};
inline bool stride_levels(const at::Tensor& a, const at::Tensor& b, c10::SmallVector<StrideLevel, 8>& levels) {
  for (const at::Tensor* t : {&a, &b}) {
    for (int64_t d = 0; d < t->dim(); ++d) {
      if (t->size(d) <= 1) continue;
      auto it = std::find_if(levels.begin(), levels.end(), [&](const StrideLevel& l) { return l.stride == t->stride(d); });
      if (it == levels.end()) it = levels.insert(levels.end(), StrideLevel{t->stride(d), 1, 1});
      int64_t& n = t == &a ? it->size_a : it->size_b;
      if (n != 1) return false;
      n = t->size(d);
    }
  }
  std::sort(levels.begin(), levels.end(), [](const StrideLevel& x, const StrideLevel& y) { return x.stride > y.stride; });
  return true;
}

// Whether offsets y - x = d (elements) exist with x in a's levels from `i` down, y in b's:
// at level i only a step difference k with d - k * stride within the spans below can serve
// (at most two where each stride holds the spans below it), each checked the same way a level lower.
inline bool levels_meet(const StrideLevel* lv, const int64_t* below_a, const int64_t* below_b, size_t n, size_t i,
                        int64_t d) {
  if (i == n) return d == 0;
  const auto floor_div = [](int64_t x, int64_t y) { return x / y - (x % y != 0 && (x < 0) != (y < 0)); };
  const int64_t s = lv[i].stride;
  const int64_t k_lo = std::max<int64_t>(-floor_div(-(d - below_b[i] + 1), s), 1 - lv[i].size_a);
  const int64_t k_hi = std::min<int64_t>(floor_div(d + below_a[i] - 1, s), lv[i].size_b - 1);
  for (int64_t k = k_lo; k <= k_hi; ++k)
    if (levels_meet(lv, below_a, below_b, n, i + 1, d - k * s)) return true;
  return false;
}

// Whether two tensors share an element, the test of every "must not overlap" check: no where
// their spans are apart; exact where each one's dimensions nest (in stride order, each stride
// at least the span of those below it, as elements_apart asks) and they start a whole number
// of equal-sized elements apart, so views of one buffer that interleave without sharing an
// element are apart (a fused projection's q / k / v views: per token [q heads | k heads |
// v heads], GPT-NeoX's per head [q | k | v], Bloom's [H, 3, D]); else by their spans.
inline bool ranges_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (!spans_overlap(a, b)) return false;
  const int64_t e = static_cast<int64_t>(a.element_size());
  const int64_t bytes = static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.data_ptr())) -
                        static_cast<int64_t>(reinterpret_cast<uintptr_t>(b.data_ptr()));
  c10::SmallVector<StrideLevel, 8> lv;
  if (static_cast<int64_t>(b.element_size()) != e || bytes % e != 0 || !stride_levels(a, b, lv)) return true;
  const size_t n = lv.size();
  c10::SmallVector<int64_t, 8> below_a(n), below_b(n);  // each view's span of the levels below i
  int64_t span_a = 1, span_b = 1;
  for (size_t i = n; i-- > 0;) {
    below_a[i] = span_a;
    below_b[i] = span_b;
    if (lv[i].stride < span_a || lv[i].stride < span_b) return true;  // not nested: the spans' answer
    span_a += lv[i].stride * (lv[i].size_a - 1);
    span_b += lv[i].stride * (lv[i].size_b - 1);
  }
  return levels_meet(lv.data(), below_a.data(), below_b.data(), n, 0, bytes / e);
}

// Whether each element of a tensor has its own memory: the dimensions of size > 1 in stride
// order, each stride at least the span of those below it. Refuses an expand()ed view (stride
// 0) and as_strided rows that overlap; every permutation, slice or narrow of a dense buffer
// passes (some interleaved as_strided layouts that share nothing, shape (2, 3) strides (3, 2),
// are refused too).
inline bool elements_apart(const at::Tensor& t) {
  if (t.numel() <= 1) return true;
  c10::SmallVector<std::pair<int64_t, int64_t>, 8> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

// A tensor the op writes: its elements apart (elements_apart), or several would be written at
// once and what lands is unspecified.
inline void check_elements_apart(const at::Tensor& t, const char* name) {
  CLO_CHECK(elements_apart(t), name,
            " is written and its elements must not share memory (an expand()ed or overlapping as_strided view), "
            "got strides ", t.strides(), " for shape ", t.sizes());
}

inline cudaStream_t current_stream(const at::Tensor& t) {
  return at::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// Turns a launcher's cudaError_t into a RuntimeError that names the op. A failed launch
// leaves its error pending (cudaGetLastError), where the next unrelated CUDA call in the
// process would report it: cleared here (a sticky error, a fault, stays: it cannot be).
inline void check_launch(cudaError_t err, const char* op) {
  if (err != cudaSuccess && cudaPeekAtLastError() == err) cudaGetLastError();  // ours, not an earlier one
  CLO_CHECK(err == cudaSuccess, op, ": CUDA launch failed: ", cudaGetErrorString(err));
}

}  // namespace cuda_llm_ops::binding
