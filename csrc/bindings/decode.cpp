// Torch binding of the decode area: paged decode attention, decode attention
// over a strided cache (few query rows), the paged KV append, and the helpers
// that size the split-KV workspace. The ops write into given buffers (vLLM's
// form, `Tensor(a!) out ... -> ()`): with `out` and a preallocated workspace a
// call allocates nothing, which CUDA-graph capture and replay need.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "bindings/checks.h"
#include "decode/decode.h"

namespace {

using namespace cuda_llm_ops;
using namespace cuda_llm_ops::binding;
namespace dec = cuda_llm_ops::decode;

void check_half_dtype(const at::Tensor& t, const char* name) {
  CLO_CHECK(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16, name,
              " must be float16 or bfloat16, got ", t.scalar_type());
}

// A paged cache pair: [num_blocks, block_size, num_kv_heads, head_dim] each, one shape,
// contiguous, on `like`'s device with its dtype or float8_e4m3fn (`like` checked
// before), 16-byte rows. Returns whether the caches are FP8.
bool check_paged_caches(const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& like,
                        const char* like_name) {
  const bool fp8 = k_cache.scalar_type() == at::kFloat8_e4m3fn;
  for (const auto& [t, name] : {std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"}}) {
    check_dim(*t, 4, name, "[num_blocks, block_size, num_kv_heads, head_dim]");
    check_cuda(*t, name);
    check_same_device(*t, like, name, like_name);
    CLO_CHECK(t->scalar_type() == like.scalar_type() || t->scalar_type() == at::kFloat8_e4m3fn, name,
              " must have ", like_name, "'s dtype ", like.scalar_type(), " or float8_e4m3fn, got ", t->scalar_type());
    check_contiguous(*t, name);
    check_rows_aligned(*t, name);
  }
  CLO_CHECK(k_cache.sizes() == v_cache.sizes(), "k_cache and v_cache must have the same shape, got ",
            k_cache.sizes(), " and ", v_cache.sizes());
  CLO_CHECK(v_cache.scalar_type() == k_cache.scalar_type(), "v_cache must have k_cache's dtype ",
            k_cache.scalar_type(), ", got ", v_cache.scalar_type());
  return fp8;
}

// Dequantization (attention) or quantization (append) scales of an FP8 cache: normal
// float32 values whose reciprocals are too (the append multiplies by 1 / scale; 0 * inf
// would be NaN); other caches take none (1.0), rather than have them silently ignored.
constexpr double kMinKvScale = kMinNormalFloat;
constexpr double kMaxKvScale = 1.0 / kMinKvScale;
void check_kv_scales(bool fp8, double k_scale, double v_scale) {
  for (const auto& [x, name] : {std::pair{k_scale, "k_scale"}, std::pair{v_scale, "v_scale"}}) {
    if (fp8)
      CLO_CHECK(x >= kMinKvScale && x <= kMaxKvScale, name, " must be a float32 in [", kMinKvScale, ", ",
                kMaxKvScale, "] (finite, > 0, normal, with a finite reciprocal), got ", x);
    else
      CLO_CHECK(x == 1.0, name, " applies to float8_e4m3fn caches only and must be 1.0 for 16-bit caches, got ", x);
  }
}

// A block table and its lengths: int32 [rows, max_blocks_per_seq] with a contiguous last
// dimension and contiguous int32 [rows], on `like`'s device (rows checked by the caller).
void check_block_table(const at::Tensor& block_tables, const at::Tensor& seq_lens, const at::Tensor& like,
                       const char* like_name) {
  check_dim(block_tables, 2, "block_tables", "[batch, max_blocks_per_seq]");
  check_dim(seq_lens, 1, "seq_lens", "[batch]");
  for (const auto& [t, name] : {std::pair{&block_tables, "block_tables"}, std::pair{&seq_lens, "seq_lens"}}) {
    check_cuda(*t, name);
    check_same_device(*t, like, name, like_name);
    check_dtype(*t, at::kInt, name);
  }
  check_contiguous(seq_lens, "seq_lens");
  CLO_CHECK(block_tables.size(1) >= 1, "block_tables must not be empty, got shape ", block_tables.sizes());
  CLO_CHECK(block_tables.stride(1) == 1, "block_tables must have a contiguous last dimension, got strides ",
            block_tables.strides());
}

// The geometry of a paged attention call of `batch` sequences over a cache of num_blocks x
// block_size slots (its table checked by check_block_table): a row per sequence, a power-of-two
// block size (the kernels split a key position by shift and mask), and int32 block indices and
// key positions.
void check_paged_geometry(const at::Tensor& block_tables, const at::Tensor& seq_lens, int64_t batch,
                          int64_t num_blocks, int64_t block_size) {
  CLO_CHECK(block_tables.size(0) == batch && seq_lens.size(0) == batch, "block_tables and seq_lens must have batch ",
            batch, " rows, got ", block_tables.size(0), " and ", seq_lens.size(0));
  CLO_CHECK(block_size >= 1 && (block_size & (block_size - 1)) == 0, "block_size (the cache's dim 1) must be a power of two, got ",
            block_size);
  CLO_CHECK(num_blocks >= 1, "the cache must hold at least one block, got num_blocks ", num_blocks);
  CLO_CHECK(num_blocks < (int64_t(1) << 31) && block_tables.size(1) * block_size < (int64_t(1) << 31),
            "num_blocks and max_blocks_per_seq x block_size (the keys a table row can address) must be < 2^31, got ",
            num_blocks, " and ", block_tables.size(1), " x ", block_size);
}

// The PagedTable fields (checked before).
void set_block_table(dec::PagedTable& a, const at::Tensor& block_tables, const at::Tensor& seq_lens,
                     int64_t num_blocks, int64_t block_size) {
  a.block_tables = block_tables.data_ptr<int>();
  a.table_stride = block_tables.stride(0);
  a.max_blocks_per_seq = static_cast<int>(block_tables.size(1));
  a.num_blocks = static_cast<int>(num_blocks);
  a.block_size = static_cast<int>(block_size);
  a.seq_lens = seq_lens.data_ptr<int>();
}

void check_head_dim(int64_t d, bool fp8_cache = false) {
  CLO_CHECK(dec::decode_kernel_head_dim(static_cast<int>(d)) != 0, "head_dim must be a multiple of 8 in [8, ",
            dec::kDecodeMaxHeadDim, "], got ", d);
  CLO_CHECK(dec::decode_head_dim_fits(static_cast<int>(d), fp8_cache), "head_dim ", d, " needs ",
              dec::decode_min_smem_bytes(static_cast<int>(d), fp8_cache),
              " bytes of shared memory per block in the decode kernels, more than this GPU allows (",
              smem_budget_per_block(), " bytes)");
}

// The size queries' (dtype, head_dim): a cache dtype the kernels take, a head dim they run.
void check_cache_dtype_and_head_dim(c10::ScalarType dtype, int64_t head_dim) {
  CLO_CHECK(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat8_e4m3fn,
            "dtype (the cache's) must be float16, bfloat16 or float8_e4m3fn, got ", dtype);
  check_head_dim(head_dim, dtype == at::kFloat8_e4m3fn);
}

// Sliding window and logit soft-capping (both attention ops). Windows of 2^30 keys or more
// are clamped to 2^30: no sequence has that many (keys are int32), and the kernel's
// window arithmetic stays inside int32.
void set_window_and_soft_cap(dec::DecodeAttentionArgs& a, int64_t window_left, double logits_soft_cap) {
  CLO_CHECK(window_left >= -1, "window_left must be >= -1 (-1: no sliding window), got ", window_left);
  CLO_CHECK(std::isfinite(logits_soft_cap) && logits_soft_cap >= 0.0,
            "logits_soft_cap must be finite and >= 0 (0: off), got ", logits_soft_cap);
  const float cap = static_cast<float>(logits_soft_cap);
  // Not one that float32 rounds to 0 (capping silently off) or whose cap * log2(e) overflows;
  // and scale / cap (times k_scale for FP8 caches, as the launcher folds them) must stay finite.
  CLO_CHECK(logits_soft_cap == 0.0 || score_factor_ok(cap),
            "logits_soft_cap must be 0 or a normal float32 of at most 1.7e38, got ", logits_soft_cap);
  const float score_scale = a.kv_fp8 ? a.scale * a.k_scale : a.scale;  // a.scale: checked_softmax_scale's
  CLO_CHECK(score_factor_ok(score_scale),
            "scale * k_scale (the FP8 cache's scores' factor) must stay a normal float32 of at most 1.7e38, got ",
            a.scale, " * ", a.k_scale);
  CLO_CHECK(cap == 0.0f || std::isfinite(score_scale / cap), "scale / logits_soft_cap must be finite as a float32, "
            "got ", score_scale, " / ", cap);
  a.window_left = static_cast<int>(std::min<int64_t>(window_left, int64_t(1) << 30));
  a.logits_soft_cap = cap;
}

// The optional log-sum-exp output: float32, contiguous, q's shape without head_dim.
float* resolve_lse(const std::optional<at::Tensor>& lse, const at::Tensor& q) {
  if (!lse.has_value()) return nullptr;
  const at::Tensor& t = *lse;
  check_cuda(t, "lse");
  check_same_device(t, q, "lse", "q");
  check_dtype(t, at::kFloat, "lse");
  check_contiguous(t, "lse");
  const auto rows = q.sizes().slice(0, q.dim() - 1);
  CLO_CHECK(t.sizes() == rows, "lse must have q's shape without head_dim ", rows, ", got ", t.sizes());
  return t.data_ptr<float>();
}

// The decode grid: (KV heads x row tiles, batch, splits).
// The launchers count a KV head's query rows (num_q_heads / num_kv_heads x seq_len_q) in int.
void check_grid(int64_t batch, int64_t num_q_heads, int64_t seq_len_q = 1) {
  CLO_CHECK(batch >= 1 && batch <= dec::kDecodeMaxBatch, "batch must be in [1, ", dec::kDecodeMaxBatch, "], got ",
              batch);
  CLO_CHECK(num_q_heads >= 1 && num_q_heads < (int64_t(1) << 31) && num_q_heads * seq_len_q < (int64_t(1) << 31),
            "num_q_heads and num_q_heads x seq_len_q must be in [1, 2^31), got ", num_q_heads, " x ", seq_len_q);
}

void check_num_splits(int64_t num_splits) {
  CLO_CHECK(num_splits >= 0 && num_splits <= dec::kMaxSplits, "num_splits must be in [0, ", dec::kMaxSplits,
            "] (0: the heuristic's), got ", num_splits);
}

// A split workspace tensor: float32, contiguous, on a CUDA device.
void check_workspace_tensor(const at::Tensor& w) {
  check_cuda(w, "workspace");
  check_dtype(w, at::kFloat, "workspace");
  check_contiguous(w, "workspace");
}

// Returns the workspace pointer of a split call that needs `need` floats (0: it does not
// split) and sets `floats` to the buffer's size: the given one (from the Python helpers:
// counters at rest, kept so by every call), or a fresh one whose counter slots (its last
// decode_workspace_counter_slots(numel) floats) are set here when the kernel counts
// (`counters`; decode_workspace_init, on the call's stream); the partials need no initialisation.
float* resolve_workspace(int64_t need, int num_splits, const std::optional<at::Tensor>& workspace,
                         const at::Tensor& like, at::Tensor& holder, int64_t& floats, bool counters = true) {
  if (need == 0) return nullptr;
  if (workspace.has_value()) {
    const at::Tensor& w = *workspace;
    check_workspace_tensor(w);
    check_same_device(w, like, "workspace", "q");
    CLO_CHECK(reinterpret_cast<uintptr_t>(w.data_ptr()) % 16 == 0,
              "workspace must be 16-byte aligned (pass the tensor from decode_workspace / "
              "paged_attention_workspace / mla_workspace, not a slice of it)");
    CLO_CHECK(w.numel() >= need, "workspace must hold at least ", need, " float32 elements for num_splits=",
                num_splits, ", got ", w.numel());
    floats = w.numel();
    return w.data_ptr<float>();
  }
  holder = at::empty({need}, like.options().dtype(at::kFloat));
  if (counters)  // MLA's combine kernel counts nothing
    check_launch(dec::decode_workspace_init(holder.data_ptr<float>(), need, current_stream(like)), "decode workspace");
  floats = need;
  return holder.data_ptr<float>();
}
float* resolve_workspace(dec::DecodeAttentionArgs& a, const std::optional<at::Tensor>& workspace,
                         const at::Tensor& like, at::Tensor& holder) {
  return resolve_workspace(
      dec::decode_attention_workspace_floats(a.batch, a.num_q_heads, a.seq_len_q, a.head_dim, a.num_splits),
      a.num_splits, workspace, like, holder, a.workspace_floats);
}

// out, lse and a given workspace are written by the kernels: apart from each other and from
// every input (an overlap would corrupt inputs still being read, or the result).
void check_written_apart(const at::Tensor& out, const std::optional<at::Tensor>& lse,
                         const std::optional<at::Tensor>& workspace,
                         std::initializer_list<std::pair<const at::Tensor*, const char*>> inputs) {
  for (const auto& [t, name] : inputs) {
    CLO_CHECK(!ranges_overlap(out, *t), "out must not overlap ", name);
    CLO_CHECK(!lse.has_value() || !ranges_overlap(*lse, *t), "lse must not overlap ", name);
    CLO_CHECK(!workspace.has_value() || !ranges_overlap(*workspace, *t), "workspace must not overlap ", name);
  }
  CLO_CHECK(!lse.has_value() || !ranges_overlap(*lse, out), "lse must not overlap out");
  CLO_CHECK(!workspace.has_value() || !ranges_overlap(*workspace, out), "workspace must not overlap out");
  CLO_CHECK(!lse.has_value() || !workspace.has_value() || !ranges_overlap(*lse, *workspace),
            "lse must not overlap workspace");
}

// Sets a workspace's split counters to their rest value (the Python helpers' allocation).
void decode_workspace_init(at::Tensor& workspace) {
  check_workspace_tensor(workspace);
  const c10::cuda::CUDAGuard guard(workspace.device());
  check_launch(dec::decode_workspace_init(workspace.data_ptr<float>(), workspace.numel(), current_stream(workspace)),
               "decode_workspace_init");
}

// A 0-dim bool tensor on the workspace's device: some split counter is not at rest (no
// synchronisation: the caller folds it into its own host check).
at::Tensor decode_workspace_counters_stale(const at::Tensor& workspace) {
  check_workspace_tensor(workspace);
  const int64_t slots = dec::decode_workspace_counter_slots(workspace.numel());
  const at::Tensor counters = workspace.narrow(0, workspace.numel() - slots, slots).view(at::kInt);
  return counters.ne(dec::kSplitCounterIdle).any();
}

// The query rows of a decode call: q [B, Hq, D] (one token a sequence) or [B, Hq, Nq, D], and out
// of the same shape.
void set_query_rows(dec::DecodeAttentionArgs& a, const at::Tensor& q, const at::Tensor& out, int64_t num_kv_heads) {
  const bool multi = q.dim() == 4;
  a.dtype = to_dtype(q.scalar_type());
  a.head_dim = static_cast<int>(q.size(-1));
  a.batch = static_cast<int>(q.size(0));
  a.num_q_heads = static_cast<int>(q.size(1));
  a.num_kv_heads = static_cast<int>(num_kv_heads);
  a.seq_len_q = static_cast<int>(multi ? q.size(2) : 1);
  a.q = q.data_ptr();
  a.q_stride_b = q.stride(0);
  a.q_stride_h = q.stride(1);
  a.q_stride_n = multi ? q.stride(2) : 0;
  a.out = out.data_ptr();
  a.o_stride_b = out.stride(0);
  a.o_stride_h = out.stride(1);
  a.o_stride_n = multi ? out.stride(2) : 0;
}

// The split count (the caller's, or the heuristic's for this grid), the workspace, the launch.
void run_decode_attention(dec::DecodeAttentionArgs& a, int64_t num_splits, const std::optional<at::Tensor>& workspace,
                          const at::Tensor& q, const char* op) {
  a.num_splits = num_splits > 0 ? static_cast<int>(num_splits)
                                : dec::decode_attention_num_splits(a.batch, a.num_kv_heads,
                                                                   (a.num_q_heads / a.num_kv_heads) * a.seq_len_q,
                                                                   dec::decode_read_kv_len(a), a.head_dim,
                                                                   a.kv_fp8 ? DType::kFloat8E4M3 : a.dtype, a.paged,
                                                                   a.seq_len_q);
  at::Tensor holder;
  a.workspace = resolve_workspace(a, workspace, q, holder);
  check_launch(dec::launch_decode_attention(a, current_stream(q)), op);
}

void paged_attention(at::Tensor& out, const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_tables, const at::Tensor& seq_lens, double scale, int64_t num_splits,
                     const std::optional<at::Tensor>& workspace, int64_t window_left, double logits_soft_cap,
                     const std::optional<at::Tensor>& lse, double k_scale, double v_scale, bool is_causal) {
  CLO_CHECK(q.dim() == 3 || q.dim() == 4,
            "q must be 3-D [batch, num_q_heads, head_dim] or 4-D [batch, num_q_heads, num_new_tokens, head_dim], got ",
            q.dim(), "-D");
  CLO_CHECK(out.sizes() == q.sizes(), "out must have q's shape ", q.sizes(), ", got ", out.sizes());
  check_cuda(q, "q");
  check_cuda(out, "out");
  check_same_device(out, q, "out", "q");
  check_block_table(block_tables, seq_lens, q, "q");
  check_half_dtype(q, "q");
  const bool fp8 = check_paged_caches(k_cache, v_cache, q, "q");
  check_kv_scales(fp8, k_scale, v_scale);
  check_dtype(out, q.scalar_type(), "out");
  // 4-D q: the last Nq tokens of each sequence (speculative decoding), causal among them unless
  // is_causal is false (every row sees all seq_len keys: a cascade's shared-prefix part).
  const int64_t B = q.size(0), Hq = q.size(1), Nq = q.dim() == 4 ? q.size(2) : 1, D = q.size(-1);
  const int64_t nb = k_cache.size(0), bs = k_cache.size(1), Hkv = k_cache.size(2);
  CLO_CHECK(Nq >= 1 && Nq <= 65535, "num_new_tokens (q dim 2) must be in [1, 65535], got ", Nq);
  CLO_CHECK(k_cache.size(3) == D, "k_cache head_dim must match q's (", D, "), got ", k_cache.size(3));
  CLO_CHECK(B >= 1, "batch (q dim 0) must be >= 1, got ", B);
  CLO_CHECK(Hkv >= 1 && Hq % Hkv == 0, "num_q_heads (", Hq, ") must be a multiple of num_kv_heads (", Hkv, ")");
  check_paged_geometry(block_tables, seq_lens, B, nb, bs);
  check_grid(B, Hq, Nq);
  const c10::cuda::CUDAGuard guard(q.device());  // before check_head_dim: it asks q's device
  check_head_dim(D, fp8);
  check_rows_aligned(q, "q");
  check_rows_aligned(out, "out");
  check_elements_apart(out, "out");
  check_num_splits(num_splits);

  dec::DecodeAttentionArgs a;
  set_query_rows(a, q, out, Hkv);
  a.k = k_cache.data_ptr();
  a.v = v_cache.data_ptr();
  a.kv_fp8 = fp8;
  a.k_scale = static_cast<float>(k_scale);
  a.v_scale = static_cast<float>(v_scale);
  a.paged = true;
  a.causal = is_causal;  // query i of Nq sits at key seq_len - Nq + i (no effect at Nq = 1)
  set_block_table(a, block_tables, seq_lens, nb, bs);
  a.scale = checked_softmax_scale(scale, "paged_attention");
  set_window_and_soft_cap(a, window_left, logits_soft_cap);
  check_written_apart(out, lse, workspace, {{&q, "q"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"},
                                            {&block_tables, "block_tables"}, {&seq_lens, "seq_lens"}});
  a.lse = resolve_lse(lse, q);
  run_decode_attention(a, num_splits, workspace, q, "paged_attention");
}

void decode_attention(at::Tensor& out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                      bool is_causal, int64_t num_splits, const std::optional<at::Tensor>& workspace,
                      int64_t window_left, double logits_soft_cap, const std::optional<at::Tensor>& lse) {
  check_dim(q, 4, "q", "[batch, num_q_heads, seq_len_q, head_dim]");
  check_dim(out, 4, "out", "[batch, num_q_heads, seq_len_q, head_dim]");
  check_dim(k, 4, "k", "[batch, num_kv_heads, seq_len_k, head_dim]");
  check_dim(v, 4, "v", "[batch, num_kv_heads, seq_len_k, head_dim]");
  check_cuda(q, "q");
  check_cuda(out, "out");
  check_cuda(k, "k");
  check_cuda(v, "v");
  check_same_device(k, q, "k", "q");
  check_same_device(v, q, "v", "q");
  check_same_device(out, q, "out", "q");
  check_half_dtype(q, "q");
  check_dtype(k, q.scalar_type(), "k");
  check_dtype(v, q.scalar_type(), "v");
  check_dtype(out, q.scalar_type(), "out");
  CLO_CHECK(k.sizes() == v.sizes(), "k and v must have the same shape, got ", k.sizes(), " and ", v.sizes());
  CLO_CHECK(out.sizes() == q.sizes(), "out must have q's shape ", q.sizes(), ", got ", out.sizes());
  const int64_t B = q.size(0), Hq = q.size(1), Nq = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), Nk = k.size(2);
  CLO_CHECK(k.size(0) == B && k.size(3) == D, "k must be [", B, ", num_kv_heads, seq_len_k, ", D, "], got ",
              k.sizes());
  CLO_CHECK(B >= 1, "batch (q dim 0) must be >= 1, got ", B);
  CLO_CHECK(Hkv >= 1 && Hq % Hkv == 0, "num_q_heads (", Hq, ") must be a multiple of num_kv_heads (", Hkv, ")");
  CLO_CHECK(Nq >= 1 && Nk >= 1, "seq_len_q and seq_len_k must be >= 1, got ", Nq, " and ", Nk);
  CLO_CHECK(Nq <= 65535 && Nk < (int64_t(1) << 31), "seq_len_q must be <= 65535 and seq_len_k < 2^31, got ", Nq,
              " and ", Nk);
  check_grid(B, Hq, Nq);
  const c10::cuda::CUDAGuard guard(q.device());  // before check_head_dim: it asks q's device
  check_head_dim(D);
  check_rows_aligned(q, "q");
  check_rows_aligned(out, "out");
  check_elements_apart(out, "out");
  check_rows_aligned(k, "k");
  check_rows_aligned(v, "v");
  check_num_splits(num_splits);

  dec::DecodeAttentionArgs a;
  set_query_rows(a, q, out, Hkv);
  a.k = k.data_ptr();
  a.v = v.data_ptr();
  a.paged = false;
  a.k_stride_b = k.stride(0);
  a.k_stride_h = k.stride(1);
  a.k_stride_n = k.stride(2);
  a.v_stride_b = v.stride(0);
  a.v_stride_h = v.stride(1);
  a.v_stride_n = v.stride(2);
  a.seq_len_k = static_cast<int>(Nk);
  a.scale = checked_softmax_scale(scale, "decode_attention");
  a.causal = is_causal;
  set_window_and_soft_cap(a, window_left, logits_soft_cap);
  check_written_apart(out, lse, workspace, {{&q, "q"}, {&k, "k"}, {&v, "v"}});
  a.lse = resolve_lse(lse, q);
  run_decode_attention(a, num_splits, workspace, q, "decode_attention");
}

// Where an append writes token t (dec::AppendSlots): slot_mapping (int64 or int32 [T]), or
// block_tables and seq_lens (token t is sequence t's new token). a.num_blocks and
// a.block_size (the cache's) are set before.
void set_append_target(dec::AppendSlots& a, const std::optional<at::Tensor>& slot_mapping,
                       const std::optional<at::Tensor>& block_tables, const std::optional<at::Tensor>& seq_lens,
                       int64_t T, const at::Tensor& ref, const char* ref_name) {
  if (slot_mapping.has_value()) {
    const at::Tensor& sm = *slot_mapping;
    CLO_CHECK(!block_tables.has_value() && !seq_lens.has_value(),
              "give slot_mapping or block_tables and seq_lens (decode: one new token per sequence), not both");
    check_dim(sm, 1, "slot_mapping", "[num_tokens]");
    check_cuda(sm, "slot_mapping");
    check_same_device(sm, ref, "slot_mapping", ref_name);
    CLO_CHECK(sm.scalar_type() == at::kLong || sm.scalar_type() == at::kInt,
              "slot_mapping must have dtype int64 or int32, got ", sm.scalar_type());
    check_contiguous(sm, "slot_mapping");
    CLO_CHECK(sm.size(0) == T, "slot_mapping must have ", T, " entries, got ", sm.size(0));
    a.slot_mapping = sm.data_ptr();
    a.slot_is_int64 = sm.scalar_type() == at::kLong;
  } else {
    CLO_CHECK(block_tables.has_value() && seq_lens.has_value(),
              "without slot_mapping, block_tables and seq_lens must be given (token t is sequence t's new token, "
              "at position seq_lens[t] - 1)");
    const at::Tensor& bt = *block_tables;
    const at::Tensor& sl = *seq_lens;
    check_block_table(bt, sl, ref, ref_name);
    CLO_CHECK(bt.size(0) == T && sl.size(0) == T, "block_tables and seq_lens must have ", T, " rows (", ref_name,
              "'s num_tokens, one new token per sequence), got ", bt.size(0), " and ", sl.size(0));
    CLO_CHECK(bt.size(1) < (int64_t(1) << 31), "max_blocks_per_seq must be < 2^31, got ", bt.size(1));
    set_block_table(a, bt, sl, a.num_blocks, a.block_size);
  }
}

// An append's writes land apart from what it reads: each cache from the other and from every
// input (null entries skipped), and the q it rotates in place from every input but the caches
// (ranges_overlap is exact for q, k and v views of one fused projection's output: they pass).
using NamedInputs = std::initializer_list<std::pair<const at::Tensor*, const char*>>;
void check_append_apart(const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor* q,
                        NamedInputs inputs) {
  CLO_CHECK(!ranges_overlap(k_cache, v_cache), "k_cache must not overlap v_cache (give each its own buffer)");
  for (const auto& [cache, cache_name] : {std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"}}) {
    for (const auto& [t, name] : inputs)
      CLO_CHECK(t == nullptr || !ranges_overlap(*cache, *t), cache_name, " must not overlap ", name);
    CLO_CHECK(q == nullptr || !ranges_overlap(*cache, *q), cache_name, " must not overlap q");
  }
  for (const auto& [t, name] : inputs)
    CLO_CHECK(q == nullptr || t == nullptr || !ranges_overlap(*q, *t), "q must not overlap ", name,
              " (it is rotated in place)");
}

void paged_kv_append(const at::Tensor& k, const at::Tensor& v, at::Tensor& k_cache, at::Tensor& v_cache,
                     const std::optional<at::Tensor>& slot_mapping, double k_scale, double v_scale,
                     const std::optional<at::Tensor>& block_tables, const std::optional<at::Tensor>& seq_lens,
                     const std::optional<at::Tensor>& cos, const std::optional<at::Tensor>& sin,
                     const std::optional<at::Tensor>& q) {
  check_dim(k, 3, "k", "[num_tokens, num_kv_heads, head_dim]");
  check_dim(v, 3, "v", "[num_tokens, num_kv_heads, head_dim]");
  check_cuda(k, "k");
  check_cuda(v, "v");
  check_same_device(v, k, "v", "k");
  check_float_dtype(k, "k");
  check_dtype(v, k.scalar_type(), "v");
  CLO_CHECK(k.sizes() == v.sizes(), "k and v must have the same shape, got ", k.sizes(), " and ", v.sizes());
  check_rows_aligned(k, "k");
  check_rows_aligned(v, "v");
  const bool fp8 = check_paged_caches(k_cache, v_cache, k, "k");
  check_kv_scales(fp8, k_scale, v_scale);
  CLO_CHECK(k.size(1) == k_cache.size(2) && k.size(2) == k_cache.size(3), "k [T, ", k_cache.size(2), ", ",
              k_cache.size(3), "] expected from the cache shape, got ", k.sizes());
  CLO_CHECK(k_cache.size(0) < (int64_t(1) << 31) && k.size(0) < (int64_t(1) << 31),
              "num_blocks and num_tokens must be < 2^31, got ", k_cache.size(0), " and ", k.size(0));
  CLO_CHECK(k_cache.size(1) >= 1 && k_cache.size(1) < (int64_t(1) << 31),
            "block_size (k_cache dim 1) must be in [1, 2^31), got ", k_cache.size(1));
  const int64_t T = k.size(0), D = k.size(2);
  dec::PagedKvAppendArgs a;
  a.dtype = to_dtype(k.scalar_type());
  a.cache_dtype = to_dtype(k_cache.scalar_type());
  a.k_scale = static_cast<float>(k_scale);
  a.v_scale = static_cast<float>(v_scale);
  a.num_tokens = static_cast<int>(T);
  a.num_kv_heads = static_cast<int>(k.size(1));
  a.head_dim = static_cast<int>(D);
  a.num_blocks = static_cast<int>(k_cache.size(0));
  a.block_size = static_cast<int>(k_cache.size(1));
  a.k = k.data_ptr();
  a.v = v.data_ptr();
  a.k_stride_t = k.stride(0);
  a.k_stride_h = k.stride(1);
  a.v_stride_t = v.stride(0);
  a.v_stride_h = v.stride(1);
  a.k_cache = k_cache.data_ptr();
  a.v_cache = v_cache.data_ptr();
  set_append_target(a, slot_mapping, block_tables, seq_lens, T, k, "k");
  CLO_CHECK(cos.has_value() == sin.has_value(), "cos and sin must be given together (the rotary embedding)");
  CLO_CHECK(!q.has_value() || cos.has_value(), "q is rotated in place with cos and sin: give them too");
  if (cos.has_value()) {
    const int64_t pair = 2 * (16 / k.element_size());
    CLO_CHECK(D % pair == 0, "the rotary embedding needs head_dim a multiple of ", pair,
              " (two 16-byte halves of a row), got ", D);
    for (const auto& [t, name] : {std::pair{&*cos, "cos"}, std::pair{&*sin, "sin"}}) {
      check_dim(*t, 2, name, "[num_tokens, head_dim]");
      check_cuda(*t, name);
      check_same_device(*t, k, name, "k");
      check_dtype(*t, k.scalar_type(), name);
      CLO_CHECK(t->size(0) == T && t->size(1) == D, name, " must be [", T, ", ", D, "], got ", t->sizes());
      check_rows_aligned(*t, name);
    }
    a.cos = cos->data_ptr();
    a.sin = sin->data_ptr();
    a.cos_stride_t = cos->stride(0);
    a.sin_stride_t = sin->stride(0);
    if (q.has_value()) {
      const at::Tensor& qt = *q;
      check_dim(qt, 3, "q", "[num_tokens, num_q_heads, head_dim]");
      check_cuda(qt, "q");
      check_same_device(qt, k, "q", "k");
      check_dtype(qt, k.scalar_type(), "q");
      CLO_CHECK(qt.size(0) == T && qt.size(2) == D, "q must be [", T, ", num_q_heads, ", D, "], got ", qt.sizes());
      CLO_CHECK(qt.size(1) < (int64_t(1) << 24), "num_q_heads must be < 2^24, got ", qt.size(1));
      check_elements_apart(qt, "q");  // rotated in place
      check_rows_aligned(qt, "q");
      a.q = qt.data_ptr();
      a.q_stride_t = qt.stride(0);
      a.q_stride_h = qt.stride(1);
      a.num_q_heads = static_cast<int>(qt.size(1));
    }
  }
  const auto given = [](const std::optional<at::Tensor>& t) { return t.has_value() ? &*t : nullptr; };
  check_append_apart(k_cache, v_cache, given(q),
                     {{&k, "k"}, {&v, "v"}, {given(cos), "cos"}, {given(sin), "sin"},
                      {given(slot_mapping), "slot_mapping"}, {given(block_tables), "block_tables"},
                      {given(seq_lens), "seq_lens"}});
  const c10::cuda::CUDAGuard guard(k.device());
  check_launch(dec::launch_paged_kv_append(a, current_stream(k)), "paged_kv_append");
}

int64_t decode_num_splits(int64_t batch, int64_t num_kv_heads, int64_t rows_per_kv_head, int64_t max_kv_len,
                          int64_t head_dim, c10::ScalarType dtype, bool paged, int64_t seq_len_q) {
  CLO_CHECK(seq_len_q >= 1 && rows_per_kv_head % seq_len_q == 0,
            "seq_len_q must be >= 1 and divide rows_per_kv_head (", rows_per_kv_head, "), got ", seq_len_q);
  check_cache_dtype_and_head_dim(dtype, head_dim);
  return dec::decode_attention_num_splits(static_cast<int>(batch), static_cast<int>(num_kv_heads),
                                          static_cast<int>(rows_per_kv_head), static_cast<int>(max_kv_len),
                                          static_cast<int>(head_dim), to_dtype(dtype), paged,
                                          static_cast<int>(seq_len_q));
}

// Whether the decode kernels run at head_dim on the current device (false for an
// unsupported head dim too: decode_min_smem_bytes is 0 there).
bool decode_head_dim_fits(int64_t head_dim, bool fp8_cache) {
  return dec::decode_head_dim_fits(static_cast<int>(head_dim), fp8_cache);
}

int64_t decode_workspace_numel(int64_t batch, int64_t num_q_heads, int64_t seq_len_q, int64_t head_dim,
                               int64_t num_splits) {
  return dec::decode_attention_workspace_floats(static_cast<int>(batch), static_cast<int>(num_q_heads),
                                                static_cast<int>(seq_len_q), static_cast<int>(head_dim),
                                                static_cast<int>(num_splits));
}

// decode_workspace's size: the most any call of batch 1..batch needs (see
// decode_attention_workspace_floats_upto); paged None: both layouts.
int64_t decode_workspace_numel_upto(int64_t batch, int64_t num_q_heads, int64_t num_kv_heads, int64_t seq_len_q,
                                    int64_t head_dim, int64_t max_kv_len, c10::ScalarType dtype,
                                    std::optional<bool> paged, int64_t num_splits) {
  CLO_CHECK(batch >= 1 && batch <= dec::kDecodeMaxBatch, "batch must be in [1, ", dec::kDecodeMaxBatch, "], got ",
            batch);
  CLO_CHECK(num_kv_heads >= 1 && num_q_heads >= num_kv_heads && num_q_heads % num_kv_heads == 0,
            "num_q_heads must be a positive multiple of num_kv_heads (>= 1), got num_q_heads=", num_q_heads,
            " and num_kv_heads=", num_kv_heads);
  CLO_CHECK(seq_len_q >= 1, "seq_len_q must be >= 1, got ", seq_len_q);
  CLO_CHECK(num_q_heads < (int64_t(1) << 31) && seq_len_q < (int64_t(1) << 31) &&
                num_q_heads * seq_len_q < (int64_t(1) << 31),
            "num_q_heads * seq_len_q (query rows per sequence) must be < 2^31, got ", num_q_heads, " * ", seq_len_q);
  CLO_CHECK(max_kv_len >= 0 && max_kv_len < (int64_t(1) << 31), "max_kv_len must be in [0, 2^31), got ", max_kv_len);
  check_num_splits(num_splits);
  check_cache_dtype_and_head_dim(dtype, head_dim);
  return dec::decode_attention_workspace_floats_upto(
      static_cast<int>(batch), static_cast<int>(num_q_heads), static_cast<int>(num_kv_heads),
      static_cast<int>(seq_len_q), static_cast<int>(head_dim), static_cast<int>(max_kv_len), to_dtype(dtype),
      paged.value_or(true), !paged.value_or(false), static_cast<int>(num_splits));
}

// The MLA latent cache: [num_blocks, block_size, 576] or [num_blocks, block_size, 1, 576],
// on `like`'s device, in its dtype, contiguous with 16-byte aligned rows.
void check_mla_cache(const at::Tensor& kv_cache, const at::Tensor& like, const char* like_name) {
  constexpr int64_t kDqk = dec::kMlaHeadDimQK;
  CLO_CHECK(kv_cache.dim() == 3 || kv_cache.dim() == 4,
            "kv_cache must be 3-D [num_blocks, block_size, 576] or 4-D [num_blocks, block_size, 1, 576], got ",
            kv_cache.dim(), "-D with shape ", kv_cache.sizes());
  check_cuda(kv_cache, "kv_cache");
  check_same_device(kv_cache, like, "kv_cache", like_name);
  check_dtype(kv_cache, like.scalar_type(), "kv_cache");
  CLO_CHECK(kv_cache.size(-1) == kDqk && (kv_cache.dim() == 3 || kv_cache.size(2) == 1),
            "kv_cache rows must be [..., ", kDqk, "] with one latent head, got shape ", kv_cache.sizes());
  CLO_CHECK(kv_cache.size(0) >= 1 && kv_cache.size(1) >= 1, "kv_cache must not be empty, got shape ",
            kv_cache.sizes());
  check_contiguous(kv_cache, "kv_cache");
  check_rows_aligned(kv_cache, "kv_cache");
}

// MLA decode: q [B, Hq, 576], kv_cache [num_blocks, block_size, 576] or [num_blocks,
// block_size, 1, 576] (one latent head), out [B, Hq, 512].
void paged_mla_attention(at::Tensor& out, const at::Tensor& q, const at::Tensor& kv_cache,
                         const at::Tensor& block_tables, const at::Tensor& seq_lens, double scale, int64_t num_splits,
                         const std::optional<at::Tensor>& workspace, const std::optional<at::Tensor>& lse) {
  constexpr int64_t kDqk = dec::kMlaHeadDimQK, kDv = dec::kMlaHeadDimV;
  check_dim(q, 3, "q", "[batch, num_q_heads, 576]");
  check_dim(out, 3, "out", "[batch, num_q_heads, 512]");
  check_cuda(q, "q");
  check_cuda(out, "out");
  check_same_device(out, q, "out", "q");
  check_block_table(block_tables, seq_lens, q, "q");
  check_half_dtype(q, "q");
  check_mla_cache(kv_cache, q, "q");
  check_dtype(out, q.scalar_type(), "out");
  const int64_t B = q.size(0), Hq = q.size(1);
  CLO_CHECK(q.size(2) == kDqk, "q's last dim must be ", kDqk, " (MLA: 512 latent + 64 rope), got ", q.size(2));
  CLO_CHECK(out.size(0) == B && out.size(1) == Hq && out.size(2) == kDv, "out must be [", B, ", ", Hq, ", ", kDv,
            "], got ", out.sizes());
  const int64_t nb = kv_cache.size(0), bs = kv_cache.size(1);
  check_paged_geometry(block_tables, seq_lens, B, nb, bs);
  check_grid(B, Hq);
  CLO_CHECK(B * Hq < (int64_t(1) << 31), "batch x num_q_heads (the combine kernel's grid) must be < 2^31, got ", B,
            " x ", Hq);
  check_rows_aligned(q, "q");
  check_rows_aligned(out, "out");
  check_elements_apart(out, "out");
  check_num_splits(num_splits);
  const c10::cuda::CUDAGuard guard(q.device());
  CLO_CHECK(dec::mla_decode_fits(), "the MLA decode kernel needs ", dec::mla_decode_smem_bytes(),
            " bytes of shared memory per block, more than this GPU allows (", smem_budget_per_block(), " bytes)");

  dec::MlaDecodeArgs a;
  a.dtype = to_dtype(q.scalar_type());
  a.batch = static_cast<int>(B);
  a.num_q_heads = static_cast<int>(Hq);
  a.q = q.data_ptr();
  a.q_stride_b = q.stride(0);
  a.q_stride_h = q.stride(1);
  a.out = out.data_ptr();
  a.o_stride_b = out.stride(0);
  a.o_stride_h = out.stride(1);
  a.kv_cache = kv_cache.data_ptr();
  set_block_table(a, block_tables, seq_lens, nb, bs);
  a.scale = checked_softmax_scale(scale, "paged_mla_attention");
  check_written_apart(out, lse, workspace, {{&q, "q"}, {&kv_cache, "kv_cache"},
                                            {&block_tables, "block_tables"}, {&seq_lens, "seq_lens"}});
  a.lse = resolve_lse(lse, q);
  a.num_splits = num_splits > 0 ? static_cast<int>(num_splits)
                                : dec::mla_decode_num_splits(a.batch, a.num_q_heads, a.max_blocks_per_seq * a.block_size);
  at::Tensor holder;
  a.workspace = resolve_workspace(
      dec::decode_attention_workspace_floats(a.batch, a.num_q_heads, 1, static_cast<int>(kDv), a.num_splits),
      a.num_splits, workspace, q, holder, a.workspace_floats, /*counters=*/false);
  check_launch(dec::launch_mla_decode_attention(a, current_stream(q)), "paged_mla_attention");
}

// MLA latent append: kv_c [T, 512] and k_pe [T, 64] into the MLA cache rows [kv_c | k_pe].
void paged_mla_append(const at::Tensor& kv_c, const at::Tensor& k_pe, at::Tensor& kv_cache,
                      const std::optional<at::Tensor>& slot_mapping, const std::optional<at::Tensor>& block_tables,
                      const std::optional<at::Tensor>& seq_lens) {
  constexpr int64_t kDqk = dec::kMlaHeadDimQK, kDv = dec::kMlaHeadDimV;
  check_dim(kv_c, 2, "kv_c", "[num_tokens, 512]");
  check_dim(k_pe, 2, "k_pe", "[num_tokens, 64]");
  check_cuda(kv_c, "kv_c");
  check_cuda(k_pe, "k_pe");
  check_same_device(k_pe, kv_c, "k_pe", "kv_c");
  check_half_dtype(kv_c, "kv_c");
  check_dtype(k_pe, kv_c.scalar_type(), "k_pe");
  check_mla_cache(kv_cache, kv_c, "kv_c");
  const int64_t T = kv_c.size(0);
  CLO_CHECK(kv_c.size(1) == kDv, "kv_c must be [num_tokens, ", kDv, "] (the latent), got ", kv_c.sizes());
  CLO_CHECK(k_pe.size(0) == T && k_pe.size(1) == kDqk - kDv, "k_pe must be [", T, ", ", kDqk - kDv,
            "] (the rope part), got ", k_pe.sizes());
  CLO_CHECK(kv_cache.size(0) < (int64_t(1) << 31) && kv_cache.size(1) < (int64_t(1) << 31) && T < (int64_t(1) << 31),
            "num_blocks, block_size and num_tokens must be < 2^31, got ", kv_cache.size(0), ", ", kv_cache.size(1),
            " and ", T);
  check_rows_aligned(kv_c, "kv_c");
  check_rows_aligned(k_pe, "k_pe");
  CLO_CHECK(!ranges_overlap(kv_cache, kv_c) && !ranges_overlap(kv_cache, k_pe),
            "kv_cache must not overlap kv_c or k_pe");
  for (const auto& [t, name] : {std::pair{&slot_mapping, "slot_mapping"}, std::pair{&block_tables, "block_tables"},
                                std::pair{&seq_lens, "seq_lens"}})
    CLO_CHECK(!t->has_value() || !ranges_overlap(kv_cache, **t), "kv_cache must not overlap ", name);
  dec::MlaAppendArgs a;
  a.dtype = to_dtype(kv_c.scalar_type());
  a.num_tokens = static_cast<int>(T);
  a.num_blocks = static_cast<int>(kv_cache.size(0));
  a.block_size = static_cast<int>(kv_cache.size(1));
  a.kv_c = kv_c.data_ptr();
  a.kv_c_stride_t = kv_c.stride(0);
  a.k_pe = k_pe.data_ptr();
  a.k_pe_stride_t = k_pe.stride(0);
  a.kv_cache = kv_cache.data_ptr();
  set_append_target(a, slot_mapping, block_tables, seq_lens, T, kv_c, "kv_c");
  const c10::cuda::CUDAGuard guard(kv_c.device());
  check_launch(dec::launch_paged_mla_append(a, current_stream(kv_c)), "paged_mla_append");
}

int64_t mla_num_splits(int64_t batch, int64_t num_q_heads, int64_t max_kv_len) {
  check_grid(batch, num_q_heads);
  CLO_CHECK(max_kv_len >= 0 && max_kv_len < (int64_t(1) << 31), "max_kv_len must be in [0, 2^31), got ", max_kv_len);
  return dec::mla_decode_num_splits(static_cast<int>(batch), static_cast<int>(num_q_heads),
                                    static_cast<int>(max_kv_len));
}

// mla_workspace's size: the most any call of batch 1..batch needs.
int64_t mla_workspace_numel(int64_t batch, int64_t num_q_heads, int64_t max_kv_len, int64_t num_splits) {
  check_grid(batch, num_q_heads);
  CLO_CHECK(num_q_heads < (int64_t(1) << 24), "num_q_heads must be < 2^24, got ", num_q_heads);
  CLO_CHECK(max_kv_len >= 0 && max_kv_len < (int64_t(1) << 31), "max_kv_len must be in [0, 2^31), got ", max_kv_len);
  check_num_splits(num_splits);
  return dec::mla_decode_workspace_floats_upto(static_cast<int>(batch), static_cast<int>(num_q_heads),
                                               static_cast<int>(max_kv_len), static_cast<int>(num_splits));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(cuda_llm_ops, m) {
  m.def(
      "paged_attention(Tensor(a!) out, Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, "
      "Tensor seq_lens, float scale, int num_splits, Tensor(b!)? workspace, int window_left=-1, "
      "float logits_soft_cap=0.0, Tensor(c!)? lse=None, float k_scale=1.0, float v_scale=1.0, "
      "bool is_causal=True) -> ()");
  m.def(
      "decode_attention(Tensor(a!) out, Tensor q, Tensor k, Tensor v, float scale, bool is_causal, "
      "int num_splits, Tensor(b!)? workspace, int window_left=-1, float logits_soft_cap=0.0, "
      "Tensor(c!)? lse=None) -> ()");
  m.def(
      "paged_kv_append(Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? slot_mapping, "
      "float k_scale=1.0, float v_scale=1.0, Tensor? block_tables=None, Tensor? seq_lens=None, "
      "Tensor? cos=None, Tensor? sin=None, Tensor(c!)? q=None) -> ()");
  m.def(
      "decode_num_splits(int batch, int num_kv_heads, int rows_per_kv_head, int max_kv_len, int head_dim, "
      "ScalarType dtype, bool paged=True, int seq_len_q=1) -> int",
      &decode_num_splits);
  m.def("decode_workspace_numel(int batch, int num_q_heads, int seq_len_q, int head_dim, int num_splits) -> int",
        &decode_workspace_numel);
  m.def(
      "decode_workspace_numel_upto(int batch, int num_q_heads, int num_kv_heads, int seq_len_q, int head_dim, "
      "int max_kv_len, ScalarType dtype, bool? paged=None, int num_splits=0) -> int",
      &decode_workspace_numel_upto);
  m.def("decode_head_dim_fits(int head_dim, bool fp8_cache=False) -> bool", &decode_head_dim_fits);
  m.def("decode_workspace_counters_stale(Tensor workspace) -> Tensor", &decode_workspace_counters_stale);
  m.def("decode_workspace_init(Tensor(a!) workspace) -> ()");
  m.def(
      "paged_mla_attention(Tensor(a!) out, Tensor q, Tensor kv_cache, Tensor block_tables, Tensor seq_lens, "
      "float scale, int num_splits, Tensor(b!)? workspace, Tensor(c!)? lse=None) -> ()");
  m.def("paged_mla_append(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor? slot_mapping, "
        "Tensor? block_tables=None, Tensor? seq_lens=None) -> ()");
  m.def("mla_num_splits(int batch, int num_q_heads, int max_kv_len) -> int", &mla_num_splits);
  m.def("mla_workspace_numel(int batch, int num_q_heads, int max_kv_len, int num_splits=0) -> int",
        &mla_workspace_numel);
}

TORCH_LIBRARY_IMPL(cuda_llm_ops, CUDA, m) {
  m.impl("paged_attention", &paged_attention);
  m.impl("decode_workspace_init", &decode_workspace_init);
  m.impl("decode_attention", &decode_attention);
  m.impl("paged_kv_append", &paged_kv_append);
  m.impl("paged_mla_attention", &paged_mla_attention);
  m.impl("paged_mla_append", &paged_mla_append);
}
