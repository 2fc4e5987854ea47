// Host side of the Hopper wgmma/TMA GEMM family: when it applies (a cc 9.0 device
// running the sm_90a build, fp16/bf16, or int8 with B stored [N, K], rows TMA can
// describe), tile choice, and the schedule (dev knobs), and the CUtensorMap encoding
// (128-byte swizzle, 64-byte for the skinny tile's 32-row boxes; fp32 / int32 for D).
#include <algorithm>
#include <cstdlib>

#include "gemm/gemm_wgmma_sm90.cuh"

namespace cuda_llm_ops::gemm {

cudaError_t encode_tensor_map_2d(CUtensorMap* map, DType dtype, const void* base, uint64_t dim0, uint64_t dim1,
                                 uint64_t row_stride_bytes, uint32_t box0, uint32_t box1, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion promotion) {
  const uint64_t dims[2] = {dim0, dim1};
  const uint32_t box[2] = {box0, box1};
  // TMA moves bytes: int8 travels as UINT8 (no conversion in tiled copies).
  if (dtype == DType::kFloat32 || dtype == DType::kInt32 || dtype == DType::kInt8) {
    const CUtensorMapDataType type = dtype == DType::kFloat32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                     : dtype == DType::kInt32 ? CU_TENSOR_MAP_DATA_TYPE_INT32
                                                              : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    return tma::encode_tiled(map, type, base, 2, dims, &row_stride_bytes, box, swizzle, promotion);
  }
  return tma::encode_tiled_16bit(map, dtype == DType::kBFloat16, base, 2, dims, &row_stride_bytes, box, swizzle,
                                 promotion);
}

bool wgmma_family_available() { return wgmma::sm90a_image_loaded() && tma::tensor_map_encoder() != nullptr; }

bool wgmma_applicable(const GemmProblem& p) {
  const bool sixteen = p.in_dtype == DType::kFloat16 || p.in_dtype == DType::kBFloat16;
  // 8-bit wgmma reads both operands K-major: A [M, K], B stored [N, K]; int32 out, no C.
  const bool s8 = p.in_dtype == DType::kInt8 && p.out_dtype == DType::kInt32 && !p.trans_a && p.trans_b &&
                  p.c == nullptr;
  if (!sixteen && !s8) return false;
  // TMA: 16-byte aligned base and row strides (gemm_vectorizable checks both, and
  // contiguous extents of whole 16-byte chunks); the row stride must stay < 2^40 bytes.
  if (!gemm_vectorizable(p) || p.lda >= (int64_t(1) << 38) || p.ldb >= (int64_t(1) << 38)) return false;
  return wgmma_family_available();
}

namespace {

// The schedule of a call, shared by the launch and the workspace query; NotSupported when
// the family does not apply.
cudaError_t select_wgmma_schedule(const GemmProblem& p, GemmVariant variant, WgmmaSchedule& sch) {
  if (!wgmma_applicable(p)) return cudaErrorNotSupported;
  const long long sms = device_sm_count();
  const long long mt = div_ceil(p.M, 128);
  if (variant == GemmVariant::kWgmma) {
    sch.bn = 256;
  } else if (variant == GemmVariant::kWgmmaN128) {
    sch.bn = 128;
  } else if (variant == GemmVariant::kAuto) {
    // One CTA per SM: wide tiles once they fill 3/4 of a wave (2048^3: 128 wide tiles on
    // 132 SMs ran at 79% of cuBLAS, 256 narrow ones at 71%), 128-wide ones once those fill
    // a wave; below that the mma.sync small tile (more, smaller CTAs: 88% vs 80% at 1024^3).
    if (4 * mt * div_ceil(p.N, 256) >= 3 * sms) {
      sch.bn = 256;
    } else if (mt * div_ceil(p.N, 128) >= sms) {
      sch.bn = 128;
    } else {
      return cudaErrorNotSupported;
    }
  } else {
    return cudaErrorNotSupported;
  }
  // Single CTAs by default (pairs along M measured no faster once the epilogue went through TMA
  // stores; NOTES.md). Dev knobs (dev_knob):
  // CLO_GEMM_WGMMA_CLUSTER (1 or 2), CLO_GEMM_WGMMA_PERSISTENT (0: one cluster per unit),
  // CLO_GEMM_WGMMA_RASTER (grouped_block's group, negative: groups of tile columns).
  static bool dev_cluster = std::getenv("CLO_GEMM_WGMMA_CLUSTER") != nullptr;
  static bool dev_persistent = std::getenv("CLO_GEMM_WGMMA_PERSISTENT") != nullptr;
  sch.cluster = dev_knob("CLO_GEMM_WGMMA_CLUSTER", dev_cluster, 1) == 2 && mt >= 2 ? 2 : 1;
  sch.persistent = dev_knob("CLO_GEMM_WGMMA_PERSISTENT", dev_persistent, 1) != 0;
  static bool dev_raster = std::getenv("CLO_GEMM_WGMMA_RASTER") != nullptr;
  sch.raster = dev_knob("CLO_GEMM_WGMMA_RASTER", dev_raster, 8);
  if (sch.raster == 0) sch.raster = 8;
  // TMA stores need a 16-byte aligned D with 16-byte row pitch; C (beta) keeps the register
  // epilogue. Output in the input dtype or fp32 (tensor_core_gemm). Dev knob
  // CLO_GEMM_WGMMA_TMA_STORE (0: never).
  static bool dev_store = std::getenv("CLO_GEMM_WGMMA_TMA_STORE") != nullptr;
  const int64_t out_elem = static_cast<int64_t>(elem_size(p.out_dtype));
  sch.tma_store = p.c == nullptr &&
                  (p.out_dtype == p.in_dtype || p.out_dtype == DType::kFloat32 || p.out_dtype == DType::kInt32) &&
                  reinterpret_cast<uintptr_t>(p.d) % 16 == 0 && (p.ldd * out_elem) % 16 == 0 &&
                  p.ldd * out_elem < (int64_t(1) << 40) && dev_knob("CLO_GEMM_WGMMA_TMA_STORE", dev_store, 1) != 0;
  // Split-K over a last wave at most half full (persistent single CTAs only). Dev knob
  // CLO_GEMM_WGMMA_TAIL_SPLIT: 0 never, 1 where it pays (default), 2 wherever it can.
  static bool dev_tail_split = std::getenv("CLO_GEMM_WGMMA_TAIL_SPLIT") != nullptr;
  sch.tail_split = dev_knob("CLO_GEMM_WGMMA_TAIL_SPLIT", dev_tail_split, 1);
  // A grid of one wave or less split too, by the same rule: int8 past the skinny tile runs few
  // 256-wide tiles (int8_tile_variant), and forced variants of any dtype. (The 16-bit tile rule
  // sends the family no grid under 3/4 of a wave, which the rule never splits.) Dev knob
  // CLO_GEMM_WGMMA_SHORT_SPLIT: 0 never, 1 (default).
  static bool dev_short_split = std::getenv("CLO_GEMM_WGMMA_SHORT_SPLIT") != nullptr;
  sch.split_short_wave = dev_knob("CLO_GEMM_WGMMA_SHORT_SPLIT", dev_short_split, 1) != 0;
  sch.pdl_mode = gemm_pdl_mode();
  return cudaSuccess;
}

}  // namespace

size_t wgmma_workspace_bytes(const GemmProblem& p, GemmVariant variant) {
  WgmmaSchedule sch;
  if (select_wgmma_schedule(p, variant, sch) != cudaSuccess) return 0;
  const WgmmaTailSplit ts = wgmma_tail_split(p, sch);
  return sch.bn == 256 ? tail_split_workspace_bytes<WgmmaConfig<256, 4>>(ts)
                       : tail_split_workspace_bytes<WgmmaConfig<128, 6>>(ts);
}

namespace {

// The skinny tile's deal of the (unswapped) decode problem p at width bn, as launch_wgmma_cfg
// plans it (plan_skinny_deal: the weight's N rows, k-tiles of 128 bytes, one CTA per SM);
// `grid` out; false where bn cannot run p.
bool skinny_plan(const GemmProblem& p, int bn, long long& grid, WgmmaTailSplit& ts) {
  grid = device_sm_count();
  const int bk = 128 / static_cast<int>(elem_size(p.in_dtype));
  return plan_skinny_deal(p.N, p.M, bn, div_ceil(p.K, bk), p.trans_b, grid, p.in_dtype == DType::kInt8, ts);
}
WgmmaTailSplit skinny_plan(const GemmProblem& p, int bn, long long& grid) {
  WgmmaTailSplit ts;
  skinny_plan(p, bn, grid, ts);
  return ts;
}

// The skinny tile's width for the (unswapped) problem p: 16 for decode (M <= 16); for batched
// decode the token tile of plan_skinny_token_tiles, else all M rows of a in one tile 64 or 128
// wide, or (16-bit, 129-192 rows) 192 wide where its units go whole (12288 rows: 128 units of 96,
// where no token-tile deal fits a wave and the 128-wide tiles ran 0.55-0.68x cuBLAS, the tile
// 0.89-0.93x; NOTES.md "Stop 127"; dev knob CLO_GEMM_SKINNY_WIDE: 0 off). A 256-wide tile for
// 193-256 rows lost to the family everywhere (224x12288x4096: 60.6 us against 53.3): it computes
// 128 x 256 a unit, 36 us of tensor work a CTA. 0 where none runs it.
int skinny_tile_bn(const GemmProblem& p) {
  if (p.M <= kSkinnyMaxM) return 16;
  const int bk = 128 / static_cast<int>(elem_size(p.in_dtype));
  const SkinnyTokenTiles tt = plan_skinny_token_tiles(p.N, p.M, p.trans_b, device_sm_count(), div_ceil(p.K, bk),
                                                      p.in_dtype == DType::kInt8);
  if (tt.bn != 0) return tt.bn;
  if (p.M <= 128) return p.M <= 64 ? 64 : 128;
  static bool dev_wide = std::getenv("CLO_GEMM_SKINNY_WIDE") != nullptr;
  if (p.M > 192 || p.in_dtype == DType::kInt8 || dev_knob("CLO_GEMM_SKINNY_WIDE", dev_wide, 1) == 0) return 0;
  constexpr int bn = 192;
  long long grid = 0;
  WgmmaTailSplit ts;
  return skinny_plan(p, bn, grid, ts) ? bn : 0;
}

// The skinny tile's schedule at width bn: register epilogue, no split of a last wave.
WgmmaSchedule skinny_schedule(int bn) {
  WgmmaSchedule sch;
  sch.skinny = true;
  sch.bn = bn;
  sch.tma_store = false;
  sch.tail_split = 0;
  sch.pdl_mode = gemm_pdl_mode();
  return sch;
}

// Decode shapes on the wgmma family: D^T = op(B)^T op(A)^T, so the weight streams through
// the 64-row wgmma operand (TMA boxes of N rows, units of 64-128 rows) and the rows of A are
// the 16- to 128-wide operand (skinny_tile_bn: all of them, or token tiles of them); the
// epilogue writes D^T's elements back to D. A [M, K] not transposed, 16-bit (or int8 with the
// weight stored [N, K], int32 out), 16-byte aligned rows, the sm_90a build.
// M <= 16 (where the skinny kernels run too): taken where it measured faster than they
// (NOTES.md "Run 6": it loses on small calls, 4-5 us behind cuBLAS at 25-100 MB of weight):
// M >= 8 with b [K, N], or with N >= 8192; and b [N, K] at any M where the units go whole
// (run 7). 16 < M <= 256 (batched decode): where the 128-row tiles of the other kernels
// would not fill a wave (they would stream the weight on as few SMs as they have tiles), and
// above 128 rows only in token tiles or the wide tile's whole units (those also where the
// 128-row tiles fill a wave). int8: every decode shape (the skinny kernels take none
// with B [N, K]), and batched decode by the same rule (NOTES.md "Stop 125").
// Dev knob CLO_GEMM_SKINNY_WGMMA: 0 never, 1 that rule (default), 2 wherever it can.
// The tile's width for p (skinny_tile_bn) where it applies, else 0.
int wgmma_skinny_tile(const GemmProblem& p) {
  static bool dev_mode = std::getenv("CLO_GEMM_SKINNY_WGMMA") != nullptr;
  const int mode = dev_knob("CLO_GEMM_SKINNY_WGMMA", dev_mode, 1);
  const bool s8 = p.in_dtype == DType::kInt8;
  if (mode == 0 || p.M > kSkinnyWgmmaMaxM) return 0;
  const int bn = skinny_tile_bn(p);
  if (bn == 0) return 0;
  // Batched decode: not where the 128-wide tiles fill a wave, which stream the weight as well
  // (M = 128, 28672 rows: 87.4 us on them against 90.8 on the tile; NOTES.md "Batched decode").
  // Nor below 1024 weight rows (16 units of 64): a short call whose few units the split would
  // cut into many short ranges (not measured; the tile's rows measured from 4096).
  if (mode == 1 && p.M > kSkinnyMaxM && bn <= 128 &&
      ((long long)div_ceil(p.M, 128) * div_ceil(p.N, 128) >= device_sm_count() || p.N < 1024)) {
    return 0;
  }
  if (mode == 1 && p.M <= kSkinnyMaxM && !s8) {
    // Also b [N, K] at any M where plan_skinny deals whole units (NOTES.md "Skinny", run 7:
    // 16x6144x4096 and 1x12288x4096 on the tile against the skinny kernels).
    long long grid = 0;
    const bool whole = p.trans_b && skinny_plan(p, bn, grid).step > 1;
    if (!whole && (p.M < 8 || (p.trans_b && p.N < 8192))) return 0;
  }
  // (wgmma_applicable: int8 with B stored [N, K] and int32 out only)
  const bool sixteen = (p.in_dtype == DType::kFloat16 || p.in_dtype == DType::kBFloat16) &&
                       (p.out_dtype == p.in_dtype || p.out_dtype == DType::kFloat32);
  return !p.trans_a && (sixteen || s8) && wgmma_applicable(p) ? bn : 0;
}

}  // namespace

bool wgmma_skinny_applies(const GemmProblem& p) { return wgmma_skinny_tile(p) != 0; }

namespace {

GemmProblem swapped_for_skinny(const GemmProblem& p) {
  GemmProblem q = p;
  q.a = p.b;  // op(B)^T: [N, K] K-major when b is stored [N, K], else its transpose
  q.b = p.a;  // A [M, K] is op(A)^T stored [N' = M, K]: K-major
  q.M = p.N;
  q.N = p.M;
  q.lda = p.ldb;
  q.ldb = p.lda;
  q.trans_a = !p.trans_b;
  q.trans_b = true;
  return q;  // c, d, ldc, ldd, alpha, beta, dtypes: the original D [M, N] (the kernel transposes)
}

}  // namespace

namespace {

// The stream-K scratch of the skinny tile for the (unswapped) decode problem p (none where
// the units go whole).
size_t skinny_tile_workspace_bytes(const GemmProblem& p, int bn) {
  long long grid = 0;
  const WgmmaTailSplit ts = skinny_plan(p, bn, grid);
  switch (bn) {
    case 16: return skinny_stream_k_workspace_bytes<SkinnyWgmmaConfig<16>>(ts, grid);
    case 32: return skinny_stream_k_workspace_bytes<SkinnyWgmmaConfig<32>>(ts, grid);
    case 64: return skinny_stream_k_workspace_bytes<SkinnyWgmmaConfig<64>>(ts, grid);
    case 192: return skinny_stream_k_workspace_bytes<SkinnyWgmmaConfig<192>>(ts, grid);
    default: return skinny_stream_k_workspace_bytes<SkinnyWgmmaConfig<128>>(ts, grid);
  }
}

}  // namespace

size_t wgmma_skinny_workspace_bytes(const GemmProblem& p, bool* applies) {
  const int bn = wgmma_skinny_tile(p);
  if (applies != nullptr) *applies = bn != 0;
  return bn != 0 ? skinny_tile_workspace_bytes(p, bn) : 0;
}

cudaError_t launch_gemm_wgmma_skinny(const GemmProblem& p, cudaStream_t stream) {
  const int bn = wgmma_skinny_tile(p);
  if (bn == 0) return cudaErrorNotSupported;
  const WgmmaSchedule sch = skinny_schedule(bn);
  const GemmProblem q = swapped_for_skinny(p);
  if (p.in_dtype == DType::kInt8) return launch_gemm_wgmma_s8(q, sch, stream);
  return p.in_dtype == DType::kBFloat16 ? launch_gemm_wgmma_bf16(q, sch, stream) : launch_gemm_wgmma_f16(q, sch, stream);
}

namespace {

// int8 on the family. Dev knob CLO_GEMM_INT8_WGMMA: 0 never (mma.sync), 1 (default) decode
// shapes with B stored [N, K], and past them on 256-wide tiles (int8_tile_variant; up to one
// row tile of A only where a short wave splits, plan_int8_family), where the transpose rule
// lets it (int8_transpose_declined); 2 decode shapes as 1 and everything else on 128x256
// tiles, however few (decode shapes with B [K, N] go to the skinny int8 kernel first, by its
// own rule).
GemmVariant int8_wgmma_variant(bool& use) {
  static bool dev_mode = std::getenv("CLO_GEMM_INT8_WGMMA") != nullptr;
  const int mode = dev_knob("CLO_GEMM_INT8_WGMMA", dev_mode, 1);
  use = mode != 0;
  return mode == 2 ? GemmVariant::kWgmma : GemmVariant::kAuto;
}

// The problem the kernel runs: B stored [N, K], the caller's own or (b stored [K, N]) its
// transposed copy at the head of the workspace, bt_bytes long; the family's split-K
// scratch follows it. Before the workspace exists q.b is null (16-byte aligned like the copy).
GemmProblem int8_wgmma_problem(const GemmProblem& p, size_t& bt_bytes) {
  GemmProblem q = p;
  bt_bytes = 0;
  if (!p.trans_b) {
    bt_bytes = (size_t(p.K) * size_t(p.N) + 255) / 256 * 256;
    q.b = p.workspace;
    q.ldb = p.K;
    q.trans_b = true;
    q.workspace = p.workspace == nullptr ? nullptr : static_cast<unsigned char*>(p.workspace) + bt_bytes;
    q.workspace_bytes = p.workspace_bytes > bt_bytes ? p.workspace_bytes - bt_bytes : 0;
  }
  return q;
}

// Decode shapes (M <= 16) with B stored [N, K] run on the skinny tile, swapped as the 16-bit
// ones are (the weight as the 64-row operand), and batched decode by its rule
// (wgmma_skinny_tile), unless the dev knob forces the family's 128x256 tiles. A B stored [K, N]
// would need the whole weight transposed on every call (3x the bytes of a memory-bound call):
// the skinny int8 kernel takes decode shapes from 32 MiB (gemm_skinny.cu), mma.sync below.
bool int8_skinny_applies(const GemmProblem& p, GemmVariant variant) {
  return (p.M <= kSkinnyMaxM || variant == GemmVariant::kAuto) && wgmma_skinny_applies(p);
}

// B stored [K, N] with one row tile of A (M <= 128, where mma.sync splits K), or up to
// kSkinnyWgmmaMaxM (256) rows and a weight over 32 MiB, is not the family's by default: the
// weight's transpose on every call (twice its bytes) costs more than the faster tiles save
// (NOTES.md "Stop 122" and "Stop 123": 28672 x 4096 at M = 1 / 64 / 256, 54.9 / 57.1 / 118.7 us
// on mma.sync against 155.2 / 155.6 / 163.8 through the transpose, 12288 x 4096 at 256 rows 60.3
// against 75.4; at 16 MiB, 4096 x 4096, 256 rows take 40.4 through it against 59.8). The dev
// knob's mode 2 (kWgmma) still forces it.
constexpr int kInt8RowTile = 128;  // mma.sync's tile height (gemm_int8.cu kI8BM): it splits K below
constexpr int kInt8FamilyMinRowsFew = 32;  // plan_int8_family: rows the family needs on a few tiles
constexpr size_t kInt8TransposeMaxBytesBatched = size_t(32) << 20;
bool int8_transpose_declined(const GemmProblem& p, GemmVariant variant) {
  if (variant != GemmVariant::kAuto || p.trans_b) return false;
  return p.M <= kInt8RowTile ||
         (p.M <= kSkinnyWgmmaMaxM && size_t(p.K) * size_t(p.N) > kInt8TransposeMaxBytesBatched);
}

// Past the skinny tile (M > 16) int8 runs on the family's 256-wide tiles, whatever the grid.
// The tile rule sends grids under 3/4 of a wave of them to 128-wide tiles or, under a wave of
// those, to mma.sync, whose smaller tiles pay for 16-bit types; int8 mma.sync runs the
// family's own 128x256 tile, only slower, and int8's 128-wide tiles lose too (NOTES.md "Stop
// 124", B stored [N, K]: 129 x 12288 x 4096 29.3 us against 41.4 on 128-wide tiles; "Stop 123":
// 512 x 4096 x 4096, B [K, N] transposed, 40.6 against mma.sync's 60.4). A grid of one wave or
// less is split along K where it is a quarter wave or less (plan_tail_split's short wave):
// unsplit, 16 wide tiles of 64 x 4096 x 14336 took 72.5 us against mma.sync's 46.6, in 7 chunks
// 41.4 ("Stop 125"). Up to 256 rows the skinny tile comes first where its rule takes the
// call (wgmma_skinny_tile).
GemmVariant int8_tile_variant(const GemmProblem& q, GemmVariant variant) {
  return variant == GemmVariant::kAuto && q.M > kSkinnyMaxM ? GemmVariant::kWgmma : variant;
}

}  // namespace

namespace {

// How the family runs p past the skinny tile: q (B stored [N, K]: the caller's, or the
// transposed copy at the workspace's head, bt_bytes long), its variant and schedule; false
// where the transpose rule or the tile rule leaves p to mma.sync. The workspace query and the
// launch both plan through it, so they size and run the same thing.
bool plan_int8_family(const GemmProblem& p, GemmVariant& variant, GemmProblem& q, WgmmaSchedule& sch,
                      size_t& bt_bytes) {
  if (int8_transpose_declined(p, variant)) return false;
  q = int8_wgmma_problem(p, bt_bytes);
  const GemmVariant asked = variant;
  variant = int8_tile_variant(q, variant);
  if (select_wgmma_schedule(q, variant, sch) != cudaSuccess) return false;
  // Up to one row tile of A (where the skinny tile declines) a grid of a quarter wave or less
  // stays the family's only past 32 rows and where its split runs: its tiles compute 128 rows
  // whatever M, mma.sync's fewer, and mma.sync splits K too (17 / 64 / 128 x 4096 x 4096:
  // mma.sync 17.2 / 26.0 / 35.1 us, the family in 4 chunks 24.3 / 24.4 / 24.7; NOTES.md "Stop 125").
  const long long units = wgmma_units(q, sch);
  return asked != GemmVariant::kAuto || q.M > kInt8RowTile || units * kShortWaveMaxFill > device_sm_count() ||
         (q.M > kInt8FamilyMinRowsFew && wgmma_tail_split(q, sch).tail_units > 0);
}

}  // namespace

size_t wgmma_int8_workspace_bytes(const GemmProblem& p) {
  // The family needs TMA-describable rows of A and B as given (launch_gemm_int8 sends it no
  // other): no transposed copy to size for a B whose own rows are not.
  if (!gemm_vectorizable(p)) return 0;
  bool use = false;
  GemmVariant variant = int8_wgmma_variant(use);
  if (!use) return 0;
  if (int8_skinny_applies(p, variant)) return wgmma_skinny_workspace_bytes(p);
  GemmProblem sized = p;
  sized.workspace = nullptr;
  sized.workspace_bytes = 0;
  GemmProblem q;
  WgmmaSchedule sch;
  size_t bt_bytes = 0;
  if (!plan_int8_family(sized, variant, q, sch, bt_bytes)) return 0;
  return bt_bytes + wgmma_workspace_bytes(q, variant);
}

cudaError_t launch_gemm_wgmma_int8(const GemmProblem& p, cudaStream_t stream) {
  bool use = false;
  GemmVariant variant = int8_wgmma_variant(use);
  if (!use) return cudaErrorNotSupported;
  if (int8_skinny_applies(p, variant)) return launch_gemm_wgmma_skinny(p, stream);
  GemmProblem q;
  WgmmaSchedule sch;
  size_t bt_bytes = 0;
  if (!plan_int8_family(p, variant, q, sch, bt_bytes)) return cudaErrorNotSupported;
  if (bt_bytes > 0) {
    // The binding sized the workspace by wgmma_int8_workspace_bytes; without it, mma.sync.
    if (p.workspace == nullptr || p.workspace_bytes < bt_bytes) return cudaErrorNotSupported;
    const cudaError_t err = launch_transpose_int8_to_nk(p.b, p.workspace, p.K, p.N, p.ldb, stream);
    if (err != cudaSuccess) return err;
  }
  return launch_gemm_wgmma_s8(q, sch, stream);
}

cudaError_t launch_gemm_wgmma(const GemmProblem& p, GemmVariant variant, cudaStream_t stream) {
  WgmmaSchedule sch;
  const cudaError_t err = select_wgmma_schedule(p, variant, sch);
  if (err != cudaSuccess) return err;
  if (p.in_dtype == DType::kInt8) return launch_gemm_wgmma_s8(p, sch, stream);
  return p.in_dtype == DType::kBFloat16 ? launch_gemm_wgmma_bf16(p, sch, stream) : launch_gemm_wgmma_f16(p, sch, stream);
}

}  // namespace cuda_llm_ops::gemm
