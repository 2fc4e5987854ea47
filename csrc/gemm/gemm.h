// GEMM launchers: D = alpha * op(A) @ op(B) + beta * C, plain parameters, no torch.
//
// Families (one .cu file each, so ninja compiles them in parallel):
//   gemm_fp32.cu          SIMT register-tiled SGEMM (cp.async multi-stage pipeline)
//   gemm_f16.cu/_bf16.cu  tensor-core mma.sync m16n8k16 + ldmatrix, fp32 accumulation
//   gemm_int8.cu          tensor-core mma.sync m16n8k32 s8 -> s32 (exact)
//   gemm_skinny.cu        decode shapes (M <= 16; int8: B [K, N] of >= 32 MiB): B streamed once, split-K over a block's warps
//   gemm_generic.cu       any strides / alignment (fallback when 16-byte loads are impossible)
//   gemm_wgmma_sm90*.cu   Hopper fp16/bf16 and int8: TMA + wgmma, warp-specialised (sm_90a build, cc 9.0)
//   gemm_dispatch.cu      picks a family per dtype and device (a Hopper wgmma family slots in there)
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_llm_ops/common.cuh"

namespace cuda_llm_ops::gemm {

// Which kernel of a family to run. kAuto picks by shape; the others exist so the
// benchmark can show what the pipeline and the tile shape are worth.
enum class GemmVariant : int {
  kAuto = 0,
  kPipelined = 1,    // large tile, multi-stage cp.async pipeline
  kUnpipelined = 2,  // the same large-tile kernel with one stage: load, wait, compute (fp16/bf16: NN only)
  kSmallTile = 3,    // small tile, pipelined (small or skinny problems)
  kGeneric = 4,      // the fallback (any strides), for tests
  kAltA = 5,         // benchmark-only alternative tile (per family, see its launcher)
  kAltB = 6,         // a second one
  kWgmma = 7,        // fp16/bf16 Hopper wgmma + TMA, 128x256x64 (sm_90a build on a cc 9.0 device only)
  kWgmmaN128 = 8,    // the same family, 128x128x64
  kSkinny = 9,       // the decode-shape kernels (M <= kSkinnyMaxM, A stored [M, K]); kAuto's choice there
};

// Stored matrices: A is [M, K] (or [K, M] with trans_a), B is [K, N] (or [N, K]
// with trans_b); lda/ldb are the row strides (elements) of the stored matrices,
// whose rows are contiguous. C (optional, beta) and D are [M, N] with row strides
// ldc/ldd, in out_dtype. Without c, beta is ignored.
struct GemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  int M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 0.f;
  DType in_dtype = DType::kFloat32;
  DType out_dtype = DType::kFloat32;  // fp32 in -> fp32; fp16/bf16 in -> same or fp32; int8 -> int32
  // Scratch for kernels that split K across blocks (the skinny family, the Hopper family's
  // split last wave); sized by gemm_workspace_bytes. Without it those kernels do not split.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
#ifdef CLO_DEV_STAMPS
  unsigned long long* dev_stamps = nullptr;  // dev probe builds: [CTAs][kGemmDevStamps] (the skinny tile)
#endif
};

// Kernel-side view of a problem (passed by value to every kernel).
struct GemmKernelArgs {
  const void* a;
  const void* b;
  const void* c;
  void* d;
  int M, N, K;
  long long lda, ldb, ldc, ldd;
  float alpha, beta;
  int has_c;
  int out_f32;  // tensor-core fp16/bf16 kernels: write fp32 (1) or the input type (0)
  int pair_ok;  // 2-element vector stores/loads of D and C are aligned
#ifdef CLO_DEV_STAMPS
  unsigned long long* dev_stamps;
#endif
};
#ifdef CLO_DEV_STAMPS
// Per CTA of the skinny tile (scripts/skinny_stream_probe.cu): %globaltimer at entry, first
// stage landed, last k-tile retired, exit; ns inside the mainloops; ns in stream-K fixups.
constexpr int kGemmDevStamps = 6;
#endif

inline GemmKernelArgs make_kernel_args(const GemmProblem& p) {
  GemmKernelArgs k{};
  k.a = p.a; k.b = p.b; k.c = p.c; k.d = p.d;
  k.M = p.M; k.N = p.N; k.K = p.K;
  k.lda = p.lda; k.ldb = p.ldb; k.ldc = p.ldc; k.ldd = p.ldd;
  k.alpha = p.alpha; k.beta = p.beta;
#ifdef CLO_DEV_STAMPS
  k.dev_stamps = p.dev_stamps;
#endif
  k.has_c = p.c != nullptr;
  k.out_f32 = p.out_dtype == DType::kFloat32;
  const size_t out_elem = (p.out_dtype == DType::kFloat16 || p.out_dtype == DType::kBFloat16) ? 2 : 4;
  const bool d_ok = p.ldd % 2 == 0 && reinterpret_cast<uintptr_t>(p.d) % (2 * out_elem) == 0;
  const bool c_ok = p.c == nullptr || (p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.c) % (2 * out_elem) == 0);
  k.pair_ok = d_ok && c_ok;
  return k;
}

// True when every row of A and B can be read 16 bytes at a time (aligned base
// pointers and row strides): the condition of the cp.async tile kernels. Edges
// in M, N, K are handled inside those kernels; this is about alignment only.
// Bytes per element of a GEMM operand or output dtype.
inline size_t elem_size(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt8: return 1;
    default: return 4;
  }
}

bool gemm_vectorizable(const GemmProblem& p);

