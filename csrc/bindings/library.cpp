// The cuda_llm_ops operator library. Each area (attention, gemm, decode,
// lightning) adds its schemas and CUDA kernels in its own binding file with
// TORCH_LIBRARY_FRAGMENT, so areas build in parallel and a partial build
// (CUDA_LLM_OPS_AREAS) still loads. This file owns the library itself and the
// Python module that importing cuda_llm_ops._C loads.
#include <Python.h>
#include <torch/library.h>

#include <string>

#ifndef CUDA_LLM_OPS_BUILD_AREAS
#define CUDA_LLM_OPS_BUILD_AREAS "unknown"
#endif

namespace {
std::string build_info() { return std::string("areas=") + CUDA_LLM_OPS_BUILD_AREAS; }
}  // namespace

TORCH_LIBRARY(cuda_llm_ops, m) {
  m.def("build_info() -> str", &build_info);
}

// An empty Python module: its only job is to load this library so the
// TORCH_LIBRARY blocks above and in the area files register their ops.
static struct PyModuleDef cuda_llm_ops_module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&cuda_llm_ops_module); }
