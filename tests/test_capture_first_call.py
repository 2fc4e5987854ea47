"""GPU tests: an op whose first call in the process is inside a CUDA-graph capture.

Serving engines often capture before any eager call. A launcher's one-time work (the query
of which device image is loaded, kernel attributes, tensor-map encoders) then runs under
capture, where synchronous copies and other stream-unsafe calls invalidate the capture.
Each case runs in its own process, so the op's first call really is the captured one; after
the replay matches the reference, an eager call must still pick the Hopper kernel (a failed
first query would otherwise be cached as "no sm_90a" and silently fall back).
"""
import pytest
import torch

from cuda_llm_ops.testing import run_isolated
from conftest import require_op

pytestmark = pytest.mark.cuda

_PRELUDE = """
import torch, cuda_llm_ops as llm
from cuda_llm_ops import reference
from cuda_llm_ops.testing import assert_close, kernel_names, mark_split_partials_, poison_, split_clusters_ran
torch.manual_seed(0)
hopper = torch.cuda.get_device_capability() == (9, 0)  # the GPU script builds sm_90a for it

def capture_cold(fn):
    # no warm-up: fn's first call in this process is the captured one
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph
"""

_CASES = {
    "flash_attention": """
q, k, v = (torch.randn(2, 4, 300, 128, device="cuda", dtype=torch.float16) for _ in range(3))
out = poison_(torch.empty_like(q))
graph = capture_cold(lambda: out.copy_(llm.flash_attention(q, k, v, is_causal=True)))
graph.replay(); torch.cuda.synchronize()
assert_close(out, reference.attention_reference(q, k, v, is_causal=True), dtype=q.dtype)
names = kernel_names(lambda: llm.flash_attention(q, k, v, is_causal=True))
assert not hopper or "flash_attention_fwd_sm90" in names, names
""",
    "gemm": """
a, b = (torch.randn(2048, 512, device="cuda", dtype=torch.bfloat16) / 8 for _ in range(2))
b = b.t().contiguous()
out = poison_(torch.empty(2048, 2048, device="cuda", dtype=torch.bfloat16))
graph = capture_cold(lambda: out.copy_(llm.tensor_core_gemm(a, b)))
graph.replay(); torch.cuda.synchronize()
assert_close(out, reference.gemm_reference(a, b), dtype=a.dtype)
names = kernel_names(lambda: llm.tensor_core_gemm(a, b))
assert not hopper or "gemm_wgmma_sm90" in names, names
""",
    "gemm_int8": """
# 2048 x 2048 outputs: enough tiles that the Hopper family takes it (fewer go to mma.sync)
a = torch.randint(-128, 128, (2048, 512), device="cuda", dtype=torch.int8)
b = torch.randint(-128, 128, (512, 2048), device="cuda", dtype=torch.int8)
out = torch.full((2048, 2048), -7, device="cuda", dtype=torch.int32)
graph = capture_cold(lambda: llm.tensor_core_gemm_int8(a, b, out=out))
graph.replay(); torch.cuda.synchronize()
assert torch.equal(out, reference.int8_gemm_reference(a, b))
names = kernel_names(lambda: llm.tensor_core_gemm_int8(a, b, out=out))
assert not hopper or "gemm_wgmma_sm90" in names, names
""",
    "paged_mla_attention": """
B, H, BS, DQK, DV = 3, 64, 16, 576, 512
lens = torch.tensor([700, 1, 1500], dtype=torch.int32, device="cuda")
table = torch.randperm(3 * 96).int().view(3, 96).cuda()
kv = torch.randn(3 * 96, BS, DQK, device="cuda").to(torch.bfloat16)
q = torch.randn(B, H, DQK, device="cuda").to(torch.bfloat16)
# A fixed split count, so sizing the workspace runs no heuristic (which would ask for the
# sm_90a image before the capture)
ws = llm.mla_workspace(B, H, 96 * BS, num_splits=4)
out = poison_(torch.empty(B, H, DV, device="cuda", dtype=torch.bfloat16))
graph = capture_cold(lambda: llm.paged_mla_attention(q, kv, table, lens, out=out, num_splits=4, workspace=ws,
                                                     check_indices=False))
graph.replay(); torch.cuda.synchronize()
assert_close(out, reference.paged_mla_attention_reference(q, kv, table, lens), dtype=q.dtype)
names = kernel_names(lambda: llm.paged_mla_attention(q, kv, table, lens))
assert not hopper or "mla_decode_attention_sm90" in names, names
""",
    "paged_attention": """
B, HQ, HKV, D, BS = 2, 32, 8, 128, 16
lens = torch.tensor([3000, 17], dtype=torch.int32, device="cuda")
table = torch.randperm(2 * 200).int().view(2, 200).cuda()
kc, vc = (torch.randn(400, BS, HKV, D, device="cuda", dtype=torch.float16) for _ in range(2))
q = torch.randn(B, HQ, D, device="cuda", dtype=torch.float16)
# No split heuristic before the capture; making the workspace still launches its initialisation,
# so this case's module is loaded before it (paged_attention has no sm_90a query)
ws = llm.paged_attention_workspace(q, kc, table, num_splits=4)
out = poison_(torch.empty_like(q))
graph = capture_cold(lambda: llm.paged_attention(q, kc, vc, table, lens, out=out, num_splits=4, workspace=ws))
graph.replay(); torch.cuda.synchronize()
assert_close(out, reference.paged_attention_reference(q, kc, vc, table, lens), dtype=q.dtype)
""",
    "paged_attention_split_cluster": """
# 2 splits of one-token MQA: on sm_90 the even grid's units run as split clusters (a cluster
# launch and its occupancy query, first under capture)
B, HQ, HKV, D, BS = 4, 32, 1, 128, 16
lens = torch.tensor([3000, 1, 900, 2048], dtype=torch.int32, device="cuda")
table = torch.randperm(4 * 200).int().view(4, 200).cuda()
kc, vc = (torch.randn(800, BS, HKV, D, device="cuda", dtype=torch.float16) for _ in range(2))
q = torch.randn(B, HQ, D, device="cuda", dtype=torch.float16)
ws = mark_split_partials_(llm.paged_attention_workspace(q, kc, table, num_splits=2))
out = poison_(torch.empty_like(q))
graph = capture_cold(lambda: llm.paged_attention(q, kc, vc, table, lens, out=out, num_splits=2, workspace=ws))
graph.replay(); torch.cuda.synchronize()
assert_close(out, reference.paged_attention_reference(q, kc, vc, table, lens), dtype=q.dtype)
assert split_clusters_ran(ws) == hopper, "split cluster"
""",
}


def _case_op(case):
    return {"gemm": "tensor_core_gemm", "gemm_int8": "tensor_core_gemm_int8",
            "paged_attention_split_cluster": "paged_attention"}.get(case, case)


def _capture_child(case):
    return dict(code=_PRELUDE + _CASES[case], timeout=180)


@pytest.mark.isolated(_capture_child, ops=lambda case: (_case_op(case),))
@pytest.mark.parametrize("case", sorted(_CASES))
def test_first_call_inside_capture(case):
    require_op(_case_op(case))
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    run_isolated(**_capture_child(case))
