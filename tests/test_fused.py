"""GPU tests of the fused decode attention block against the float64 reference: output,
the cache slots it appends, both cluster sizes, the unfused fallback, graph capture and
replay, the workspace left zero, and the error paths."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuda_llm_ops
from cuda_llm_ops import fused_decode_block, fused_decode_block_path, fused_decode_block_workspace
from cuda_llm_ops.decode import decode_workspace_counters_idle
from cuda_llm_ops.fused import _attention_workspace
from cuda_llm_ops.reference import fused_decode_block_reference, make_fused_decode_problem
from cuda_llm_ops.testing import assert_close, poison_, run_isolated
from conftest import require_op

pytestmark = pytest.mark.cuda

DTYPES = [torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _need_ops():
    for name in ("fused_decode_block", "gemm", "paged_attention", "paged_kv_append"):
        require_op(name)


def hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


needs_hopper = pytest.mark.skipif(not hopper(), reason="the fused kernel runs on Hopper")
KERNEL = "fused" if hopper() else "auto"  # the one-kernel path wherever it exists, whatever "auto" picks


def check_call(prob, dtype, cluster_size=0, give_out=True, expect_fused=None, path="auto"):
    """One call against the reference on copies of the same caches: out and both caches."""
    ref_k, ref_v = prob["k_cache"].clone(), prob["v_cache"].clone()
    args = (prob["x"], prob["w_qkv"], prob["w_o"])
    tables, lens = prob["block_tables"], prob["seq_lens"]
    ref = fused_decode_block_reference(*args, ref_k, ref_v, tables, lens, cos=prob["cos"], sin=prob["sin"],
                                       dtype=torch.float64)
    if expect_fused is not None:
        fused, why = fused_decode_block_path(prob["x"], prob["w_o"], prob["k_cache"], tables, path)
        assert fused == expect_fused, why
    out = poison_(torch.empty_like(prob["x"])) if give_out else None
    got = fused_decode_block(*args, prob["k_cache"], prob["v_cache"], tables, lens, cos=prob["cos"], sin=prob["sin"],
                             out=out, cluster_size=cluster_size, path=path)
    if give_out:
        assert got is out
    assert_close(got, ref, dtype=dtype, what="out")
    # The appended slots hold the reference's k and v (rounded the same way, so within an
    # ulp); every other slot is untouched.
    for mine, theirs, name in ((prob["k_cache"], ref_k, "k_cache"), (prob["v_cache"], ref_v, "v_cache")):
        assert_close(mine, theirs, dtype=dtype, what=name)
    return got


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=st.integers(1, 16), heads=st.sampled_from([1, 2, 4, 6]), hidden=st.sampled_from([512, 1024, 1536]),
       max_len=st.sampled_from([1, 2, 17, 300, 1000, 2100]), block_size=st.sampled_from([8, 16, 64, 256]),
       dtype=st.sampled_from(DTYPES), rope=st.booleans(), cluster_size=st.sampled_from([0, 2, 4]),
       give_out=st.booleans(), seed=st.integers(0, 2**16))
def test_matches_reference(b, heads, hidden, max_len, block_size, dtype, rope, cluster_size, give_out, seed):
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, max_len + 1, (b,), generator=g).tolist()
    lens[0] = max_len  # the longest length always present; 1 is drawn often at small max_len
    prob = make_fused_decode_problem(b, hidden, heads, heads, 128, lens, block_size, dtype, "cuda", extra_blocks=3,
                                     rope=rope, generator=g)
    check_call(prob, dtype, cluster_size, give_out, expect_fused=hopper(), path=KERNEL)


@pytest.mark.parametrize("dtype,b,lens,cluster_size", [
    (torch.float16, 1, [4096], 4), (torch.bfloat16, 1, [4096], 2),
    pytest.param(torch.float16, 16, None, 2, marks=pytest.mark.slow),
    pytest.param(torch.bfloat16, 16, None, 4, marks=pytest.mark.slow),
    (torch.float16, 9, None, 4), (torch.bfloat16, 9, None, 2)])
def test_llama2_7b_shape(dtype, b, lens, cluster_size):
    """The shape the kernel is tuned for: hidden 4096, 32 heads, ragged lengths to 4096. The
    two B=16 cases (22-25 s each, most of it the reference) are `slow`: the B=9 pair covers
    both dtypes and cluster sizes on a ragged batch."""
    g = torch.Generator().manual_seed(b * 7 + cluster_size)
    lens = lens or torch.randint(1, 4097, (b,), generator=g).tolist()
    prob = make_fused_decode_problem(b, 4096, 32, 32, 128, lens, 16, dtype, "cuda", rope=True, generator=g)
    check_call(prob, dtype, cluster_size, expect_fused=hopper(), path=KERNEL)


@pytest.mark.parametrize("case", ["gqa", "head_dim_64", "batch_17", "head_dim_72"])
def test_unfused_fallback(case):
    """Shapes the fused kernel does not cover run on the unfused ops, same contract (head_dim
    72: no 16-byte halves, so the rotary embedding runs in PyTorch ops before the append)."""
    b, hq, hkv, d, hidden = {"gqa": (3, 8, 2, 128, 1024), "head_dim_64": (2, 4, 4, 64, 512),
                             "batch_17": (17, 4, 4, 128, 512), "head_dim_72": (2, 4, 4, 72, 576)}[case]
    g = torch.Generator().manual_seed(5)
    lens = torch.randint(1, 700, (b,), generator=g).tolist()
    prob = make_fused_decode_problem(b, hidden, hq, hkv, d, lens, 16, torch.float16, "cuda", rope=True, generator=g)
    fused, why = fused_decode_block_path(prob["x"], prob["w_o"], prob["k_cache"])
    assert not fused and why
    check_call(prob, torch.float16)


def test_unfused_with_weights_that_require_grad():
    """Model weights are often nn.Parameters called outside no_grad: the unfused path rotates q
    in place inside qkv, which must stay a view autograd lets it change (a multi-output view
    such as split() would be refused)."""
    prob = make_fused_decode_problem(2, 512, 4, 2, 128, [40, 300], 16, torch.float16, "cuda", rope=True)
    ref = fused_decode_block_reference(prob["x"], prob["w_qkv"], prob["w_o"], prob["k_cache"].clone(),
                                       prob["v_cache"].clone(), prob["block_tables"], prob["seq_lens"],
                                       cos=prob["cos"], sin=prob["sin"], dtype=torch.float64)
    w_qkv, w_o = torch.nn.Parameter(prob["w_qkv"]), torch.nn.Parameter(prob["w_o"])
    got = fused_decode_block(prob["x"], w_qkv, w_o, prob["k_cache"], prob["v_cache"], prob["block_tables"],
                             prob["seq_lens"], cos=prob["cos"], sin=prob["sin"], path="unfused")
    assert_close(got.detach(), ref, dtype=torch.float16, what="out, weights requiring grad")


@needs_hopper
def test_auto_path_rule():
    """"auto" takes the one kernel at batch 1 with a table of at most 1024 keys (where it
    measured faster), the unfused ops elsewhere; both paths give the reference's answer.
    "fused" forces the kernel where it supports the shapes and refuses the others."""
    for b, lens, want in ((1, [1024], True), (1, [1025], False), (2, [300, 40], False)):
        prob = make_fused_decode_problem(b, 1024, 8, 8, 128, lens, 16, torch.float16, "cuda", rope=True)
        fused, why = fused_decode_block_path(prob["x"], prob["w_o"], prob["k_cache"], prob["block_tables"])
        assert fused == want, why
        assert want or "measured faster" in why
        check_call(prob, torch.float16, path="auto")
        check_call(prob, torch.float16, expect_fused=True, path="fused")
        check_call(prob, torch.float16, expect_fused=False, path="unfused")
    gqa = make_fused_decode_problem(1, 1024, 8, 2, 128, [64], 16, torch.float16, "cuda")
    with pytest.raises(ValueError, match=r"path='fused': the one-kernel path does not run these shapes"):
        fused_decode_block(*(gqa[n] for n in ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")),
                           path="fused")
    with pytest.raises(ValueError, match=r"path must be one of"):
        fused_decode_block(*(gqa[n] for n in ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")),
                           path="fast")


@needs_hopper
def test_workspace_left_zero_and_repeatable():
    """The kernel leaves its sums and counters zero, so one workspace serves every call;
    repeated calls agree to the atomics' last-bit order."""
    prob = make_fused_decode_problem(5, 1024, 8, 8, 128, [33, 1, 700, 64, 250], 16, torch.bfloat16, "cuda")
    ws = fused_decode_block_workspace(prob["x"], prob["w_o"])
    outs = []
    for cluster_size in (4, 2, 4):
        outs.append(fused_decode_block(prob["x"], prob["w_qkv"], prob["w_o"], prob["k_cache"], prob["v_cache"],
                                       prob["block_tables"], prob["seq_lens"], cos=prob["cos"], sin=prob["sin"],
                                       workspace=ws, cluster_size=cluster_size, path="fused"))
        torch.cuda.synchronize()
        assert not ws.any(), "workspace not left zero"
    for o in outs[1:]:
        assert_close(o, outs[0], dtype=torch.float32, rel_tol=1e-3, what="repeat")


