// Shared-memory layouts that avoid bank conflicts. Two tools:
//  - padding: a row stride of (cols + pad) elements shifts consecutive rows
//    across banks (the seed's "+1" for 4-byte elements; for 16-byte vector
//    accesses the pad must be 16 bytes, i.e. 8 halves or 4 floats);
//  - XOR swizzle of 16-byte chunks, which keeps rows dense (needed for
//    ldmatrix and cp.async 16-byte alignment) and wastes no memory.
#pragma once

#include "common.cuh"

namespace cuda_llm_ops {

// Row stride in elements that pads a row by `PadBytes` (default one 16-byte chunk).
template <typename T, int Cols, int PadBytes = 16>
struct PaddedRow {
  static constexpr int kStride = Cols + PadBytes / static_cast<int>(sizeof(T));
};

// Element offset of (row, col) in a row-major tile whose rows are `RowChunks`
// 16-byte chunks wide, with chunk index XORed by (row % 8). For rows of at
// least 8 chunks (128 bytes), 8 consecutive rows read at the same logical chunk
// hit 8 distinct chunk positions: conflict-free ldmatrix and 16-byte stores.
template <typename T, int RowChunks>
CLO_DEVICE int swizzle_offset(int row, int col) {
  constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  static_assert(RowChunks >= 1, "row must hold at least one 16-byte chunk");
  const int chunk = col / kElemsPerChunk;
  const int within = col % kElemsPerChunk;
  constexpr int kMask = RowChunks >= 8 ? 7 : (RowChunks >= 4 ? 3 : (RowChunks >= 2 ? 1 : 0));
  const int swizzled = chunk ^ (row & kMask);
  return row * RowChunks * kElemsPerChunk + swizzled * kElemsPerChunk + within;
}

// Allocation helper for dynamic shared memory carved into several arrays:
// each call returns the next region aligned to 128 bytes.
struct SmemAllocator {
  char* base;
  size_t offset = 0;
  CLO_DEVICE explicit SmemAllocator(void* p) : base(static_cast<char*>(p)) {}
  template <typename T>
  CLO_DEVICE T* take(size_t count) {
    offset = (offset + 127) & ~size_t(127);
    T* p = reinterpret_cast<T*>(base + offset);
    offset += count * sizeof(T);
    return p;
  }
};

// Host-side mirror of SmemAllocator to size the dynamic allocation.
struct SmemPlanner {
  size_t offset = 0;
  template <typename T>
  size_t add(size_t count) {
    offset = (offset + 127) & ~size_t(127);
    offset += count * sizeof(T);
    return offset;
  }
  size_t bytes() const { return offset; }
};

}  // namespace cuda_llm_ops
