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
#include <cuda_runtime.h>

#include <sstream>
#include <string>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::binding {

inline DType to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kChar: return DType::kInt8;
    case at::kInt: return DType::kInt32;
    default: TORCH_CHECK(false, "unsupported dtype ", t);
  }
}

inline std::string shape_str(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

inline void check_cuda(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor, got device ", t.device());
}

inline void check_contiguous(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous (strides ", t.strides(), " for shape ", t.sizes(),
              "); call .contiguous() first");
}

inline void check_dim(const at::Tensor& t, int64_t dim, const char* name, const char* layout) {
  TORCH_CHECK(t.dim() == dim, name, " must be ", dim, "-D ", layout, ", got ", t.dim(), "-D with shape ", t.sizes());
}

inline void check_dtype(const at::Tensor& t, at::ScalarType expected, const char* name) {
  TORCH_CHECK(t.scalar_type() == expected, name, " must have dtype ", expected, ", got ", t.scalar_type());
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* name_a, const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), name_a, " and ", name_b, " must be on the same device, got ", a.device(),
              " and ", b.device());
}

inline void check_float_dtype(const at::Tensor& t, const char* name) {
  const auto s = t.scalar_type();
  TORCH_CHECK(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, name,
              " must be float32, float16 or bfloat16, got ", s);
}

inline cudaStream_t current_stream(const at::Tensor& t) {
  return at::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// Turns a launcher's cudaError_t into a RuntimeError that names the op.
inline void check_launch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA launch failed: ", cudaGetErrorString(err));
}

}  // namespace cuda_llm_ops::binding