@pytest.mark.parametrize("path", ["fused", "unfused"])
def test_graph_capture_replay(path):
    """Captured once with out=, a workspace (made with the caches and the table, so it
    serves the unfused path's attention too) and check_indices=False, replayed with other
    lengths, tables and inputs written into the captured tensors; on either path."""
    if path == "fused" and not hopper():
        pytest.skip("the fused kernel runs on Hopper")
    b, hidden, heads = 4, 1024, 8
    prob = make_fused_decode_problem(b, hidden, heads, heads, 128, [100, 7, 900, 1], 16, torch.float16, "cuda",
                                     extra_blocks=300)
    out = torch.empty_like(prob["x"])
    ws = fused_decode_block_workspace(prob["x"], prob["w_o"], prob["k_cache"], prob["block_tables"])
    names = ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")

    def step():
        fused_decode_block(*(prob[n] for n in names), cos=prob["cos"], sin=prob["sin"], out=out, workspace=ws,
                           check_indices=False, path=path)

    step()  # warm-up outside capture (lazy init)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    num_blocks, max_blocks = prob["k_cache"].shape[0], prob["block_tables"].shape[1]
    cap = max_blocks * prob["k_cache"].shape[1]
    for seed, lens in ((1, [1, cap, 16, 17]), (2, [640, 3, 1, cap - 1])):
        g = torch.Generator().manual_seed(seed)
        new = make_fused_decode_problem(b, hidden, heads, heads, 128, lens, 16, torch.float16, "cuda", generator=g)
        for n in ("x", "w_qkv", "w_o", "cos", "sin"):
            prob[n].copy_(new[n])
        prob["seq_lens"].copy_(new["seq_lens"])
        # other physical blocks for every sequence (the pool holds more than B tables' worth)
        perm = torch.randperm(num_blocks, generator=g)[:b * max_blocks].view(b, max_blocks)
        prob["block_tables"].copy_(perm.to(torch.int32))
        ref_k, ref_v = prob["k_cache"].clone(), prob["v_cache"].clone()
        ref = fused_decode_block_reference(*(prob[n] for n in names[:3]), ref_k, ref_v, prob["block_tables"],
                                           prob["seq_lens"], cos=prob["cos"], sin=prob["sin"], dtype=torch.float64)
        poison_(out)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, ref, dtype=torch.float16, what=f"replay {seed}")
        assert_close(prob["k_cache"], ref_k, dtype=torch.float16, what=f"k_cache replay {seed}")
        fused_bytes = cuda_llm_ops._ops.op("fused_decode_block_workspace_bytes")(hidden)
        assert not ws[:fused_bytes].any()
        attention_ws = _attention_workspace(ws, prob["x"], prob["w_o"], prob["k_cache"], prob["block_tables"])
        assert attention_ws is not None and decode_workspace_counters_idle(attention_ws)


