// Device helpers shared by the GEMM kernels: swizzled tile offsets, the block
// rasterisation and the alpha/beta epilogue stores.
#pragma once

#include <type_traits>

#include "cuda_llm_ops/common.cuh"
#include "cuda_llm_ops/pipeline.cuh"
#include "gemm/gemm.h"

namespace cuda_llm_ops::gemm {

// Physical 16-byte chunk of logical chunk `chunk` in row `row` of a shared tile
// whose rows are `RowChunks` chunks wide. ldmatrix reads 8 rows at one logical
// chunk; the XOR key makes those 8 reads land in 8 distinct bank groups:
//  - rows of >= 8 chunks (>= 128 B): key = row % 8;
//  - rows of 4 chunks (64 B, two rows per 128-byte bank line): key = (row / 2) % 4,
//    and the row's half of the line separates the other bit.
template <int RowChunks>
CLO_DEVICE int swizzle_chunk(int row, int chunk) {
  if constexpr (RowChunks >= 8) {
    return chunk ^ (row & 7);
  } else if constexpr (RowChunks == 4) {
    return chunk ^ ((row >> 1) & 3);
  } else if constexpr (RowChunks == 2) {
    return chunk ^ ((row >> 2) & 1);
  } else {
    return chunk;
  }
}

// Block (bm, bn) of linear block id: groups of `group` block-rows (group > 0) are
// walked column by column, so the blocks resident at one time share A rows and B
// columns in L2 (the usual "grouped" rasterisation); group < 0 groups -group
// block-columns and walks them row by row instead.
struct BlockCoord {
  int bm, bn;
};
CLO_DEVICE BlockCoord grouped_block(int bid, int grid_m, int grid_n, int group = 8) {
  const bool by_rows = group > 0;
  const int g = by_rows ? group : -group;
  const int rows = by_rows ? grid_m : grid_n, cols = by_rows ? grid_n : grid_m;
  const int per_group = g * cols;
  const int first = (bid / per_group) * g;
  const int gsize = min(rows - first, g);
  const int in_group = bid % per_group;
  const int r = first + in_group % gsize, c = in_group / gsize;
  return by_rows ? BlockCoord{r, c} : BlockCoord{c, r};
}

// D[row][col] = v (+ beta * C). int32 output (the int8 GEMMs) is exact: v is the int32
// accumulator, no alpha or C (the launchers reject C for int8).
template <typename TOut, typename V>
CLO_DEVICE void store_one(const GemmKernelArgs& args, int row, int col, V v) {
  if constexpr (std::is_same_v<TOut, int32_t>) {
    static_cast<int32_t*>(args.d)[row * args.ldd + col] = v;
  } else {
    if (args.has_c) {
      v += args.beta * to_float(static_cast<const TOut*>(args.c)[row * args.ldc + col]);
    }
    static_cast<TOut*>(args.d)[row * args.ldd + col] = from_float<TOut>(v);
  }
}

// Stores (v0, v1) at columns col, col + 1 of `row` (col even), with C added.
template <typename TOut>
CLO_DEVICE void store_pair(const GemmKernelArgs& args, int row, int col, float v0, float v1) {
  if (row >= args.M || col >= args.N) return;
  if (args.pair_ok && col + 1 < args.N) {
    const long long dc = row * args.ldc + col;
    if constexpr (sizeof(TOut) == 4) {
      if (args.has_c) {
        const float2 cv = *reinterpret_cast<const float2*>(static_cast<const float*>(args.c) + dc);
        v0 += args.beta * cv.x;
        v1 += args.beta * cv.y;
      }
      *reinterpret_cast<float2*>(static_cast<float*>(args.d) + row * args.ldd + col) = make_float2(v0, v1);
    } else {
      if (args.has_c) {
        const TOut* c = static_cast<const TOut*>(args.c) + dc;
        v0 += args.beta * to_float(c[0]);
        v1 += args.beta * to_float(c[1]);
      }
      const uint32_t packed = pack_float2<TOut>(v0, v1);
      *reinterpret_cast<uint32_t*>(static_cast<TOut*>(args.d) + row * args.ldd + col) = packed;
    }
    return;
  }
  store_one<TOut>(args, row, col, v0);
  if (col + 1 < args.N) store_one<TOut>(args, row, col + 1, v1);
}

}  // namespace cuda_llm_ops::gemm