// The entry point: validates nothing torch-level (the binding did), picks a
// family and a kernel, launches on `stream`. Returns cudaErrorInvalidValue for
// a combination no kernel supports (e.g. kUnpipelined with a transposed input),
// otherwise the launch status.
cudaError_t launch_gemm(const GemmProblem& p, GemmVariant variant, cudaStream_t stream);
// Bytes of GemmProblem::workspace launch_gemm(p, variant) uses (0: none); the binding
// allocates them. Counters in it are reset by the launch itself.
size_t gemm_workspace_bytes(const GemmProblem& p, GemmVariant variant);

// Families (called by launch_gemm; each returns cudaErrorInvalidValue when the
// problem is outside what it handles).
cudaError_t launch_gemm_fp32(const GemmProblem& p, GemmVariant variant, cudaStream_t stream);
cudaError_t launch_gemm_f16(const GemmProblem& p, GemmVariant variant, cudaStream_t stream);
cudaError_t launch_gemm_bf16(const GemmProblem& p, GemmVariant variant, cudaStream_t stream);
cudaError_t launch_gemm_int8(const GemmProblem& p, GemmVariant variant, cudaStream_t stream);
cudaError_t launch_gemm_generic(const GemmProblem& p, cudaStream_t stream);

// Which GEMM launches are PDL secondaries of the stream's previous kernel (sm_90: their
// start-up overlaps its tail; each kernel waits for it before its first global access).
// kGemmPdlDecode (default): where it measured to pay (NOTES.md "PDL"): the Hopper family's
// skinny tile (at most one CTA per SM) except in token tiles of units above 64 rows, and the
// 16-bit skinny kernels on grids of at most one block per SM or at least 1.8 (gemm_skinny_pdl_pays);
// kGemmPdlAll: every kernel of both families, with no exception. Dev knob
// CLO_GEMM_PDL (0, 1, 2; common.cuh dev_knob).
constexpr int kGemmPdlOff = 0, kGemmPdlDecode = 1, kGemmPdlAll = 2;
int gemm_pdl_mode();
// Outside common.cuh's band (1x12288x4096 with b [K, N], 192 blocks: 37.8 -> 40.9 us with PDL).
inline bool gemm_skinny_pdl_pays(long long blocks, long long sms) { return blocks <= sms || grid_past_pdl_band(blocks, sms); }

// Skinny family (gemm_skinny.cu): fp32/fp16/bf16, and int8 -> int32 with B stored [K, N] of at
// least 32 MiB (dev knob CLO_GEMM_INT8_SKINNY: 0 no int8, 2 any size), with M <= kSkinnyMaxM, A
// not transposed, 16-byte aligned rows; launch_gemm_skinny returns cudaErrorInvalidValue otherwise.
constexpr int kSkinnyMaxM = 16;
bool skinny_applicable(const GemmProblem& p);
// Bytes of GemmProblem::workspace the skinny kernels use for p (0: no split along K).
size_t skinny_workspace_bytes(const GemmProblem& p);
cudaError_t launch_gemm_skinny(const GemmProblem& p, cudaStream_t stream);

// Hopper family. launch_gemm_wgmma returns cudaErrorNotSupported (launching nothing)
// when it does not apply: not a cc 9.0 device running the sm_90a build, not
// fp16/bf16 (or int8 with B stored [N, K]), rows TMA cannot describe, or (kAuto) too few
// tiles for a wave.
bool wgmma_family_available();
bool wgmma_applicable(const GemmProblem& p);
cudaError_t launch_gemm_wgmma(const GemmProblem& p, GemmVariant variant, cudaStream_t stream);
// Bytes of workspace the family's split last wave uses for p (0: no split).
size_t wgmma_workspace_bytes(const GemmProblem& p, GemmVariant variant);
// Decode shapes on the family's skinny tile (swapped operands: the weight streams as the
// 64-row wgmma operand, whole units or stream-K): 16-bit, A [M, K], M <= kSkinnyMaxM where
// skinny_applicable (and the rule in wgmma_skinny_applies picks it over the skinny kernels),
// and batched decode up to kSkinnyWgmmaMaxM rows of A (above 128 in token tiles, or 16-bit up to
// 192 rows in one tile 192 wide where its units go whole), which
// the 128-row tiles would leave on a few SMs; cudaErrorNotSupported when it does not apply.
constexpr int kSkinnyWgmmaMaxM = 256;
bool wgmma_skinny_applies(const GemmProblem& p);
cudaError_t launch_gemm_wgmma_skinny(const GemmProblem& p, cudaStream_t stream);
// Its workspace (0 also where it does not apply: `applies` tells the two apart).
size_t wgmma_skinny_workspace_bytes(const GemmProblem& p, bool* applies = nullptr);
// int8 -> int32 on the family (A [M, K], no C): B stored [N, K] directly (decode and, by its
// rule, batched decode up to 256 rows on the skinny tile, wgmma_skinny_tile; elsewhere on
// 256-wide tiles, a grid of a quarter wave or less split along K, and up to 128 rows a few
// tiles only past 32 rows where that split runs), B stored [K, N] through a
// transposed copy in the workspace (not for M <= 128, nor up to 256 rows for weights over 32 MiB);
// cudaErrorNotSupported (nothing launched) where it does not apply or the workspace is
// missing. The workspace: the copy, then the split-K scratch.
cudaError_t launch_gemm_wgmma_int8(const GemmProblem& p, cudaStream_t stream);
size_t wgmma_int8_workspace_bytes(const GemmProblem& p);

}  // namespace cuda_llm_ops::gemm
