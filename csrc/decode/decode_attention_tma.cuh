// Decode attention kernel on sm_90 (where it runs: decode_tma_stages_for, NOTES.md v8, v23):
// warp-specialised,
// K/V tiles fetched by the TMA unit as tensor-map boxes of min(block_size, 64) keys
// (64 for the strided layout).
//
// Same work decomposition, smem layout, softmax and fused split merge as
// decode_attention_kernel (decode_attention.cuh); what differs is the load path:
//  - a 5th (producer) warp does all table lookups and issues a few boxes per 64-key
//    tile (block 16, D = 128: 8 for K, 8 for V, one per 16 keys and 64-column plane)
//    instead of 2048 16-byte cp.async spread over the 4 math warps, which keep no
//    table entries or load addresses;
//  - one "full" mbarrier per stage (expect_tx = the boxes' bytes) and one "empty"
//    mbarrier (4 arrivals, 8 with two row tiles): a math warp frees a stage by itself;
//    there is no __syncthreads in the main loop.
// Only for sm_90: below sm_90 the body is empty and the launcher refuses
// (cudaErrorNotSupported, the caller then runs decode_attention_kernel).
#pragma once

#include <type_traits>

#include "cuda_llm_ops/tma.cuh"

namespace cuda_llm_ops::decode {

constexpr int kTmaMathWarps = kDecodeWarps;  // 4 x 16 keys of a 64-key tile (per row tile)
// Threads of a block serving kRowTiles 16-row tiles: kTmaMathWarps math warps per tile, all
// reading the same K/V stages, and the producer.
constexpr int decode_tma_threads(int row_tiles) { return (kTmaMathWarps * row_tiles + 1) * 32; }
constexpr int kStartupBarrier = 1;  // named barrier id (0 is __syncthreads'; 2 is kEpilogueBarrier)

// [K/V stages][Q rows][one "full" (the tile's boxes) and one "empty" (one arrival per math
// warp) mbarrier per stage]: the cp.async kernel's plan with the barriers as its extra.
// kBalanced (the balanced schedule's kernel) adds the epilogue's own scratch after the
// barriers (16-byte aligned) and a flag per piece: the pipeline keeps streaming the next
// piece while the math warps merge the last one.
template <typename T, int D, int kStages, typename KVT = T, bool kBalanced = false, int kRowTiles = 1>
constexpr size_t decode_tma_smem_bytes() {
  const size_t barriers = size_t(kStages) * 2 * sizeof(uint64_t);
  return decode_smem_bytes<T, D, kStages, KVT, kRowTiles>(
      barriers + (kBalanced ? 16 + decode_epilogue_smem_bytes<D, kRowTiles>() + kDecodeMaxPieces * sizeof(int) : 0));
}

// The TMA kernel instances that run split clusters (p.split_cluster): the even grid, head_dim
// 128 and more, where the pipeline buffer holds their smem. Below 128 the cluster merge took the
// paged D = 96 kernels from 124-131 to 145-150 registers and spilled the strided narrow ones.
template <typename T, int D, int kStages, typename KVT, int kSchedule, int kRowTiles>
constexpr bool decode_runs_split_clusters() {
  return kSchedule == kDecodeEvenGrid && D >= 128 && decode_split_cluster_fits<T, D, kStages, KVT, kRowTiles>();
}

// Tensor maps encoded on the host per call (boxes land in the decode_kv_offset layout:
// 64-column planes with the 128-byte swizzle, 32-column planes with the 64-byte one). Where
// the head dim is two or more whole 64-column planes (and the tile has no tail plane), one
// box carries every plane of its rows (`spans_planes`, stop 64: half the boxes of a paged
// block-16 tile), the tile's planes then grouped by the box's rows:
// paged: 4-D (64, num_blocks * block_size, planes, Hkv), box (64, min(block_size, 64),
// planes, 1); strided: 5-D (64, Nk, planes, Hkv, B), box (64, 64, planes, 1, 1): the plane
// dim steps 128 bytes along the row. Else one box per plane:
// paged: 3-D (D, Hkv, num_blocks * block_size), box (plane, 1, min(block_size, 64));
// strided: 4-D (D, Nk, Hkv, B), box (plane, 64, 1, 1), with D the real head dim. Columns
// past it (a narrower head dim run on a wider kernel: the rest of its last plane, and
// whole planes past it) are outside the tensor: zero-filled, no DRAM traffic.
struct DecodeTmaMaps {
  CUtensorMap k, v;
  CUtensorMap k_tail, v_tail;  // the tail plane's boxes (32 columns, 64-byte swizzle); else copies of k, v
  bool spans_planes = false;
};

template <class KV>
CLO_DEVICE void decode_tma_box(void* dst, const CUtensorMap* map, int col, int kvh, int row, int b, uint64_t* bar) {
  if constexpr (KV::kPagedLayout) tma::load_3d(dst, map, col, kvh, row, bar);
  else tma::load_4d(dst, map, col, row, kvh, b, bar);
}
// One box over every plane of its rows (DecodeTmaMaps::spans_planes): tiles of two or more
// 64-column planes and no tail plane; or 16-bit D = 96 paged tiles as three 32-column planes
// (decode_kv_offset), the kernel's kTailSpans instances (decode_runs_tail_spans).
template <int kCols>
constexpr bool decode_spans_planes() {
  return decode_wide_planes<kCols>() >= 2 && !decode_has_tail_plane<kCols>();
}
// decode_kv_offset's 96-column tail-span layout is where one box a 16-key group lands: [3
// planes][16 rows][64 bytes] from the group's start (3 KB apart; K and V tiles of 12 KB from the
// 1024-byte aligned smem base, decode_smem_base),
// with the TMA unit's 64-byte swizzle (16-byte chunk bits 4-5 ^= bits 7-8 of the smem offset),
// every 16-byte chunk of the tile once.
constexpr bool decode_tail_spans_layout_ok() {
  bool seen[kTileTokens * 12] = {};
  for (int row = 0; row < kTileTokens; ++row) {
    for (int chunk = 0; chunk < 12; ++chunk) {
      const int line = (row >> 4) * 3072 + (chunk >> 2) * 1024 + (row & 15) * 64;  // before the swizzle
      const int bytes = line + 16 * ((chunk & 3) ^ ((line >> 7) & 3));
      const int at = decode_kv_offset<96>(row, chunk, kDecodeTailSpanLog2);
      if (2 * at != bytes || at < 0 || at / 8 >= kTileTokens * 12 || seen[at / 8]) return false;
      seen[at / 8] = true;
    }
  }
  // the groups' 3 KB steps keep each box 1024-byte aligned only from a 1024-aligned tile
  return (1 << kDecodeTailSpanLog2) == 16 && decode_kv_tile_elems<96>() * 2 % kDecodeSmemAlign == 0;
}
static_assert(decode_tail_spans_layout_ok(), "the tail-span layout must be the boxes' landing");
template <typename T, int D, typename KVT, bool kPaged>
constexpr bool decode_runs_tail_spans() {
  return kPaged && decode_tail_spans_cols<decode_stage_cols<T, D, KVT>()>() && sizeof(KVT) == sizeof(T);
}
template <class KV>
CLO_DEVICE void decode_tma_row_box(void* dst, const CUtensorMap* map, int kvh, int row, int b, uint64_t* bar) {
  if constexpr (KV::kPagedLayout) tma::load_4d(dst, map, 0, row, 0, kvh, bar);
  else tma::load_5d(dst, map, 0, row, 0, kvh, b, bar);
}

// KVT: the cache's element type, T or an FP8 byte: its tiles are D/2 16-bit columns
// (planes of 128 e4m3 columns), dequantized in registers (decode_warp_tile_fp8).
// kSchedule: the even grid, or kDecodeBalanced, the balanced schedule (p.streamk_blocks > 0,
// decode_streamk_piece): the block runs its pieces one after the other (a separate
// instantiation: the piece loop's state costs ~35 registers, which would cut the other
// grids' blocks per SM), or kDecodeSpreadTail (p.spread_from > 0, decode_spread_work),
// held to two blocks per SM's registers, as its pieces sit beside the whole units.
// kRowTiles (decode_runs_wide_rows): the block serves that many 16-row tiles of one KV head
// (32 rows: Nq 8 at GQA 32/8, one token at groups of 17-32), each with its own 4 math warps
// over the same K/V stages, so the keys are read once per 32 rows rather than once per 16
// (two blocks streaming the same keys). p.row_tiles then counts units of kRowTiles x 16 rows.
// kNarrow (decode_narrow_rows_pay): units of at most 8 rows on decode_warp_tile_narrow.
// kTailSpans (decode_runs_tail_spans): paged 16-bit D = 96 tiles in the tail-span layout, one box
// a block-16 page over its three 32-column planes (decode_kv_offset; decode_wide_row_boxes_pay).
// Two blocks per SM are asked of the spread tail (above) and of two-row-tile blocks at head_dim
// 64 below 4 stages, whose paged instance took 112 registers where the contiguous one took 96: at
// 9 warps of 112, one block per SM (a sub-partition holds 4 such warps), so paged calls gained
// nothing from a second wave of splits that contiguous ones ran beside the first (NOTES.md "Stop
// 89": ncu, GQA 32/8 Nq 5 B=4/16K at 8 splits, paged / contiguous 102.6K / 74.0K cycles, same
// DRAM bytes). 4 stages run only at one wave or less (decode_wide_rows_stages), one block per SM:
// there the bound would only add spills.
template <typename T, int D, int kStages, class KV, typename KVT = T, int kSchedule = kDecodeEvenGrid,
          int kRowTiles = 1, bool kNarrow = false, bool kTailSpans = false>
__global__ void __launch_bounds__(decode_tma_threads(kRowTiles),
                                  kSchedule == kDecodeSpreadTail || (kRowTiles == 2 && D == 64 && kStages < 4) ? 2 : 0)
    decode_attention_tma_kernel(const DecodeKernelParams p, const KV kv, const __grid_constant__ CUtensorMap k_map,
                               const __grid_constant__ CUtensorMap v_map,
                               const __grid_constant__ CUtensorMap k_tail_map,
                               const __grid_constant__ CUtensorMap v_tail_map, const int box_rows,
                               const bool spans_planes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(kStages >= 2, "the pipeline needs two stages");
  constexpr bool kBalanced = kSchedule == kDecodeBalanced;
  // The balanced schedule's plan by length (p.streamk_by_len) exists for 16-row blocks only:
  // two-row-tile blocks plan by capacity (as_balanced, stop 83), and without that code their
  // paged instance keeps its state in 168 registers (88 / 76 bytes of spill with it, stop 84).
  constexpr bool kPlansByLength = kBalanced && kRowTiles == 1;
  static_assert(kTileTokens == 64 && kTmaMathWarps == 4, "16 keys per math warp");
  constexpr bool kDequant = decode_dequantizes<T, KVT>();
  static_assert(kRowTiles == 1 || (kSchedule != kDecodeSpreadTail && !kDequant),
                "two row tiles: the even grid or the balanced schedule of 16-bit caches");
  static_assert(!kNarrow || (kRowTiles == 1 && !kDequant), "the narrow tile: one row tile, 16-bit caches");
  constexpr int kMathWarps = kTmaMathWarps * kRowTiles;
  constexpr int kThreads = decode_tma_threads(kRowTiles);
  constexpr int kBlockRows = kRowTiles * kRowsPerBlock;
  constexpr int kStageCols = decode_stage_cols<T, D, KVT>();  // 16-bit columns of a tile's rows
  constexpr int kColsPerPlane = decode_plane_cache_cols<T, KVT>();  // cache columns of a 64-column plane
  constexpr int kWidePlanes = decode_wide_planes<kStageCols>();  // then the tail plane, if any
  constexpr int kQStride = decode_smem_stride<D>();
  constexpr int kPlanes = decode_kv_planes<kStageCols>();
  constexpr int kChunksPerRow = kStageCols / 8;  // 16-byte chunks
  constexpr int kTileElems = decode_kv_tile_elems<kStageCols>();
  constexpr int kDTiles = D / 8;
  constexpr int kProducerWarp = kMathWarps;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* smem = decode_smem_base(smem_raw);  // 1024-byte aligned: the swizzle's period
  T* kv_s = reinterpret_cast<T*>(smem);              // [stages][K, V][tile (decode_kv_offset)]
  T* q_s = reinterpret_cast<T*>(smem + decode_pipeline_smem_bytes<T, D, kStages, KVT, kRowTiles>());
  uint64_t* full_bar = reinterpret_cast<uint64_t*>(q_s + kBlockRows * kQStride);  // [stages]
  uint64_t* empty_bar = full_bar + kStages;                                          // [stages]
  // kBalanced: the epilogue's scratch, then the pieces' bad-index flags (set by the producer
  // before the "full" arrive of the tile that met one; read after the piece's last wait)
  unsigned char* scratch = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(empty_bar + kStages) + 15) / 16 * 16);
  int* piece_bad = reinterpret_cast<int*>(scratch + decode_epilogue_smem_bytes<D, kRowTiles>());

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bool producer = warp == kProducerWarp;
  // A math warp's 16 keys of each tile (key_warp) and its row tile (the producer: the last).
  const int key_warp = warp % kTmaMathWarps, row_sub = min(warp / kTmaMathWarps, kRowTiles - 1);
