// Core types and helpers shared by every kernel. No torch here: launchers take
// raw pointers, plain sizes and a cudaStream_t, so .cu files compile fast and
// can be compile-checked on a machine without torch's CUDA headers.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#define CLO_HOST_DEVICE __host__ __device__ __forceinline__
#define CLO_DEVICE __device__ __forceinline__

namespace cuda_llm_ops {

// Element type of a tensor handed to a launcher. The binding layer maps torch's
// ScalarType onto this; kernels dispatch on it with dispatch_float_dtype below.
enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kInt8 = 3, kInt32 = 4, kFloat8E4M3 = 5 };

enum class Precision { FP32, FP16, BF16, INT8 };
enum class MatrixLayout { RowMajor, ColMajor, RowMajorPadded };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kInt32: return "int32";
    case DType::kFloat8E4M3: return "float8_e4m3fn";
  }
  return "unknown";
}

template <typename T>
CLO_HOST_DEVICE constexpr T div_ceil(T a, T b) { return (a + b - 1) / b; }

#ifdef __CUDACC__  // the binding layer includes this header from plain C++
// The 32-bit shared-state-space address of a pointer into shared memory (the operand
// of cp.async, ldmatrix, mbarrier and TMA instructions).
CLO_DEVICE uint32_t smem_u32addr(const void* ptr) { return static_cast<uint32_t>(__cvta_generic_to_shared(ptr)); }

// The GPU's ns clock (%globaltimer): dev stamps (CLO_DEV_STAMPS, the scripts/*_probe.cu
// probes) and wait watchdogs. The low 32 bits alone (a difference is exact up to 4.29 s)
// need one register, for callers that run with few (a TMA producer thread).
CLO_DEVICE unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
CLO_DEVICE uint32_t global_timer_lo_ns() {
  uint32_t t;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
  return t;
}
#endif

inline bool is_tensor_core_aligned(int dim, int alignment = 16) { return dim % alignment == 0; }

// Scalar conversions through float, the accumulation type of every kernel.
template <typename T> CLO_DEVICE float to_float(T x);
template <> CLO_DEVICE float to_float<float>(float x) { return x; }
template <> CLO_DEVICE float to_float<__half>(__half x) { return __half2float(x); }
template <> CLO_DEVICE float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> CLO_DEVICE T from_float(float x);
template <> CLO_DEVICE float from_float<float>(float x) { return x; }
template <> CLO_DEVICE __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> CLO_DEVICE __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Two floats packed into the 32-bit register pair type the tensor cores take.
template <typename T> CLO_DEVICE uint32_t pack_float2(float lo, float hi);
template <> CLO_DEVICE uint32_t pack_float2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <> CLO_DEVICE uint32_t pack_float2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// Runs `body.template operator()<T>()` with T the C++ type of a float dtype.
// Returns cudaErrorInvalidValue for a dtype the caller does not support, so a
// launcher never silently reinterprets memory.
template <typename F>
inline cudaError_t dispatch_float_dtype(DType dtype, F&& body) {
  switch (dtype) {
    case DType::kFloat32: return body.template operator()<float>();
    case DType::kFloat16: return body.template operator()<__half>();
    case DType::kBFloat16: return body.template operator()<__nv_bfloat16>();
    default: return cudaErrorInvalidValue;
  }
}

// A development knob's value (a kernel variant picked for side-by-side timing; not an
// API): `fallback` unless the variable was set when first asked for, then read again on
// every call so one process can switch (unset then: never read again, no getenv per call).
// Callers keep `dev_mode` in a static: `static bool dev_mode = std::getenv(name) != nullptr`.
inline int dev_knob(const char* name, bool& dev_mode, int fallback) {
  if (!dev_mode) return fallback;
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? std::atoi(s) : fallback;
}

// Raises a kernel's dynamic shared-memory limit when it needs more than the
// 48 KB default (Hopper allows up to 227 KB per block, Ampere 163 KB). Launchers call
// it before every launch; the attribute is per kernel and device, so the largest size
// set is remembered per (kernel, device) and only a larger one goes to the driver
// (cudaFuncSetAttribute costs host time on every call).
inline cudaError_t set_dynamic_smem_bytes(const void* kernel, int bytes) {
  int dev = 0;
  if (const cudaError_t err = cudaGetDevice(&dev); err != cudaSuccess) return err;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> largest_set;
  const std::lock_guard<std::mutex> lock(mutex);
  int& largest = largest_set[{kernel, dev}];
  if (largest >= bytes) return cudaSuccess;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) largest = bytes;
  return err;
}
template <typename Kernel>
inline cudaError_t set_dynamic_smem(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return set_dynamic_smem_bytes(reinterpret_cast<const void*>(kernel), static_cast<int>(bytes));
}

// The current device's slot in a per-device cache of 64 entries (the callers' static arrays;
// device 0's slot past them).
inline int current_device_slot() {
  int dev = 0;
  cudaGetDevice(&dev);
  return dev >= 0 && dev < 64 ? dev : 0;
}

