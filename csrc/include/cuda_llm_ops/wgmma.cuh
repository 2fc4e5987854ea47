// Hopper warpgroup MMA (wgmma.mma_async, sm_90a): shared-memory matrix
// descriptors, the fence / commit / wait protocol, register reallocation
// (setmaxnreg), m64nNk16 fp16/bf16 -> fp32 and m64nNk32 int8 -> int32 wrappers.
//
// Every instruction here exists only on sm_90a; outside it the functions compile
// to nothing, so callers guard their code paths with __CUDA_ARCH_FEAT_SM90_ALL
// (and a host-side check) and the header still builds for sm_80.
//
// Accumulator layout of m64nNk16 (fp32, per thread of the warpgroup, N/2 floats):
// warp w (0..3) owns rows 16w..16w+15; with g = lane/4, t = lane%4, element
// d[4j + 2h + e] is row 16w + g + 8h, column 8j + 2t + e (the mma.sync m16n8
// fragment repeated over the N/8 column tiles).
#pragma once

#include "cuda_llm_ops/common.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CLO_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define CLO_WGMMA_ASM(...) do { } while (0)
#endif

namespace cuda_llm_ops::wgmma {

// Shared-memory matrix descriptor with the 128-byte swizzle (the pattern TMA's
// CU_TENSOR_MAP_SWIZZLE_128B writes: 16-byte chunk index XOR (row % 8) within
// 1024-byte atoms of 8 rows x 128 bytes; atoms must be 1024-byte aligned).
//  K-major operand (rows of 64 k-elements, 128 B):  lbo unused (16), sbo = 1024
//      (next group of 8 rows); the k16 step advances the start by 32 bytes.
//  MN-major operand (rows of 64 m/n-elements per k): lbo = byte stride between
//      64-element m/n chunks, sbo = 1024 (next 8 k-rows); the k16 step advances
//      the start by 16 rows = 2048 bytes.
// Layout type (bits 62-63): 1 the 128-byte swizzle, 2 the 64-byte one.
CLO_DEVICE uint64_t make_desc_swizzled(uint32_t smem_byte_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                       uint64_t layout) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_byte_addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  desc |= layout << 62;
  return desc;
}
CLO_DEVICE uint64_t make_desc_sw128(uint32_t smem_byte_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return make_desc_swizzled(smem_byte_addr, lbo_bytes, sbo_bytes, 1);
}
// The 64-byte swizzle (TMA's CU_TENSOR_MAP_SWIZZLE_64B: 16-byte chunk index XOR bits 7-8 of
// the address, within 512-byte atoms of 8 rows x 64 bytes, 512-byte aligned). MN-major
// operand (rows of 32 m/n-elements per k): lbo = byte stride between 32-element m/n blocks,
// sbo = 512 (next 8 k-rows); the k16 step advances the start by 16 rows = 1024 bytes.
CLO_DEVICE uint64_t make_desc_sw64(uint32_t smem_byte_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return make_desc_swizzled(smem_byte_addr, lbo_bytes, sbo_bytes, 2);
}