#ifdef CLO_DEV_STAMPS
  unsigned long long* stamp =
      p.dev_stamps + kDecodeDevStamps * (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  auto now = [] { return global_timer_ns(); };
  auto clk = [] { return static_cast<unsigned long long>(clock64()); };
  const bool stamps_on = p.dev_stamps != nullptr;
#endif

  // Set-up that reads no global memory (kernel parameters, smem, L2 prefetches) runs
  // before the PDL wait, overlapping the previous kernel's tail; everything else after it.
  const int n_boxes = kTileTokens / box_rows;
  // The tile's planes come in groups of box_rows keys under spanning boxes; a box per
  // plane fills the plain planes layout (grouped, one block per SM lost 0.6%: B=16/16K/GQA
  // 246.5 -> 248.0 us in the probe's same-process A/B, stop 64).
  // A 96-column tile's layout is the instance's (a constant: its offsets fold as before).
  constexpr bool kTailSpanCols = decode_tail_spans_cols<kStageCols>();
  static_assert(!kTailSpans || (kTailSpanCols && decode_runs_tail_spans<T, D, KVT, KV::kPagedLayout>()),
                "tail spans: 16-bit D = 96 paged tiles");
  const int box_lg = kTailSpanCols ? (kTailSpans ? kDecodeTailSpanLog2 : kDecodeUngroupedLog2)
                                   : (spans_planes ? 31 - __clz(box_rows) : kDecodeUngroupedLog2);
  const bool box_lane = producer && lane < n_boxes;
  const int my_key = lane * box_rows;
  if (box_lane && lane == 0) {
    tma::prefetch_tensor_map(&k_map);
    tma::prefetch_tensor_map(&v_map);
    if constexpr (decode_has_tail_plane<kStageCols>()) {
      tma::prefetch_tensor_map(&k_tail_map);
      tma::prefetch_tensor_map(&v_tail_map);
    }
  }
  if (producer && lane == 0) {  // the producer's own barriers: it never waits on the math warps
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(full_bar + s, 1);
      tma::mbarrier_init(empty_bar + s, kMathWarps);
    }
    tma::mbarrier_init_fence();
  }
  // The block's work: its own unit (or split of one), or the pieces of its share of the
  // balanced schedule, one after the other (decode_streamk_piece).
  DecodeStreamKRange sk{};
  DecodeWork w;
  if constexpr (kBalanced) {
    sk = decode_streamk_range(p, kv.capacity());
    w = decode_streamk_piece(p, sk);
  } else if constexpr (kSchedule == kDecodeSpreadTail) {
    w = decode_spread_work(p);
  } else {
    w = decode_block_work(p);
  }
  int spec_start = decode_split_start(p, w, kv.capacity());
  if (producer) decode_prefetch_inputs<D, KV, kBlockRows>(p, w, kv, spec_start);
  pdl_wait_then_release();
  // Tiles of the earlier pieces: the stages and the mbarriers' phases run on across pieces.
  int tiles_done = 0;
  if constexpr (kBalanced) {
    if (producer && lane == 0) {  // before the start-up arrive: ordered before every read
      for (int i = 0; i < kDecodeMaxPieces; ++i) piece_bad[i] = 0;
    }
  }
  for (int piece = 0, more = 1; more; ++piece) {
    int kvh = w.kvh, b = w.b;
#ifdef CLO_DEV_STAMPS
    if (stamps_on && tid == 0) {  // after the wait: a graph's gap is start - previous end
      stamp[8] = clk();
      stamp[0] = now();
      unsigned smid;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      stamp[20] = 1ull + smid;  // which SM (the probe counts SMs holding two blocks)
    }
#endif

    auto cur = kv.cursor(b, kvh);
    int len_raw = kv.load_len(b);
    // Producer lane l < n_boxes owns box l of every tile (keys l * box_rows ..). It keeps
    // the table entries of the next kStages tiles in flight (ent[0] is tile t's): the
    // pipeline's first kStages tiles are issued back to back instead of one table round
    // trip apart, and later lookups have kStages tiles of time to land. The first
    // entries are speculated before seq_len arrives (as in decode_attention_kernel).
    int ent[kStages];
    auto lookup_ahead = [&](int first, int limit) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        const int pos = first + s * kTileTokens + my_key;
        ent[s] = box_lane && pos < limit ? cur.lookup(pos) : 0;
      }
    };
    lookup_ahead(spec_start, kv.capacity());
    // By length (decode_streamk_len_range): planned from seq_lens, so after the wait, with
    // the loads of the capacity plan's first piece already in flight (kept where the two
    // plans' first pieces agree; where every sequence reads as many tiles the plan returns
    // the capacity range and this branch does not run).
    if constexpr (kPlansByLength) {
      if (piece == 0 && p.streamk_by_len) {
        const DecodeStreamKRange by_len = decode_streamk_len_range(p, kv);
        if (by_len.tiles_cap == 0) {
          sk = by_len;
          const DecodeWork planned = decode_streamk_len_piece(p, kv, sk);
          const int planned_start = decode_split_start(p, planned, kv.capacity());
          const bool same_unit = planned.b == w.b && planned.unit_x == w.unit_x;
          w = planned;
          if (!same_unit) {
            kvh = w.kvh;
            b = w.b;
            cur = kv.cursor(b, kvh);
            len_raw = kv.load_len(b);
          }
          if (!same_unit || planned_start != spec_start) {
            spec_start = planned_start;
            lookup_ahead(spec_start, kv.capacity());
          }
        }
      }
    }
    // 64-column planes holding real columns: a narrower head dim run on this kernel
    // (decode_kernel_head_dim) may leave whole planes past its row. Those are never loaded
    // (a box wholly outside the tensor is not relied on) and stay zero: set once here, in
    // every stage, before the start-up barrier orders it before any ldmatrix.
    const int planes = (p.row_cols + kColsPerPlane - 1) / kColsPerPlane;
    if (!producer) decode_load_q<T, D, kQStride, kDequant, kBlockRows>(p, w, q_s, kMathWarps * 32);
    if (!producer && piece == 0 && planes < kPlanes) {
      // The planes in use come first (the tail plane last): the chunks of every row past
      // them are unused.
      const int used_chunks = planes * 8, pad_chunks = kTileTokens * (kChunksPerRow - used_chunks);
      for (int c = tid; c < kStages * 2 * pad_chunks; c += kMathWarps * 32) {
        T* tile = kv_s + (c / pad_chunks) * kTileElems;  // stage-major K, V tiles
        const int i = c % pad_chunks, row = i % kTileTokens, chunk = used_chunks + i / kTileTokens;
        *reinterpret_cast<uint4*>(tile + decode_kv_offset<kStageCols>(row, chunk, box_lg)) = make_uint4(0, 0, 0, 0);
      }
    }
    bool bad = false;
    const int kv_len = kv.check_len(len_raw, bad);
    const DecodeSplitRange range =
        decode_split_range(p, w, kv_len, (w.row_tile * kRowTiles + row_sub) * kRowsPerBlock, kNarrow);
    const int eff = range.eff, start = range.start, end = range.end, n_tiles = range.n_tiles;
    if (start != spec_start) lookup_ahead(start, end);