def test_errors():
    """Bad inputs raise ValueError/TypeError/RuntimeError naming the argument."""
    prob = make_fused_decode_problem(2, 512, 4, 4, 128, [10, 20], 16, torch.float16, "cuda")
    names = ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")

    def call(**over):
        args = {n: prob[n] for n in names}
        args.update(over)
        return fused_decode_block(*(args[n] for n in names), cos=over.get("cos", prob["cos"]),
                                  sin=over.get("sin", prob["sin"]))

    with pytest.raises((TypeError, ValueError), match="w_qkv"):
        call(w_qkv=prob["w_qkv"].to(torch.bfloat16))
    with pytest.raises(ValueError, match="w_qkv"):
        call(w_qkv=prob["w_qkv"][:-8])
    with pytest.raises(ValueError, match="w_o"):
        call(w_o=prob["w_o"][:, :-128].contiguous())
    with pytest.raises((TypeError, ValueError), match="block_tables"):
        call(block_tables=prob["block_tables"].long())
    with pytest.raises(ValueError, match="cos"):
        call(cos=prob["cos"][:, :64].contiguous())
    with pytest.raises(ValueError, match="seq_lens"):
        call(seq_lens=torch.tensor([0, 5], dtype=torch.int32, device="cuda"))
    cap = prob["block_tables"].shape[1] * prob["k_cache"].shape[1]
    with pytest.raises(ValueError, match="seq_lens"):
        call(seq_lens=torch.tensor([cap + 1, 5], dtype=torch.int32, device="cuda"))
    bad = prob["block_tables"].clone()
    bad[1, 0] = prob["k_cache"].shape[0]
    with pytest.raises(ValueError, match="block_tables"):
        call(block_tables=bad)
    with pytest.raises(ValueError, match="cluster_size"):
        fused_decode_block(*(prob[n] for n in names), cluster_size=3)
    # out apart from every input, on either path (in place over x is refused on both)
    for path in ("unfused",) + (("fused",) if hopper() else ()):
        for over, name in ((prob["x"], "x"), (prob["w_o"][:2], "w_o"), (prob["k_cache"].view(-1)[:2 * 512].view(2, 512),
                                                                           "k_cache")):
            with pytest.raises(ValueError, match=f"out must not overlap {name}"):
                fused_decode_block(*(prob[n] for n in names), cos=prob["cos"], sin=prob["sin"], out=over, path=path)
        ws = fused_decode_block_workspace(prob["x"], prob["w_o"], prob["k_cache"], prob["block_tables"])
        with pytest.raises(ValueError, match="out must not overlap workspace"):
            fused_decode_block(*(prob[n] for n in names), cos=prob["cos"], sin=prob["sin"],
                               out=ws[:2 * 512 * 2].view(torch.float16).view(2, 512), workspace=ws, path=path)
        # the caches are written too (stop 95): apart from each other and every input
        k_as_v = [prob["k_cache"] if n == "v_cache" else prob[n] for n in names]
        with pytest.raises(ValueError, match="k_cache must not overlap v_cache"):
            fused_decode_block(*k_as_v, cos=prob["cos"], sin=prob["sin"], path=path)
    if hopper():  # the one kernel's sums and counters must start at zero (a count off zero never completes)
        ws = fused_decode_block_workspace(prob["x"], prob["w_o"])
        ws[5] = 1
        with pytest.raises(ValueError, match="workspace's sums and counters .* are not zero"):
            fused_decode_block(*(prob[n] for n in names), cos=prob["cos"], sin=prob["sin"], workspace=ws,
                               path="fused")


