"""CPU tests: GEMM references and the input validation that needs no GPU."""
import pytest
import torch

import cuda_llm_ops as llm
from cuda_llm_ops import _ops
from cuda_llm_ops.reference import gemm_reference, int8_gemm_reference


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_reference_layouts(trans_a, trans_b):
    g = torch.Generator().manual_seed(0)
    m, n, k = 7, 5, 11
    a = torch.randn((k, m) if trans_a else (m, k), generator=g)
    b = torch.randn((n, k) if trans_b else (k, n), generator=g)
    c = torch.randn(m, n, generator=g)
    ref = gemm_reference(a, b, 0.5, 2.0, trans_a, trans_b, c, dtype=torch.float64)
    x = a.t() if trans_a else a
    y = b.t() if trans_b else b
    torch.testing.assert_close(ref, (0.5 * x.double() @ y.double() + 2.0 * c.double()))
    assert gemm_reference(a, b, 1.0, 3.0, trans_a, trans_b).dtype == torch.float32
    # beta is ignored without c
    torch.testing.assert_close(gemm_reference(a, b, 1.0, 3.0, trans_a, trans_b), x @ y)


def test_int8_reference_exact():
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-128, 128, (9, 300), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (300, 13), generator=g, dtype=torch.int8)
    ref = int8_gemm_reference(a, b)
    assert ref.dtype == torch.int32
    assert torch.equal(ref, (a.long() @ b.long()).int())
    with pytest.raises(ValueError, match="must be int8"):
        int8_gemm_reference(a.float(), b)


def test_validate_gemm_inputs_shapes_on_cpu():
    a, b = torch.randn(8, 16), torch.randn(16, 24)
    with pytest.raises(ValueError, match=r"a must be 2-D \[M, K\]"):
        llm.validate_gemm_inputs(a[None], b)
    with pytest.raises(ValueError, match=r"b must be 2-D \[N, K\]"):
        llm.validate_gemm_inputs(a, b[None], trans_b=True)
    with pytest.raises(ValueError, match=r"op\(a\) is \[16, 8\] and op\(b\) is \[16, 24\]"):
        llm.validate_gemm_inputs(a, b, trans_a=True)
    with pytest.raises(ValueError, match=r"b must have the same dtype as a \(float32\), got float16"):
        llm.validate_gemm_inputs(a, b.half())
    with pytest.raises(ValueError, match=r"a must have dtype float32 or float16 or bfloat16, got float64"):
        llm.validate_gemm_inputs(a.double(), b.double())
    with pytest.raises(ValueError, match=r"must have no empty dimension"):
        llm.validate_gemm_inputs(torch.randn(0, 16), b)
    # a dimension past 2^30 (meta tensors: no memory): the kernels' int tile counts would wrap
    with pytest.raises(ValueError, match=r"a dimensions must be <= 2\^30 \(1073741824; .*got shape \(1, 1073741825\)"):
        llm.validate_gemm_inputs(torch.empty(1, 2**30 + 1, device="meta"), torch.empty(2**30 + 1, 8, device="meta"))
    with pytest.raises(ValueError, match=r"b dimensions must be <= 2\^30"):
        llm.validate_gemm_inputs(torch.empty(1, 8, device="meta"), torch.empty(8, 2**30 + 1, device="meta"))
    with pytest.raises(ValueError, match=r"c must have shape \[M, N\] = \[8, 24\]"):
        llm.validate_gemm_inputs(a, b, c=torch.randn(24, 8))
    with pytest.raises(ValueError, match=r"c must have dtype float32, got float16"):
        llm.validate_gemm_inputs(a, b, c=torch.randn(8, 24).half())
    with pytest.raises(TypeError, match=r"a must be a torch.Tensor"):
        llm.validate_gemm_inputs("a", b)
    with pytest.raises(ValueError, match=r"out must have shape \[M, N\] = \[8, 24\], got \(8, 16\)"):
        llm.validate_gemm_inputs(a, b, out=torch.randn(8, 16))
    with pytest.raises(ValueError, match=r"out must have dtype int32, got float32"):
        llm.validate_gemm_inputs(a, b, c_dtype=torch.int32, out=torch.randn(8, 24))
    with pytest.raises(TypeError, match=r"out must be a torch.Tensor"):
        llm.validate_gemm_inputs(a, b, out=[0.0])
    # everything right except the device
    with pytest.raises(ValueError, match=r"a must be a CUDA tensor"):
        llm.validate_gemm_inputs(a, b)


@pytest.mark.skipif(_ops.kernels_available(), reason="kernels are built")
def test_gemm_without_kernels_says_how_to_build():
    a, b = torch.randn(8, 16), torch.randn(16, 24)
    for fn in (llm.gemm, llm.tensor_core_gemm, llm.tensor_core_gemm_int8):
        with pytest.raises(RuntimeError, match=r"installed without its CUDA kernels"):
            fn(a, b)


def test_check_out_apart_on_cpu():
    from cuda_llm_ops.validation import check_out_apart
    buf = torch.randn(100)
    a, b = buf[:40].view(4, 10), buf[40:80].view(4, 10)
    check_out_apart(buf[80:].view(4, 5), [(a, "a"), (b, "b"), (None, "c")])  # apart: fine
    with pytest.raises(ValueError, match=r"out must not overlap b$"):
        check_out_apart(buf[79:99].view(4, 5), [(a, "a"), (b, "b")])
    with pytest.raises(ValueError, match=r"out must not overlap a$"):
        check_out_apart(a, [(a, "a")])
    check_out_apart(a, [(a, "c")], allow_same=("c",))  # out is c itself
    with pytest.raises(ValueError, match=r"out must not overlap c \(it may be c itself\)"):
        check_out_apart(buf[1:41].view(4, 10), [(a, "c")], allow_same=("c",))
    w = torch.randn(6, 4)  # a transpose view spans the same bytes
    with pytest.raises(ValueError, match=r"out must not overlap b"):
        check_out_apart(w.view(-1)[20:], [(w.t(), "b")])
    rows = torch.randn(3, 8)  # a strided view spans its rows and the gaps between them
    q = rows[:, :4]
    with pytest.raises(ValueError, match=r"out must not overlap q"):  # past q's first numel(), over its last row
        check_out_apart(rows.view(-1)[12:20], [(q, "q")])
    check_out_apart(rows.view(-1)[20:], [(q, "q")])  # past its last element: fine
    check_out_apart(torch.empty(0), [(q, "q")])  # empty: nothing to overlap


def test_check_writes_apart_on_cpu():
    from cuda_llm_ops.validation import check_writes_apart
    buf = torch.randn(100)
    x, y, z = buf[:30], buf[30:60], buf[60:90]
    check_writes_apart([(x, "x"), (y, "y"), (None, "w"), (z, "z")], ("y", "w", "z"))  # apart; w not given
    # each written tensor in `written`'s order, against the others in `named`'s order
    with pytest.raises(ValueError, match=r"^y must not overlap z$"):
        check_writes_apart([(x, "x"), (y, "y"), (buf[50:70], "z")], ("y", "z"))
    with pytest.raises(ValueError, match=r"^z must not overlap x$"):
        check_writes_apart([(x, "x"), (y, "y"), (buf[10:25], "z")], ("y", "z"))
    with pytest.raises(ValueError, match=r"no argument named 'q' among \['x', 'y'\]"):  # a caller's slip
        check_writes_apart([(x, "x"), (y, "y")], ("y", "q"))