#ifdef CLO_DEV_STAMPS
    if (stamps_on && producer && lane == 0) {
      asm volatile("" ::"r"(len_raw), "r"(ent[0]));  // wait for both loads
      stamp[5] = clk();
    }
#endif
    // Start-up hand-off: the producer issues its first boxes as soon as its table entries
    // land; the math warps wait for the mbarriers' initialisation (the producer's arrival)
    // and for each other's q rows.
    // A later piece (kBalanced): the math warps' q rows only (the first barrier of the
    // epilogue they just left comes after every math warp's last read of the previous rows).
    CLO_DEV_CHAOS_POINT(0);
    if (piece > 0) {
      if (!producer) named_barrier_sync(kEpilogueBarrier, kMathWarps * 32);
    } else if (producer) {
      __syncwarp();
#ifdef CLO_DEV_STARTUP_SYNC  // dev builds only: the producer waits too (racecheck's view of bar.arrive, stop 113)
      named_barrier_sync(kStartupBarrier, kThreads);
#else
      named_barrier_arrive(kStartupBarrier, kThreads);
#endif
    } else {
      named_barrier_sync(kStartupBarrier, kThreads);
    }
#ifdef CLO_DEV_STAMPS
    if (stamps_on && producer && lane == 0) stamp[6] = clk();