// The descriptor of the operand `bytes` further on in shared memory: the start address
// field (bits 0-13, address / 16) grows by bytes / 16 and cannot carry out (shared
// memory ends below 2^18 bytes). Building each k-step's descriptor from the address
// instead cost ~15 integer instructions per wgmma (attention/NOTES.md v9).
CLO_DEVICE uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// Orders this thread's prior register accesses (accumulators) before the next wgmma.
CLO_DEVICE void fence() { CLO_WGMMA_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
CLO_DEVICE void commit_group() { CLO_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are pending.
template <int N>
CLO_DEVICE void wait_group() {
  CLO_WGMMA_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Register reallocation between warpgroups (needs a register cap at entry:
// __launch_bounds__(threads, 1)); every warp of the warpgroup executes it.
template <int Regs>
CLO_DEVICE void setmaxnreg_dec() {
  CLO_WGMMA_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
template <int Regs>
CLO_DEVICE void setmaxnreg_inc() {
  CLO_WGMMA_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

template <typename T>
struct WgmmaTag {};

// The accumulator operands of m64nNk16 (R = N / 2 fp32 registers per thread): the
// register list of the PTX text and the matching asm operand list, for each R used.
#define CLO_WGMMA_D_REGS_8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define CLO_WGMMA_SS_TAIL_8 ", %8, %9, %12, 1, 1, %10, %11;\n"
#define CLO_WGMMA_RS_TAIL_8 ", {%8, %9, %10, %11}, %12, 1, 1, 1, %13;\n"
#define CLO_WGMMA_D_REGS_16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define CLO_WGMMA_SS_TAIL_16 ", %16, %17, %20, 1, 1, %18, %19;\n"
#define CLO_WGMMA_D_REGS_32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define CLO_WGMMA_SS_TAIL_32 ", %32, %33, %36, 1, 1, %34, %35;\n"
#define CLO_WGMMA_RS_TAIL_32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"
#define CLO_WGMMA_D_REGS_48 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define CLO_WGMMA_SS_TAIL_48 ", %48, %49, %52, 1, 1, %50, %51;\n"
#define CLO_WGMMA_RS_TAIL_48 ", {%48, %49, %50, %51}, %52, 1, 1, 1, %53;\n"
#define CLO_WGMMA_D_REGS_96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define CLO_WGMMA_SS_TAIL_96 ", %96, %97, %100, 1, 1, %98, %99;\n"
#define CLO_WGMMA_RS_TAIL_96 ", {%96, %97, %98, %99}, %100, 1, 1, 1, %101;\n"
#define CLO_WGMMA_D_REGS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define CLO_WGMMA_SS_TAIL_64 ", %64, %65, %68, 1, 1, %66, %67;\n"
#define CLO_WGMMA_RS_TAIL_64 ", {%64, %65, %66, %67}, %68, 1, 1, 1, %69;\n"
#define CLO_WGMMA_D_REGS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define CLO_WGMMA_SS_TAIL_128 ", %128, %129, %132, 1, 1, %130, %131;\n"
#define CLO_WGMMA_RS_TAIL_128 ", {%128, %129, %130, %131}, %132, 1, 1, 1, %133;\n"
#define CLO_WGMMA_ACC4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CLO_WGMMA_ACC16(i) CLO_WGMMA_ACC4(i), CLO_WGMMA_ACC4(i + 4), CLO_WGMMA_ACC4(i + 8), CLO_WGMMA_ACC4(i + 12)
#define CLO_WGMMA_D_OPS_8 CLO_WGMMA_ACC4(0), CLO_WGMMA_ACC4(4)
#define CLO_WGMMA_D_OPS_16 CLO_WGMMA_ACC16(0)
#define CLO_WGMMA_D_OPS_32 CLO_WGMMA_ACC16(0), CLO_WGMMA_ACC16(16)
#define CLO_WGMMA_D_OPS_48 CLO_WGMMA_D_OPS_32, CLO_WGMMA_ACC16(32)
#define CLO_WGMMA_D_OPS_64 CLO_WGMMA_D_OPS_32, CLO_WGMMA_ACC16(32), CLO_WGMMA_ACC16(48)
#define CLO_WGMMA_D_OPS_96 CLO_WGMMA_D_OPS_64, CLO_WGMMA_ACC16(64), CLO_WGMMA_ACC16(80)
#define CLO_WGMMA_D_OPS_128 CLO_WGMMA_D_OPS_64, CLO_WGMMA_ACC16(64), CLO_WGMMA_ACC16(80), CLO_WGMMA_ACC16(96), CLO_WGMMA_ACC16(112)

// wgmma_m64n<N>k16<TransA, TransB, Accumulate>(tag, d, desc_a, desc_b): D (+)= A * B with A,
// B from shared memory (descriptors); TransA / TransB = 1 for an M-major A / N-major B
// (fp16/bf16 only). Accumulate (scale-d) 1: D += A * B, the caller zeroes D first; 0: D =
// A * B, with no instruction writing D before it (a zeroing that lands while another wgmma
// is in flight makes ptxas serialize every wgmma of the function).
#define CLO_DEFINE_WGMMA_SS(N, R, TYPE, PTX)                                                          \
  template <int TransA, int TransB, int Accumulate = 1>                                               \
  CLO_DEVICE void wgmma_m64n##N##k16(WgmmaTag<TYPE>, float (&d)[R], uint64_t desc_a, uint64_t desc_b) { \
    CLO_WGMMA_ASM("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " CLO_WGMMA_D_REGS_##R    \
                      CLO_WGMMA_SS_TAIL_##R                                                         \
                  : CLO_WGMMA_D_OPS_##R                                                             \
                  : "l"(desc_a), "l"(desc_b), "n"(TransA), "n"(TransB), "n"(Accumulate));           \
  }

// wgmma_m64n<N>k16_rs<TransB>(tag, d, a0..a3, desc_b): D += A * B with A from registers
// (4 x 32 bits per thread: the m64k16 A fragment, per warp the mma.sync m16k16 A layout
// over the warp's 16 rows, so an fp32 accumulator of an earlier wgmma re-packs into it
// without a shuffle) and B from shared memory. scale-d is 1, as above.
#define CLO_DEFINE_WGMMA_RS(N, R, TYPE, PTX)                                                          \
  template <int TransB>                                                                               \
  CLO_DEVICE void wgmma_m64n##N##k16_rs(WgmmaTag<TYPE>, float (&d)[R], uint32_t a0, uint32_t a1,       \
                                        uint32_t a2, uint32_t a3, uint64_t desc_b) {                  \
    CLO_WGMMA_ASM("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " CLO_WGMMA_D_REGS_##R    \
                      CLO_WGMMA_RS_TAIL_##R                                                         \
                  : CLO_WGMMA_D_OPS_##R                                                             \
                  : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "n"(TransB));                  \
  }

CLO_DEFINE_WGMMA_SS(16, 8, __half, "f16")
CLO_DEFINE_WGMMA_SS(16, 8, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_SS(32, 16, __half, "f16")
CLO_DEFINE_WGMMA_SS(32, 16, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_SS(64, 32, __half, "f16")
CLO_DEFINE_WGMMA_SS(64, 32, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_SS(96, 48, __half, "f16")
CLO_DEFINE_WGMMA_SS(96, 48, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_SS(128, 64, __half, "f16")
CLO_DEFINE_WGMMA_SS(128, 64, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_SS(192, 96, __half, "f16")
CLO_DEFINE_WGMMA_SS(192, 96, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_SS(256, 128, __half, "f16")
CLO_DEFINE_WGMMA_SS(256, 128, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_RS(64, 32, __half, "f16")
CLO_DEFINE_WGMMA_RS(64, 32, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_RS(128, 64, __half, "f16")
CLO_DEFINE_WGMMA_RS(128, 64, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_RS(192, 96, __half, "f16")
CLO_DEFINE_WGMMA_RS(192, 96, __nv_bfloat16, "bf16")
CLO_DEFINE_WGMMA_RS(256, 128, __half, "f16")
CLO_DEFINE_WGMMA_RS(256, 128, __nv_bfloat16, "bf16")

// wgmma_m64n<N>k32_s8(d, desc_a, desc_b): D += A * B, int8 x int8 -> int32 (exact, wrapping
// like any int32 sum), A and B from shared memory. 8-bit wgmma has no transpose: both
// operands K-major (rows of 128 k-elements, 128 B; the k32 step advances the start by 32
// bytes, as the 16-bit k16 step does). The accumulator layout is the fp32 one above.
#define CLO_WGMMA_IACC4(i) "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3])
#define CLO_WGMMA_IACC16(i) CLO_WGMMA_IACC4(i), CLO_WGMMA_IACC4(i + 4), CLO_WGMMA_IACC4(i + 8), CLO_WGMMA_IACC4(i + 12)
#define CLO_WGMMA_I_OPS_8 CLO_WGMMA_IACC4(0), CLO_WGMMA_IACC4(4)
#define CLO_WGMMA_I_OPS_16 CLO_WGMMA_IACC16(0)
#define CLO_WGMMA_I_OPS_32 CLO_WGMMA_IACC16(0), CLO_WGMMA_IACC16(16)
#define CLO_WGMMA_I_OPS_64 CLO_WGMMA_IACC16(0), CLO_WGMMA_IACC16(16), CLO_WGMMA_IACC16(32), CLO_WGMMA_IACC16(48)
#define CLO_WGMMA_I_OPS_128 CLO_WGMMA_I_OPS_64, CLO_WGMMA_IACC16(64), CLO_WGMMA_IACC16(80), CLO_WGMMA_IACC16(96), \
                            CLO_WGMMA_IACC16(112)
#define CLO_WGMMA_S8_TAIL_8 ", %8, %9, 1;\n"
#define CLO_WGMMA_S8_TAIL_16 ", %16, %17, 1;\n"
#define CLO_WGMMA_S8_TAIL_32 ", %32, %33, 1;\n"
#define CLO_WGMMA_S8_TAIL_64 ", %64, %65, 1;\n"
#define CLO_WGMMA_S8_TAIL_128 ", %128, %129, 1;\n"
#define CLO_DEFINE_WGMMA_SS_S8(N, R)                                                                  \
  CLO_DEVICE void wgmma_m64n##N##k32_s8(int32_t (&d)[R], uint64_t desc_a, uint64_t desc_b) {         \
    CLO_WGMMA_ASM("wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 " CLO_WGMMA_D_REGS_##R          \
                      CLO_WGMMA_S8_TAIL_##R                                                         \
                  : CLO_WGMMA_I_OPS_##R                                                             \
                  : "l"(desc_a), "l"(desc_b));                                                      \
  }
CLO_DEFINE_WGMMA_SS_S8(16, 8)
CLO_DEFINE_WGMMA_SS_S8(32, 16)
CLO_DEFINE_WGMMA_SS_S8(64, 32)
CLO_DEFINE_WGMMA_SS_S8(128, 64)
CLO_DEFINE_WGMMA_SS_S8(256, 128)


// ---- host side -------------------------------------------------------------
// Whether the device runs this translation unit's sm_90a code. A build without
// sm_90a (or a device other than cc 9.0, which runs the sm_80 image) compiles the
// instructions above to nothing, so a launcher asks before choosing a wgmma kernel.
// The flag lives in each translation unit's own module image (internal linkage),
// which is the image whose kernels that unit launches. The query may be a process's first
// CUDA call inside a graph capture: tests/test_capture_first_call.py captures each sm_90a
// family cold, and the read succeeds there (H100, CUDA 13, torch.cuda.graph's default mode).
namespace {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ int sm90a_image_flag = 1;
#else
__device__ int sm90a_image_flag = 0;
#endif

[[maybe_unused]] bool sm90a_image_loaded() {
  static int cached[64];  // per device: 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  if (cached[dev] == 0) {
    int major = 0, minor = 0, flag = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (major == 9 && minor == 0 && cudaMemcpyFromSymbol(&flag, sm90a_image_flag, sizeof(int)) != cudaSuccess) flag = 0;
    cudaGetLastError();  // a failed query must not surface as the next launch's error
    cached[dev] = major == 9 && minor == 0 && flag == 1 ? 1 : 2;
  }
  return cached[dev] == 1;
}
}  // namespace

}  // namespace cuda_llm_ops::wgmma