// An attribute of the current device (at least 1), cached per device: kernel choices
// and split heuristics need them on every call, and the queries are slow. Not for
// attributes that can be 0 (a compute-capability minor version reads back as 1).
template <cudaDeviceAttr kAttr>
inline int cached_device_attribute() {
  static int cached[64] = {0};
  const int dev = current_device_slot();
  if (cached[dev] == 0) {
    int n = 0;
    cudaDeviceGetAttribute(&n, kAttr, dev);
    cached[dev] = n > 0 ? n : 1;
  }
  return cached[dev];
}
inline int device_sm_count() { return cached_device_attribute<cudaDevAttrMultiProcessorCount>(); }
inline int device_cc_major() { return cached_device_attribute<cudaDevAttrComputeCapabilityMajor>(); }
// Peak memory clock in kHz: 2.6 GHz on the H100 SXM (HBM3), 3.2 GHz on the H200 (HBM3e).
inline int device_memory_clock_khz() { return cached_device_attribute<cudaDevAttrMemoryClockRate>(); }
// Hopper parts with HBM3e (the H200 and GH200: sm_90, memory clock above 3 GHz), whose
// faster streams favour other choices than the H100's where measured (the L2 promotion of
// streamed maps, decode head pairs and pipeline depths). Other architectures (GDDR parts
// report clocks far above 3 GHz; Blackwell's HBM3e was never measured) keep the H100's.
inline bool device_is_hopper_hbm3e() { return device_cc_major() == 9 && device_memory_clock_khz() > 3000000; }
// Shared memory one block may opt in to: 227 KB on sm_90, 163 KB on sm_80/87, 99 KB on
// sm_86/89/120.
inline int device_smem_optin() { return cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(); }
// The shared memory per block the kernels plan for and the bindings check against: the
// device's opt-in limit, or less under the dev knob CLO_SMEM_LIMIT (bytes, read as dev_knob
// reads; 0 or unset: the device's), which tests a 99-KB GPU's choices and refusals on a larger one.
inline int smem_budget_per_block() {
  static bool dev_mode = std::getenv("CLO_SMEM_LIMIT") != nullptr;
  const int device = device_smem_optin(), knob = dev_knob("CLO_SMEM_LIMIT", dev_mode, 0);
  return knob > 0 && knob < device ? knob : device;
}

// Programmatic dependent launch (PDL, sm_90+). A kernel launched by launch_kernel with
// `pdl` set may be scheduled while the previous kernel of the stream is still running
// (once every block of that kernel has called pdl_launch_dependents or exited), so its
// launch and set-up overlap the previous kernel's tail. Such a kernel must call
// pdl_wait_primary() before its first access to global memory that an earlier kernel
// may write: griddepcontrol.wait returns once the previous grid has completed and its
// writes are visible. Both are no-ops below sm_90 and in a kernel launched without PDL.
CLO_DEVICE void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
CLO_DEVICE void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// A secondary's usual entry: wait for the previous grid, then let the next one be scheduled
// at once (its own wait holds it until this grid completes).
CLO_DEVICE void pdl_wait_then_release() {
  pdl_wait_primary();
  pdl_launch_dependents();
}
// Grids between one and 1.8 blocks per SM lose as PDL secondaries: the blocks waiting behind
// the previous kernel take the free slots of SMs still running it and land the grid unevenly
// (decode kernels 3-13%, csrc/decode/decode_internal.h; the GEMM skinny kernels 8%,
// csrc/gemm/NOTES.md "PDL"). Past the band the grid is two full waves either way.
inline bool grid_past_pdl_band(long long blocks, long long sms) { return blocks * 10 >= sms * 18; }

// 16 bytes read once (weights of a decode GEMV, a KV cache): kept out of L1, where the
// data a block re-reads (activations) stays.
CLO_DEVICE uint4 load_streaming_16(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

// Counts a block's finished part of shared work (split-KV decode, stream-K GEMM) and
// returns the count before it. Call from one thread after a barrier of the threads that
// wrote the part: the add releases their writes at gpu scope (cumulative through the
// barrier) and acquires those of every earlier arrival, so the block that sees the
// final count may read all the parts after its next barrier (the pattern of CUTLASS's
// semaphores). No block ever waits on another.
CLO_DEVICE int atomic_add_acq_rel_gpu(int* counter, int value) {
  int before;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(before) : "l"(counter), "r"(value) : "memory");
  return before;
}
// The same count split in three, for a block that counts into several counters at once:
// fence_acq_rel_gpu (release), then atomic_add_relaxed_gpu on each (independent round trips
// in flight together, where each acq_rel add would wait for the one before it), then
// fence_acq_rel_gpu again (acquire) where a count came out final.
CLO_DEVICE void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
CLO_DEVICE int atomic_add_relaxed_gpu(int* counter, int value) {
  int before;
  asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(before) : "l"(counter), "r"(value) : "memory");
  return before;
}

// The launch attribute that makes a launch a PDL secondary of the stream's previous kernel.
inline cudaLaunchAttribute pdl_launch_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when `pdl`
// (ignored by devices below sm_90, so callers pass device_cc_major() >= 9). Captured
// into a CUDA graph, the attribute becomes a programmatic edge.
template <typename... Params, typename... Args>
inline cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                 bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1] = {pdl_launch_attribute()};
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace cuda_llm_ops