#endif

    constexpr int kOTiles = kNarrow ? D / 16 : kDTiles;  // O^T fragments of 16 columns (kNarrow), or 8
    float o[kOTiles][4];
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY};
    float row_sum[2] = {0.f, 0.f};
    // Q's fragments in registers for the whole loop where they fit (D <= 128: up to 32
    // registers; this kernel has one block or two per SM): one ldmatrix fewer per k-step
    // on each tile's latency chain. The narrow tile keeps half of each (its rows 0-7: D / 8
    // registers) at every D; the 16-row tile reads them from q_s per tile from D = 160, and
    // so do the balanced schedule's two-row-tile blocks: with Q in registers the piece loop
    // sat at the 168-register cap of 9 warps, where ptxas loaded K's fragments one or two
    // k-steps ahead; Q from smem (157-159 registers) measured 1.2-1.9 us faster on MQA
    // B=136-170 and Nq 8 B=17, 3.2-3.6 us on ragged MQA (stop 84). A later piece's q rows
    // are written after the epilogue's first barrier, which every math warp reaches after
    // its last read of the previous rows.
    constexpr bool kQInRegs = (D <= 128 && !(kBalanced && kRowTiles > 1)) || kNarrow;
    const T* q_tile = q_s + row_sub * kRowsPerBlock * kQStride;  // this warp's 16 rows
    uint32_t q_regs[kQInRegs ? D / 16 : 1][4];
    if constexpr (kQInRegs) {
      if (!producer) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) decode_q_frag<T, kQStride>(q_tile, kk, q_regs[kk]);
      }
    }
    constexpr bool kScaledQ = decode_fp8_scales_q<T, KVT>();
    using MathT = std::conditional_t<kScaledQ, __half, T>;
    float q_unscale[2] = {1.f, 1.f};
    if constexpr (kScaledQ) {
      if (!producer) decode_read_q_unscale<D, kQStride>(q_s, q_unscale);  // after the start-up barrier
    }
    const auto q_frag = [&](int kk, uint32_t (&a)[4]) {
      if constexpr (kQInRegs) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = q_regs[kk][i];
      } else {
        decode_q_frag<T, kQStride>(q_tile, kk, a);
      }
    };

    if (producer) {
      // Lane l < n_boxes issues box l of K and of V (box_rows keys each) into every
      // plane; the stage's "full" mbarrier counts the bytes of every box issued for the
      // tile. A box whose first key is past the end is not issued (its table entry may be
      // anything); one with a bad block index neither: its rows stay stale, harmless
      // since that sequence's output is NaN. Rows past the end inside an issued box are
      // real memory (other tokens, garbage): the math warps mask their V past the end in
      // registers (the last tile only).
      // Bytes of one box row group over the planes that hold real columns (64-column
      // planes, then the tail plane's 32 columns).
      const uint32_t box_bytes =
          static_cast<uint32_t>(box_rows) * sizeof(T) *
          (kPlaneCols * min(planes, kWidePlanes) + (planes > kWidePlanes ? kTailPlaneCols : 0));
      for (int t = 0; t < n_tiles; ++t) {
        const int gt = tiles_done + t;  // the block's tile count: stage and phase
        const int stage = gt % kStages;
        const int my_pos = start + t * kTileTokens + my_key;
        const int e = ent[0];
#pragma unroll
        for (int s = 0; s + 1 < kStages; ++s) ent[s] = ent[s + 1];
        const int ahead = my_pos + kStages * kTileTokens;
        ent[kStages - 1] = box_lane && ahead < end ? cur.lookup(ahead) : 0;
        if (gt >= kStages) tma::mbarrier_wait(empty_bar + stage, ((gt / kStages) - 1) & 1);
        CLO_DEV_CHAOS_POINT(1);
        // A box wholly below the lowest visible key (sliding window) is not issued either.
        bool issue = box_lane && my_pos < end && my_pos + box_rows > range.lowest;
        if (issue && !cur.entry_ok(e)) {
          bad = true;
          issue = false;
        }
        const uint32_t boxes = __popc(__ballot_sync(0xffffffffu, issue));
#ifdef CLO_DEV_STAMPS
        if (stamps_on && t == 0 && lane == 0) stamp[1] = clk();
#endif
        uint64_t* bar = full_bar + stage;
        if constexpr (kBalanced) {
          if (__any_sync(0xffffffffu, bad) && lane == 0) piece_bad[piece] = 1;  // released by the arrive
        }
        if (lane == 0) tma::mbarrier_arrive_expect_tx(bar, boxes * 2u * box_bytes);
        __syncwarp();
        CLO_DEV_CHAOS_POINT(2);
        if (issue) {
          // Box rows start at a multiple of 8 keys: the swizzle phase (row % 8) matches.
          T* ks = kv_s + stage * 2 * kTileElems;
          T* vs = ks + kTileElems;
          const int row = cur.tma_row(e, my_pos);
          // the group of my_key's rows, every plane (a kTailSpans instance always: the launcher
          // runs it on tail-span maps only, and its per-plane boxes below would not fit its layout)
          if (kTailSpans || (decode_spans_planes<kStageCols>() && spans_planes)) {
            const int at = decode_kv_offset<kStageCols>(my_key, 0, box_lg);
            decode_tma_row_box<KV>(ks + at, &k_map, kvh, row, b, bar);
            decode_tma_row_box<KV>(vs + at, &v_map, kvh, row, b, bar);
          } else {
#pragma unroll
            for (int pl = 0; pl < kPlanes; ++pl) {
              if (pl >= planes) break;
              const bool tail = pl == kWidePlanes;  // the 32-column tail plane (D = 96)
              const int at = decode_kv_offset<kStageCols>(my_key, pl * 8, box_lg);
              decode_tma_box<KV>(ks + at, tail ? &k_tail_map : &k_map, pl * kColsPerPlane, kvh, row, b, bar);
              decode_tma_box<KV>(vs + at, tail ? &v_tail_map : &v_map, pl * kColsPerPlane, kvh, row, b, bar);
            }
          }
        }
      }
    } else {
      for (int t = 0; t < n_tiles; ++t) {
        const int gt = tiles_done + t;
        const int stage = gt % kStages;
        const int tok0 = start + t * kTileTokens + key_warp * 16;
        // Every warp waits for the tile, also one whose keys are all past the end (the last
        // tile), which then skips the math: its "empty" arrive below counts toward whichever
        // phase is pending. Unwaited, it could land in the phase of tile gt - kStages that a
        // slower warp is still reading, complete it, and let the producer refill the stage
        // under that warp (stop 80: wrong tiles under delay injection and compute-sanitizer's
        // timing, boxes of 32 and 64 keys). The producer arrives on every tile's "full"
        // barrier, boxes or none: the wait ends.
        tma::mbarrier_wait(full_bar + stage, (gt / kStages) & 1);
        if (tok0 < end) {  // warp-uniform
          CLO_DEV_CHAOS_POINT(3);
#ifdef CLO_DEV_STAMPS
          if (stamps_on && t == 0 && tid == 0) stamp[2] = clk();
          if (stamps_on && t + 1 == n_tiles && tid == 0) stamp[7] = clk();
#endif
          const T* ks = kv_s + stage * 2 * kTileElems;
          const T* vs = ks + kTileElems;
          // Keys past the end in this warp's 16 rows (the last tile only), or below the lowest
          // visible one (sliding window; the first tile of the first split only): a box brought
          // real memory there (other tokens; garbage, even NaN) or nothing (stale smem). Their
          // scores are masked to -inf by a select (K may stay), but P = 0 times a non-finite V
          // is NaN: the masked instance clears their V in registers after its ldmatrix
          // (decode_v_key_mask; the branch is warp-uniform). In registers, not in smem: no
          // barrier between the two row tiles' warps that read these rows, and no proxy fence
          // before the stage's next TMA write (csrc/decode/NOTES.md, stops 113-116).
          const int valid_rows = end - tok0, below = range.lowest - tok0;
          const auto warp_tile = [&](auto mask_v) {
            constexpr bool kMaskV = decltype(mask_v)::value;
            const DecodeVKeyMask vmask = kMaskV ? decode_v_key_mask(below, valid_rows) : DecodeVKeyMask{};
#ifndef CLO_DEV_NO_MATH  // dev probe builds only: the load path alone (the output is garbage)
            if constexpr (kNarrow) {
              decode_warp_tile_narrow<T, D, kMaskV>(q_frag, ks, vs, box_lg, key_warp * 16, tok0, range, p, o, row_max,
                                                    row_sum, vmask);
            } else if constexpr (kDequant) {
              decode_warp_tile_fp8<MathT, D, kScaledQ, kMaskV>(
                  q_frag, reinterpret_cast<const MathT*>(ks), reinterpret_cast<const MathT*>(vs), box_lg, key_warp * 16,
                  tok0, range, p, o, row_max, row_sum, q_unscale, vmask);
            } else {
              decode_warp_tile<T, D, kMaskV>(q_frag, ks, vs, box_lg, key_warp * 16, tok0, range, p, o, row_max, row_sum,
                                             vmask
#ifdef CLO_DEV_STAMPS
                                             , stamps_on && t + 1 == n_tiles && tid == 0 ? stamp + 12 : nullptr
#endif
              );
            }
#endif
          };
          if (valid_rows < 16 || below > 0) {
            warp_tile(std::true_type{});
          } else {
            warp_tile(std::false_type{});
          }
        }
        // This warp's reads of the stage are done (the ldmatrix results fed the mma above).
        CLO_DEV_CHAOS_POINT(4);
        __syncwarp();
        if (lane == 0) tma::mbarrier_arrive(empty_bar + stage);
      }
    }

    // Every issued box has landed: every math warp waited for each tile's full barrier
    // before the epilogue's first barrier.