def _binding_errors_child():
    return dict(code="""
        import torch, pytest, cuda_llm_ops
        from cuda_llm_ops.reference import make_fused_decode_problem
        p = make_fused_decode_problem(2, 512, 4, 4, 128, [10, 20], 16, torch.float16, "cuda")
        op = torch.ops.cuda_llm_ops.fused_decode_block
        out = torch.empty_like(p["x"])
        small = torch.zeros(16, dtype=torch.uint8, device="cuda")
        args = [p[n] for n in ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")]
        with pytest.raises(RuntimeError, match="workspace"):
            op(*args, p["cos"], p["sin"], 0.088, out, small, 0)
        ws = cuda_llm_ops.fused_decode_block_workspace(p["x"], p["w_o"])
        with pytest.raises(RuntimeError, match="scale"):
            op(*args, p["cos"], p["sin"], 0.0, out, ws, 0)
        with pytest.raises(RuntimeError, match="cos and sin"):
            op(*args, p["cos"], None, 0.088, out, ws, 0)
        with pytest.raises(RuntimeError, match="out"):
            op(*args, p["cos"], p["sin"], 0.088, out[:1], ws, 0)
        with pytest.raises(RuntimeError, match="out must not overlap x"):
            op(*args, p["cos"], p["sin"], 0.088, p["x"], ws, 0)
        with pytest.raises(RuntimeError, match="out must not overlap k_cache"):
            op(*args, p["cos"], p["sin"], 0.088, p["k_cache"].view(-1)[:1024].view(2, 512), ws, 0)
        tables = p["block_tables"].clone()
        tables[1, :] = 10**6  # past the pool: the kernel skips those keys and the append
        k0, v0 = p["k_cache"].clone(), p["v_cache"].clone()
        args[5] = tables
        out.fill_(float("nan"))  # every row must be written: sequence 1 too, over no key and no append
        op(*args, p["cos"], p["sin"], 0.088, out, ws, 0)
        torch.cuda.synchronize()
        assert torch.isfinite(out).all()
        assert not ws.any()
        changed = (p["k_cache"] != k0).flatten(1).any(1).nonzero().flatten().tolist()
        assert changed == [int(p["block_tables"][0, 0])], changed  # only sequence 0's append
        args[5] = p["block_tables"]
        # stop 95: aligned bases, the caches apart, a table whose capacity fits int32
        x_odd = torch.empty(p["x"].numel() + 1, dtype=p["x"].dtype, device="cuda")[1:].view(p["x"].shape)
        x_odd.copy_(p["x"])
        with pytest.raises(RuntimeError, match="x must start at a 16-byte aligned address"):
            op(x_odd, *args[1:], p["cos"], p["sin"], 0.088, out, ws, 0)
        with pytest.raises(RuntimeError, match="workspace must start at a 16-byte aligned address"):
            op(*args, p["cos"], p["sin"], 0.088, out, torch.zeros(ws.numel() + 8, dtype=torch.uint8,
                                                                  device="cuda")[4:4 + ws.numel()], 0)
        with pytest.raises(RuntimeError, match="k_cache must not overlap v_cache"):
            op(*args[:4], p["k_cache"], *args[5:], p["cos"], p["sin"], 0.088, out, ws, 0)
        big = torch.zeros(1, 2**16, 4, 128, dtype=p["x"].dtype, device="cuda")  # 2^15 blocks of 2^16 keys a row
        wide = torch.zeros(2, 2**15, dtype=torch.int32, device="cuda")
        with pytest.raises(RuntimeError, match=r"max_blocks_per_seq x block_size .* must be < 2\\^31"):
            op(*args[:3], big, big.clone(), wide, args[6], p["cos"], p["sin"], 0.088, out, ws, 0)
    """)


@pytest.mark.isolated(_binding_errors_child, ops=("fused_decode_block", "gemm", "paged_attention", "paged_kv_append"))
@needs_hopper
def test_binding_errors_and_guards():
    """The raw op's own checks (a child process, as every binding-error test), and the
    kernel's guards: an out-of-range block index with check_indices=False neither faults nor
    writes outside the caches."""
    run_isolated(**_binding_errors_child())
