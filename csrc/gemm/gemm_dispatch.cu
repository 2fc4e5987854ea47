// Family selection for every GEMM entry point: the skinny kernels for decode shapes
// (M <= 16: any float dtype, int8 with B [K, N] of >= 32 MiB; kAuto or kSkinny), SIMT fp32, mma.sync fp16/bf16
// and int8 (Ampere-style, sm_80+, also run on Hopper), the Hopper wgmma/TMA
// fp16/bf16/int8 family (cc 9.0 with the sm_90a build; tried first, falls back
// to mma.sync when it does not apply), and the generic kernel for
// rows that cannot be read 16 bytes at a time.
#include <cstdint>
#include <cstdlib>

#include "gemm/gemm.h"

namespace cuda_llm_ops::gemm {
namespace {

enum class Family { kSimtFp32, kMmaF16, kMmaBf16, kMmaInt8, kGeneric };

Family select_family(const GemmProblem& p, GemmVariant variant) {
  if (variant == GemmVariant::kGeneric || !gemm_vectorizable(p)) return Family::kGeneric;
  switch (p.in_dtype) {
    case DType::kFloat32: return Family::kSimtFp32;
    case DType::kFloat16: return Family::kMmaF16;
    case DType::kBFloat16: return Family::kMmaBf16;
    case DType::kInt8: return Family::kMmaInt8;
    default: return Family::kGeneric;
  }
}

}  // namespace

int gemm_pdl_mode() {
  static bool dev_mode = std::getenv("CLO_GEMM_PDL") != nullptr;
  return device_cc_major() >= 9 ? dev_knob("CLO_GEMM_PDL", dev_mode, kGemmPdlDecode) : kGemmPdlOff;
}

bool gemm_vectorizable(const GemmProblem& p) {
  const size_t elem = elem_size(p.in_dtype);
  const int64_t per_chunk = static_cast<int64_t>(16 / elem);
  const bool ptrs = reinterpret_cast<uintptr_t>(p.a) % 16 == 0 && reinterpret_cast<uintptr_t>(p.b) % 16 == 0;
  // Contiguous extents of the stored rows must be whole 16-byte chunks, so a
  // chunk at an edge is entirely inside or entirely outside the matrix.
  const int64_t a_row = p.trans_a ? p.M : p.K;
  const int64_t b_row = p.trans_b ? p.K : p.N;
  return ptrs && p.lda % per_chunk == 0 && p.ldb % per_chunk == 0 && a_row % per_chunk == 0 &&
         b_row % per_chunk == 0;
}

size_t gemm_workspace_bytes(const GemmProblem& p, GemmVariant variant) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return 0;
  if (variant == GemmVariant::kAuto && skinny_applicable(p)) {
    bool wgmma = false;
    const size_t wgmma_bytes = wgmma_skinny_workspace_bytes(p, &wgmma);
    return wgmma ? wgmma_bytes : skinny_workspace_bytes(p);
  }
  if (variant == GemmVariant::kSkinny) return skinny_workspace_bytes(p);
  if (p.in_dtype == DType::kInt8) return variant == GemmVariant::kAuto ? wgmma_int8_workspace_bytes(p) : 0;
  const bool tiles16 = p.in_dtype == DType::kFloat16 || p.in_dtype == DType::kBFloat16;
  if (tiles16 && variant == GemmVariant::kAuto && p.M > kSkinnyMaxM) {
    bool wgmma = false;  // batched decode on the skinny tile (launch_gemm)
    const size_t wgmma_bytes = wgmma_skinny_workspace_bytes(p, &wgmma);
    if (wgmma) return wgmma_bytes;
  }
  if (tiles16 && (variant == GemmVariant::kAuto || variant == GemmVariant::kWgmma || variant == GemmVariant::kWgmmaN128)) {
    return wgmma_workspace_bytes(p, variant);
  }
  return 0;
}

cudaError_t launch_gemm(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return cudaErrorInvalidValue;
  // An explicitly chosen tile kernel is never silently replaced by the generic one.
  if (variant != GemmVariant::kAuto && variant != GemmVariant::kGeneric && !gemm_vectorizable(p)) {
    return cudaErrorInvalidValue;
  }
  if (variant == GemmVariant::kSkinny) return launch_gemm_skinny(p, stream);
  if (variant == GemmVariant::kAuto && skinny_applicable(p)) {
    // Hopper: the wgmma family's skinny tile (NotSupported from it launched nothing).
    const cudaError_t err = launch_gemm_wgmma_skinny(p, stream);
    return err != cudaErrorNotSupported ? err : launch_gemm_skinny(p, stream);
  }
  switch (select_family(p, variant)) {
    case Family::kSimtFp32: return launch_gemm_fp32(p, variant, stream);
    case Family::kMmaF16:
    case Family::kMmaBf16: {
      // Hopper wgmma/TMA first (explicitly, or kAuto when it applies); NotSupported
      // from it launched nothing, and kAuto falls back to mma.sync.
      if (variant == GemmVariant::kWgmma || variant == GemmVariant::kWgmmaN128) {
        return launch_gemm_wgmma(p, variant, stream);
      }
      if (variant == GemmVariant::kAuto) {
        // Batched decode (16 < M <= kSkinnyWgmmaMaxM) on the skinny tile first.
        cudaError_t err = p.M > kSkinnyMaxM ? launch_gemm_wgmma_skinny(p, stream) : cudaErrorNotSupported;
        if (err != cudaErrorNotSupported) return err;
        err = launch_gemm_wgmma(p, variant, stream);
        if (err != cudaErrorNotSupported) return err;
      }
      return p.in_dtype == DType::kFloat16 ? launch_gemm_f16(p, variant, stream) : launch_gemm_bf16(p, variant, stream);
    }
    case Family::kMmaInt8: return launch_gemm_int8(p, variant, stream);
    case Family::kGeneric: return launch_gemm_generic(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda_llm_ops::gemm
