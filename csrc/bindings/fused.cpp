// Torch binding of the fused decode attention block: schemas, checks, launcher call.
//   fused_decode_block(x, w_qkv, w_o, k_cache!, v_cache!, block_tables, seq_lens, cos?, sin?,
//                      scale, out!, workspace!, cluster_size)
// writes the new tokens' k and v into the caches and the block's output into out. The
// Python wrapper (cuda_llm_ops/fused.py) validates with richer messages, checks the block
// table's indices on the host when asked, and runs unfused ops where the kernel does not
// apply (fused_decode_block_unsupported says why).
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings/checks.h"
#include "fused/fused_decode_block.h"

namespace cuda_llm_ops::binding {
namespace {

constexpr const char* kOp = "fused_decode_block";
#define FUSED_REQUIRE(cond, ...) CLO_CHECK(cond, kOp, ": ", __VA_ARGS__)

void fused_decode_block(const at::Tensor& x, const at::Tensor& w_qkv, const at::Tensor& w_o, at::Tensor& k_cache,
                        at::Tensor& v_cache, const at::Tensor& block_tables, const at::Tensor& seq_lens,
                        const std::optional<at::Tensor>& cos, const std::optional<at::Tensor>& sin, double scale,
                        at::Tensor& out, at::Tensor& workspace, int64_t cluster_size) {
  FUSED_REQUIRE(cos.has_value() == sin.has_value(), "cos and sin must be given together");
  std::vector<std::pair<const at::Tensor*, const char*>> all = {
      {&x, "x"}, {&w_qkv, "w_qkv"}, {&w_o, "w_o"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"},
      {&block_tables, "block_tables"}, {&seq_lens, "seq_lens"}, {&out, "out"}, {&workspace, "workspace"}};
  if (cos.has_value()) {
    all.emplace_back(&*cos, "cos");
    all.emplace_back(&*sin, "sin");
  }
  for (const auto& [t, name] : all) {
    FUSED_REQUIRE(t->is_cuda(), name, " must be a CUDA tensor, got device ", t->device());
    FUSED_REQUIRE(t->device() == x.device(), name, " must be on x's device ", x.device(), ", got ", t->device());
    FUSED_REQUIRE(t->is_contiguous(), name, " must be contiguous; call .contiguous() first");
  }
  const auto dt = x.scalar_type();
  FUSED_REQUIRE(dt == at::kHalf || dt == at::kBFloat16, "x must be float16 or bfloat16, got ", dt);
  for (const auto& [t, name] : all) {
    if (t == &block_tables || t == &seq_lens || t == &workspace) continue;
    FUSED_REQUIRE(t->scalar_type() == dt, name, " must have x's dtype ", dt, ", got ", t->scalar_type());
  }
  FUSED_REQUIRE(block_tables.scalar_type() == at::kInt, "block_tables must be int32, got ", block_tables.scalar_type());
  FUSED_REQUIRE(seq_lens.scalar_type() == at::kInt, "seq_lens must be int32, got ", seq_lens.scalar_type());
  FUSED_REQUIRE(x.dim() == 2, "x must be 2-D [batch, hidden], got shape ", x.sizes());
  FUSED_REQUIRE(k_cache.dim() == 4, "k_cache must be 4-D [num_blocks, block_size, heads, head_dim], got shape ",
                k_cache.sizes());
  FUSED_REQUIRE(block_tables.dim() == 2, "block_tables must be 2-D [batch, max_blocks], got shape ",
                block_tables.sizes());
  const int64_t batch = x.size(0), hidden = x.size(1);
  const int64_t num_blocks = k_cache.size(0), block_size = k_cache.size(1), heads = k_cache.size(2),
                head_dim = k_cache.size(3), max_blocks = block_tables.size(1);
  FUSED_REQUIRE(batch >= 1 && hidden >= 1 && num_blocks >= 1 && max_blocks >= 1,
                "x, k_cache and block_tables must have no empty dimension, got ", x.sizes(), ", ", k_cache.sizes(),
                ", ", block_tables.sizes());
  check_shape(v_cache, kOp, "v_cache", {num_blocks, block_size, heads, head_dim}, "k_cache's shape");
  check_shape(w_qkv, kOp, "w_qkv", {3 * heads * head_dim, hidden}, "[3 * heads * head_dim, hidden]");
  check_shape(w_o, kOp, "w_o", {hidden, heads * head_dim}, "[hidden, heads * head_dim]");
  check_shape(block_tables, kOp, "block_tables", {batch, max_blocks}, "[batch, max_blocks]");
  check_shape(seq_lens, kOp, "seq_lens", {batch}, "[batch]");
  check_shape(out, kOp, "out", {batch, hidden}, "[batch, hidden]");
  if (cos.has_value()) {
    check_shape(*cos, kOp, "cos", {batch, head_dim}, "[batch, head_dim]");
    check_shape(*sin, kOp, "sin", {batch, head_dim}, "[batch, head_dim]");
  }
  const float softmax_scale = checked_softmax_scale(scale, kOp);
  FUSED_REQUIRE(hidden <= INT32_MAX && max_blocks <= INT32_MAX && block_size <= INT32_MAX,
                "hidden, max_blocks and block_size must fit int32");
  FUSED_REQUIRE(max_blocks * block_size <= INT32_MAX, "max_blocks_per_seq x block_size (the keys a table row ",
                "addresses) must be < 2^31, got ", max_blocks, " x ", block_size);
  const c10::cuda::CUDAGuard guard(x.device());
  const char* why = fused::fused_decode_block_unsupported(static_cast<int>(batch), static_cast<int>(hidden),
                                                          static_cast<int>(heads), static_cast<int>(heads),
                                                          static_cast<int>(head_dim), static_cast<int>(block_size));
  FUSED_REQUIRE(*why == '\0', why);
  // 16-byte loads of x, the weights, the caches and cos / sin, 16-byte stores into the caches,
  // 8-byte reductions into the workspace: aligned bases (a contiguous view can start at any
  // element, and a misaligned access faults the whole context).
  for (const auto& [t, name] : all)
    if (t != &block_tables && t != &seq_lens && t != &workspace) check_rows_aligned(*t, name);
  FUSED_REQUIRE(reinterpret_cast<uintptr_t>(workspace.data_ptr()) % 16 == 0,
                "workspace must start at a 16-byte aligned address (fused_decode_block_workspace), got offset ",
                reinterpret_cast<uintptr_t>(workspace.data_ptr()) % 16, " bytes");
  const size_t ws_bytes = fused::fused_decode_block_workspace_bytes(static_cast<int>(hidden));
  FUSED_REQUIRE(static_cast<size_t>(workspace.nbytes()) >= ws_bytes, "workspace must hold at least ", ws_bytes,
                " bytes (fused_decode_block_workspace), got ", static_cast<int64_t>(workspace.nbytes()));
  FUSED_REQUIRE(cluster_size == 0 || cluster_size == 2 || cluster_size == 4,
                "cluster_size must be 0 (the default, 4), 2 or 4, got ", cluster_size);
  // What the kernel writes lands apart from every other argument: out (heads' clusters add their
  // output projections into it while later clusters still read x, the weights or the caches),
  // the caches (the new token's k and v) and the workspace (the sums and their counters).
  for (const auto& [w, wname] : {std::pair{&out, "out"}, std::pair{&k_cache, "k_cache"},
                                 std::pair{&v_cache, "v_cache"}, std::pair{&workspace, "workspace"}})
    for (const auto& [t, name] : all)
      if (t != w) FUSED_REQUIRE(!ranges_overlap(*w, *t), wname, " must not overlap ", name);

  fused::FusedDecodeBlockProblem p{};
  p.x = x.data_ptr();
  p.w_qkv = w_qkv.data_ptr();
  p.w_o = w_o.data_ptr();
  p.k_cache = k_cache.data_ptr();
  p.v_cache = v_cache.data_ptr();
  p.block_tables = block_tables.data_ptr<int>();
  p.seq_lens = seq_lens.data_ptr<int>();
  p.cos = cos.has_value() ? cos->data_ptr() : nullptr;
  p.sin = sin.has_value() ? sin->data_ptr() : nullptr;
  p.out = out.data_ptr();
  p.workspace = workspace.data_ptr();
  p.batch = static_cast<int>(batch);
  p.hidden = static_cast<int>(hidden);
  p.heads = static_cast<int>(heads);
  p.block_size = static_cast<int>(block_size);
  p.max_blocks = static_cast<int>(max_blocks);
  p.num_blocks = num_blocks;
  p.scale = softmax_scale;
  p.dtype = to_dtype(dt);
  check_launch(fused::launch_fused_decode_block(p, static_cast<int>(cluster_size), current_stream(x)),
               "fused_decode_block");
}

// Why the fused kernel does not run for this problem on the current device ("" if it does).
std::string fused_decode_block_unsupported(int64_t batch, int64_t hidden, int64_t heads, int64_t kv_heads,
                                           int64_t head_dim, int64_t block_size) {
  const auto narrow = [](int64_t v) { return v > INT32_MAX || v < INT32_MIN ? -1 : static_cast<int>(v); };
  return fused::fused_decode_block_unsupported(narrow(batch), narrow(hidden), narrow(heads), narrow(kv_heads),
                                               narrow(head_dim), narrow(block_size));
}

int64_t fused_decode_block_workspace_bytes(int64_t hidden) {
  CLO_CHECK(hidden >= 1 && hidden <= INT32_MAX, "fused_decode_block_workspace_bytes: hidden must be 1 to 2^31-1, got ",
            hidden);
  return static_cast<int64_t>(fused::fused_decode_block_workspace_bytes(static_cast<int>(hidden)));
}

}  // namespace
}  // namespace cuda_llm_ops::binding

TORCH_LIBRARY_FRAGMENT(cuda_llm_ops, m) {
  m.def(
      "fused_decode_block(Tensor x, Tensor w_qkv, Tensor w_o, Tensor(a!) k_cache, Tensor(b!) v_cache, "
      "Tensor block_tables, Tensor seq_lens, Tensor? cos, Tensor? sin, float scale, Tensor(c!) out, "
      "Tensor(d!) workspace, int cluster_size) -> ()");
  m.def("fused_decode_block_unsupported(int batch, int hidden, int heads, int kv_heads, int head_dim, "
        "int block_size) -> str",
        &cuda_llm_ops::binding::fused_decode_block_unsupported);
  m.def("fused_decode_block_workspace_bytes(int hidden) -> int",
        &cuda_llm_ops::binding::fused_decode_block_workspace_bytes);
}

TORCH_LIBRARY_IMPL(cuda_llm_ops, CUDA, m) {
  m.impl("fused_decode_block", &cuda_llm_ops::binding::fused_decode_block);
}