#ifdef CLO_DEV_STAMPS
    if (stamps_on && tid == 0) stamp[3] = clk();
#endif
    if constexpr (kBalanced) {
      // The math warps alone, in their own scratch: the producer is already issuing the
      // next piece's boxes. Warp 0 has waited for every tile of this piece (the flag).
      if (!producer) {
        bad = bad || *reinterpret_cast<volatile int*>(piece_bad + piece) != 0;
        decode_epilogue<T, D, kMathWarps * 32, kMathWarps, kDequant, true, kRowTiles, kNarrow>(p, w, o, row_max,
                                                                                               row_sum, bad, eff,
                                                                                               scratch);
      }
    } else {
      constexpr bool kMayCluster = decode_runs_split_clusters<T, D, kStages, KVT, kSchedule, kRowTiles>();
      decode_epilogue<T, D, kThreads, kMathWarps, kDequant, false, kRowTiles, kNarrow, kMayCluster>(
          p, w, o, row_max, row_sum, bad, eff, smem);
    }
    tiles_done += n_tiles;
    more = kBalanced && sk.pos < sk.hi && piece + 1 < kDecodeMaxPieces;
    if (more) {
      w = (!kPlansByLength || sk.tiles_cap > 0) ? decode_streamk_piece(p, sk) : decode_streamk_len_piece(p, kv, sk);
      spec_start = decode_split_start(p, w, kv.capacity());
    }
  }  // pieces
#ifdef CLO_DEV_STAMPS
  if (stamps_on && tid == 0) {
    stamp[9] = clk();
    stamp[4] = now();
  }
#endif
#endif  // __CUDA_ARCH__ >= 900
}

// The L2 promotion of the decode K/V tensor maps, by the cache rows' element size and the
// real head dim (of one head, also under head pairs): the stream rule
// (tma::stream_l2_promotion) on 16-bit caches, except heads of 192 columns; those and FP8
// caches keep 256 B, which the H200 read faster at most of their grids (NOTES.md, "L2
// promotion on the H200": 16-bit D = 192 paged B=64/2K MHA 837.2 us at 128 B against
// 795.5-803.6, FP8 D = 64 B=64/2K/GQA 42.9 against 40.4). D = 96 head pairs, 192-column
// rows of two 96-column heads, keep the stream rule (B=64/2K/MHA 382.7 us, 401.0 at 256 B).
inline CUtensorMapL2promotion decode_kv_l2_promotion(bool fp8, int real_head_dim) {
  return !fp8 && real_head_dim != 192 ? tma::stream_l2_promotion() : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
}

// The tensor maps for the K and V of `a` (see DecodeTmaMaps): returns the box's
// key rows (min(block_size, 64), or 64 for the strided layout), or 0 where TMA cannot
// describe the cache or the driver lacks the encoder (the caller then runs the cp.async kernel):
// block_size < 8 (a box must start at a multiple of 8 rows, the swizzle's period), a
// base not 16-byte aligned, a byte stride not a multiple of 16 (or >= 2^40), more than
// 2^31 - 1 token rows. `promo`: the maps' L2 promotion (decode_kv_l2_promotion);
// `want_row_boxes`: one box over every plane of its rows where the head dim allows
// (decode_row_boxes_pay, decode_wide_row_boxes_pay); `want_tail_spans`: 16-bit D = 96
// block-16 pages as three 32-column planes under one box (two-row-tile blocks where
// decode_wide_row_boxes_pay; the caller runs the even grid on them: no other schedule has
// those instances).
template <typename T, int D, bool kPaged, typename KVT = T>
int encode_decode_tma_maps(const DecodeAttentionArgs& a, DecodeTmaMaps& maps, CUtensorMapL2promotion promo,
                           bool want_row_boxes, bool want_tail_spans = false) {
  constexpr uint64_t kElem = sizeof(KVT);
  constexpr uint32_t kBoxCols = decode_plane_cache_cols<T, KVT>();  // one 128-byte line
  constexpr bool kTail = decode_has_tail_plane<decode_stage_cols<T, D, KVT>()>();
  constexpr uint32_t kTailBoxCols = kTailPlaneCols * sizeof(T) / kElem;  // one 64-byte line
  constexpr CUtensorMapDataType kType =
      sizeof(KVT) == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                       : (std::is_same_v<T, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  auto stride_ok = [](uint64_t bytes) { return bytes % 16 == 0 && bytes > 0 && bytes < (uint64_t(1) << 40); };
  // K and V maps for boxes `box` (box[0] the 64-column planes' width) and their tail
  // plane's (32 columns, where the kernel has one; else copies).
  auto encode = [&](int rank, const uint64_t* dims, const uint64_t* k_strides, const uint64_t* v_strides,
                    uint32_t* box) {
    constexpr CUtensorMapSwizzle kSw128 = CU_TENSOR_MAP_SWIZZLE_128B, kSw64 = CU_TENSOR_MAP_SWIZZLE_64B;
    box[0] = kBoxCols;
    if (tma::encode_tiled(&maps.k, kType, a.k, rank, dims, k_strides, box, kSw128, promo) != cudaSuccess ||
        tma::encode_tiled(&maps.v, kType, a.v, rank, dims, v_strides, box, kSw128, promo) != cudaSuccess)
      return false;
    maps.k_tail = maps.k;
    maps.v_tail = maps.v;
    if constexpr (kTail) {
      box[0] = kTailBoxCols;
      if (tma::encode_tiled(&maps.k_tail, kType, a.k, rank, dims, k_strides, box, kSw64, promo) != cudaSuccess ||
          tma::encode_tiled(&maps.v_tail, kType, a.v, rank, dims, v_strides, box, kSw64, promo) != cudaSuccess)
        return false;
    }
    return true;
  };
  // Whole 64-column planes (two or more, so no tail plane): one box over every plane of its
  // rows, the plane a dim of its own that steps one 128-byte line (DecodeTmaMaps), through
  // `encode`; where the driver refuses such a map, the per-plane maps below.
  const uint64_t planes = a.head_dim / kBoxCols;
  const bool row_boxes = want_row_boxes && decode_spans_planes<decode_stage_cols<T, D, KVT>()>() &&
                         a.head_dim % kBoxCols == 0 && planes >= 2;
  // 16-bit D = 96 block-16 pages as three 32-column planes (decode_runs_tail_spans): where the
  // caller asks (two-row-tile blocks, decode_wide_row_boxes_pay) or under CLO_DECODE_PLANE_BOXES=2.
  const bool tail_row_boxes = decode_runs_tail_spans<T, D, KVT, kPaged>() && a.head_dim == D &&
                              a.block_size == (1 << kDecodeTailSpanLog2) &&
                              (want_tail_spans || (want_row_boxes && decode_dev_plane_boxes() == kDecodePlaneBoxesOn));
  auto encode_row_boxes = [&](int rank, const uint64_t* dims, const uint64_t* k_strides, const uint64_t* v_strides,
                              uint32_t* box) {
    maps.spans_planes = encode(rank, dims, k_strides, v_strides, box);
    if (!maps.spans_planes) cudaGetLastError();
    return maps.spans_planes;
  };
  if (a.k == nullptr || a.v == nullptr || !aligned(a.k) || !aligned(a.v)) return 0;
  if constexpr (kPaged) {
    const int64_t rows = static_cast<int64_t>(a.num_blocks) * a.block_size;
    if (a.block_size < 8 || a.num_blocks <= 0 || rows > INT32_MAX) return 0;
    const int box_rows = a.block_size < kTileTokens ? a.block_size : kTileTokens;
    const uint64_t dims[3] = {uint64_t(a.head_dim), uint64_t(a.num_kv_heads), uint64_t(rows)};
    const uint64_t strides[2] = {a.head_dim * kElem, uint64_t(a.num_kv_heads) * a.head_dim * kElem};
    if (!stride_ok(strides[1])) return 0;
    const uint64_t line = kBoxCols * kElem;
    const uint64_t row_dims[4] = {kBoxCols, uint64_t(rows), planes, uint64_t(a.num_kv_heads)};
    const uint64_t row_strides[3] = {strides[1], line, strides[0]};
    uint32_t row_box[4] = {kBoxCols, uint32_t(box_rows), uint32_t(planes), 1u};
    if (row_boxes && encode_row_boxes(4, row_dims, row_strides, row_strides, row_box)) return box_rows;
    if (tail_row_boxes) {  // (32 columns, rows, 3 planes stepping 64 bytes, Hkv), 64-byte swizzle
      const uint64_t tail_dims[4] = {kTailPlaneCols, uint64_t(rows), D / kTailPlaneCols, uint64_t(a.num_kv_heads)};
      const uint64_t tail_strides[3] = {strides[1], kTailPlaneCols * kElem, strides[0]};
      const uint32_t tail_box[4] = {kTailPlaneCols, uint32_t(box_rows), D / kTailPlaneCols, 1u};
      maps.spans_planes = tma::encode_tiled(&maps.k, kType, a.k, 4, tail_dims, tail_strides, tail_box,
                                            CU_TENSOR_MAP_SWIZZLE_64B, promo) == cudaSuccess &&
                          tma::encode_tiled(&maps.v, kType, a.v, 4, tail_dims, tail_strides, tail_box,
                                            CU_TENSOR_MAP_SWIZZLE_64B, promo) == cudaSuccess;
      if (maps.spans_planes) {
        maps.k_tail = maps.k;
        maps.v_tail = maps.v;
        return box_rows;
      }
      cudaGetLastError();  // a box per plane below
    }
    uint32_t box[3] = {kBoxCols, 1u, uint32_t(box_rows)};
    if (!encode(3, dims, strides, strides, box)) {
      cudaGetLastError();
      return 0;
    }
    return box_rows;
  } else {
    if (a.seq_len_k <= 0) return 0;
    const uint64_t dims[4] = {uint64_t(a.head_dim), uint64_t(a.seq_len_k), uint64_t(a.num_kv_heads),
                              uint64_t(a.batch)};
    uint32_t box[4] = {kBoxCols, uint32_t(kTileTokens), 1u, 1u};
    // Byte strides of dims 1..3; a dim of extent 1 never steps, any valid stride does.
    auto make = [&](int64_t sn, int64_t sh, int64_t sb, uint64_t out[3]) {
      const int64_t el[3] = {sn, sh, sb};
      uint64_t dense = a.head_dim * kElem;
      for (int i = 0; i < 3; ++i) {
        out[i] = el[i] > 0 ? uint64_t(el[i]) * kElem : 0;
        if (dims[i + 1] == 1 && !stride_ok(out[i])) out[i] = dense;
        if (!stride_ok(out[i])) return false;
        dense = out[i] * dims[i + 1];
      }
      return true;
    };
    uint64_t ks[3], vs[3];
    if (!make(a.k_stride_n, a.k_stride_h, a.k_stride_b, ks) || !make(a.v_stride_n, a.v_stride_h, a.v_stride_b, vs))
      return 0;
    const uint64_t line = kBoxCols * kElem;
    const uint64_t row_dims[5] = {kBoxCols, dims[1], planes, dims[2], dims[3]};
    const uint64_t k_row_strides[4] = {ks[0], line, ks[1], ks[2]}, v_row_strides[4] = {vs[0], line, vs[1], vs[2]};
    uint32_t row_box[5] = {kBoxCols, uint32_t(kTileTokens), uint32_t(planes), 1u, 1u};
    if (row_boxes && encode_row_boxes(5, row_dims, k_row_strides, v_row_strides, row_box)) return kTileTokens;
    if (!encode(4, dims, ks, vs, box)) {
      cudaGetLastError();
      return 0;
    }
    return kTileTokens;
  }
}

// box_rows from encode_decode_tma_maps. cudaErrorNotSupported where the kernel has no
// sm_90 code (a build without sm_90, run through PTX JIT): the caller falls back.
template <typename T, int D, int kStages, class KV, typename KVT = T, int kSchedule = kDecodeEvenGrid,
          int kRowTiles = 1, bool kNarrow = false, bool kTailSpans = false>
cudaError_t launch_decode_attention_tma_kernel(const DecodeKernelParams& p, const KV& kv, dim3 grid,
                                              cudaStream_t stream, bool pdl, const DecodeTmaMaps& maps,
                                              int box_rows) {
  constexpr size_t smem = decode_tma_smem_bytes<T, D, kStages, KVT, kSchedule == kDecodeBalanced, kRowTiles>();
  static_assert(smem <= 227 * 1024, "the TMA kernel's shared memory must fit the H100's 227 KB");
  auto kernel = decode_attention_tma_kernel<T, D, kStages, KV, KVT, kSchedule, kRowTiles, kNarrow, kTailSpans>;
  if (box_rows < 8 || box_rows > kTileTokens || kTileTokens % box_rows != 0) return cudaErrorInvalidValue;
  // a 96-column tile's layout is the instance's: the maps must match it
  if (decode_tail_spans_cols<decode_stage_cols<T, D, KVT>()>() &&
      (maps.spans_planes != kTailSpans || (kTailSpans && box_rows != (1 << kDecodeTailSpanLog2))))
    return cudaErrorInvalidValue;
  if (smem > static_cast<size_t>(smem_budget_per_block())) return cudaErrorNotSupported;  // the caller falls back
  static int state[64] = {0};
  const cudaError_t err = configure_decode_kernel_once(kernel, smem, true, state);
  if (err != cudaSuccess) return err;
  constexpr int kThreads = decode_tma_threads(kRowTiles);
  size_t launch_smem = smem;
  unsigned cluster_splits = 1;  // a cluster's blocks along z
  if (p.split_cluster) {
    // The even grid's splits as clusters (1, 1, splits) of one block per SM: smem past half an
    // SM's, or the cluster scheduler may put two blocks of a cluster on one SM while others
    // idle (NOTES.md v13); and only one wave of such clusters (cudaErrorNotSupported: the
    // caller launches without them).
    if constexpr (!decode_runs_split_clusters<T, D, kStages, KVT, kSchedule, kRowTiles>()) {
      return cudaErrorNotSupported;
    } else {
      const int splits = static_cast<int>(grid.z);
      if (splits < 2 || splits > kDecodeMaxClusterSplits) return cudaErrorInvalidValue;
      launch_smem = std::max(smem, static_cast<size_t>(device_smem_optin() / 2 + 1024));
      // per device and cluster size, asked once: clusters that fit at once (0 not asked yet, -1 none)
      static int fits[64][kDecodeMaxClusterSplits + 1] = {};
      int& fit = fits[current_device_slot()][splits];
      if (fit == 0) {
        if (const cudaError_t e = set_dynamic_smem(kernel, launch_smem); e != cudaSuccess) return e;
        const int n = cluster::max_active_clusters(kernel, splits, kThreads, launch_smem);
        fit = n > 0 ? n : -1;
      }
      if (fit <= 0 || static_cast<int64_t>(grid.x) * grid.y > fit) return cudaErrorNotSupported;
      cluster_splits = static_cast<unsigned>(splits);
    }
  }
  // KV head pairs as clusters (p.head_cluster), where the grid's x holds whole pairs and one
  // block fills an SM (two blocks of a cluster never share one while other SMs idle)
  const unsigned cluster_heads =
      cluster_splits == 1 && p.head_cluster && grid.x % 2 == 0 && 2 * smem > static_cast<size_t>(device_smem_optin())
          ? 2u
          : 1u;
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = cluster::launch_config(grid, kThreads, launch_smem, stream,
                                                        dim3(cluster_heads, 1, cluster_splits), attr, pdl);
  return cudaLaunchKernelEx(&cfg, kernel, p, kv, maps.k, maps.v, maps.k_tail, maps.v_tail, box_rows,
                            maps.spans_planes);
}

// The kernels instantiated with the balanced schedule (decode_streamk_blocks): 16-bit, at
// decode_balanced_head_dim for the layout.
template <typename T, int D, typename KVT, bool kPaged>
constexpr bool decode_runs_streamk() {
  return decode_balanced_head_dim(D, kPaged) && !decode_dequantizes<T, KVT>();
}
// The kernels instantiated with two row tiles per block (decode_attention_tma_kernel's
// kRowTiles; where they run: decode_wide_rows_pay): 16-bit D = 128, and 64 and 96 (stop 88).
template <typename T, int D, typename KVT>
constexpr bool decode_runs_wide_rows() {
  return (D == 64 || D == 96 || D == 128) && !decode_dequantizes<T, KVT>();
}
// ... and of those, with the balanced schedule (decode_wide_rows_runs_balanced): D = 128.
template <typename T, int D, typename KVT>
constexpr bool decode_runs_wide_rows_balanced() {
  return D == 128 && decode_runs_wide_rows<T, D, KVT>();
}
// The kernels that run the spread tail (decode_dev_spread): 16-bit D = 128, whose 3-stage
// blocks fit two per SM.
template <typename T, int D, typename KVT>
constexpr bool decode_runs_spread() {
  return D == 128 && !decode_dequantizes<T, KVT>();
}
// The balanced kernel's depth: 3 stages where they fit beside its epilogue scratch, else 2;
// 2 at D = 64, whose two blocks per SM (decode_streamk_blocks_per_sm) keep four tiles in
// flight per SM (NOTES.md v33: contiguous GQA B=40/2K 62.5 -> 61.4 us, MHA B=10 61.8 -> 60.4,
// B=34 54.1 -> 54.5, level elsewhere).
template <typename T, int D, typename KVT>
constexpr int decode_streamk_stages() {
  if constexpr (D == 64) return 2;
  return decode_tma_smem_bytes<T, D, 3, KVT, true>() <= 227 * 1024 ? 3 : 2;
}
// The TMA kernel with `stages` pipeline stages: 2, 3 or 4 where they fit in shared memory
// (decode_tma_stages_fit; two row tiles also 5 and 6 in CLO_DEV_DEEP_STAGES builds), else
// cudaErrorInvalidValue; with p.streamk_blocks, the balanced
// schedule's kernel (2 or 3 stages; at two row tiles 3). (The spread tail launches its 3-stage
// kernel itself.) kRowTiles 2: the kernel at two row tiles per block (decode_runs_wide_rows; p
// and grid count 32-row units). kNarrow: the narrow tile (decode_runs_narrow), one row tile.
template <typename T, int D, int kStages, typename KVT = T, int kRowTiles = 1>
constexpr bool decode_tma_stages_fit() {
  return decode_tma_smem_bytes<T, D, kStages, KVT, false, kRowTiles>() <= 227 * 1024;
}
static_assert(decode_tma_smem_bytes<__half, 96, 4>() == kDecodeD96FourStageSmem &&
                  decode_tma_smem_bytes<__nv_bfloat16, 96, 4>() == kDecodeD96FourStageSmem,
              "decode_tma_stages_for's 4-stage D = 96 rule asks the limit for these bytes");
// The even grid at `stages` deep (cudaErrorInvalidValue where that depth has no instance);
// kTailSpans: the instances of the tail-span layout, for maps that span a 96-column tile's planes.
template <typename T, int D, typename KVT, int kRowTiles, bool kNarrow, bool kTailSpans, class KV>
cudaError_t launch_decode_even_grid_stages(int stages, const DecodeKernelParams& p, const KV& kv, dim3 grid,
                                           cudaStream_t stream, bool pdl, const DecodeTmaMaps& maps, int box_rows) {
  switch (stages) {
    case 2:
      return launch_decode_attention_tma_kernel<T, D, 2, KV, KVT, kDecodeEvenGrid, kRowTiles, kNarrow, kTailSpans>(
          p, kv, grid, stream, pdl, maps, box_rows);
    case 3:
      if constexpr (decode_tma_stages_fit<T, D, 3, KVT, kRowTiles>())
        return launch_decode_attention_tma_kernel<T, D, 3, KV, KVT, kDecodeEvenGrid, kRowTiles, kNarrow, kTailSpans>(
            p, kv, grid, stream, pdl, maps, box_rows);
      break;
    case 4:
      if constexpr (decode_tma_stages_fit<T, D, 4, KVT, kRowTiles>())
        return launch_decode_attention_tma_kernel<T, D, 4, KV, KVT, kDecodeEvenGrid, kRowTiles, kNarrow, kTailSpans>(
            p, kv, grid, stream, pdl, maps, box_rows);
      break;
#ifdef CLO_DEV_DEEP_STAGES
    // Dev builds only (CUDA_LLM_OPS_DEV_DEFINES=CLO_DEV_DEEP_STAGES, selected by the
    // CLO_DECODE_TMA_STAGES knob): two-row-tile blocks, one per SM at head_dim 96 and 128
    // (registers), 5 or 6 stages deep, to test whether paged caches' per-plane boxes want
    // more bytes in flight than 4 stages hold (NOTES.md "Stop 91"). Not in the product
    // builds: each depth is another instance of every two-tile kernel.
    case 5:
      if constexpr (kRowTiles == 2 && decode_tma_stages_fit<T, D, 5, KVT, kRowTiles>())
        return launch_decode_attention_tma_kernel<T, D, 5, KV, KVT, kDecodeEvenGrid, kRowTiles, kNarrow, kTailSpans>(
            p, kv, grid, stream, pdl, maps, box_rows);
      break;
    case 6:
      if constexpr (kRowTiles == 2 && decode_tma_stages_fit<T, D, 6, KVT, kRowTiles>())
        return launch_decode_attention_tma_kernel<T, D, 6, KV, KVT, kDecodeEvenGrid, kRowTiles, kNarrow, kTailSpans>(
            p, kv, grid, stream, pdl, maps, box_rows);
      break;
#endif
    default: break;
  }
  return cudaErrorInvalidValue;
}

template <typename T, int D, typename KVT = T, int kRowTiles = 1, bool kNarrow = false, class KV>
cudaError_t launch_decode_attention_tma_stages(int stages, const DecodeKernelParams& p, const KV& kv, dim3 grid,
                                               cudaStream_t stream, bool pdl, const DecodeTmaMaps& maps,
                                               int box_rows) {
  static_assert(!kNarrow || (kRowTiles == 1 && decode_runs_narrow<T, D, KVT>()), "see decode_runs_narrow");
  if (p.streamk_blocks > 0) {  // the balanced schedule (decode_runs_streamk): 2 or 3 stages
    if constexpr (kRowTiles == 1 && decode_runs_streamk<T, D, KVT, KV::kPagedLayout>()) {
      if (stages == 2)
        return launch_decode_attention_tma_kernel<T, D, 2, KV, KVT, kDecodeBalanced, 1, kNarrow>(p, kv, grid, stream,
                                                                                                pdl, maps, box_rows);
      if constexpr (decode_streamk_stages<T, D, KVT>() == 3) {
        if (stages == 3)
          return launch_decode_attention_tma_kernel<T, D, 3, KV, KVT, kDecodeBalanced, 1, kNarrow>(
              p, kv, grid, stream, pdl, maps, box_rows);
      }
    } else if constexpr (kRowTiles == 2 && decode_runs_wide_rows_balanced<T, D, KVT>() &&
                         decode_tma_smem_bytes<T, D, 3, KVT, true, 2>() <= 227 * 1024) {
      if (stages == 3)
        return launch_decode_attention_tma_kernel<T, D, 3, KV, KVT, kDecodeBalanced, 2>(p, kv, grid, stream, pdl,
                                                                                        maps, box_rows);
    }
    return cudaErrorInvalidValue;
  }
  if constexpr (decode_runs_tail_spans<T, D, KVT, KV::kPagedLayout>()) {  // the encoder's tail spans
    if (maps.spans_planes)
      return launch_decode_even_grid_stages<T, D, KVT, kRowTiles, kNarrow, true>(stages, p, kv, grid, stream, pdl,
                                                                                  maps, box_rows);
  }
  return launch_decode_even_grid_stages<T, D, KVT, kRowTiles, kNarrow, false>(stages, p, kv, grid, stream, pdl, maps,
                                                                               box_rows);
}

}  // namespace cuda_llm_ops::decode
