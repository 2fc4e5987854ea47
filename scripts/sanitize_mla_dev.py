"""Small MLA decode cases for compute-sanitizer (memcheck): the wgmma and the mma.sync kernel
(CLO_MLA_SM90), block sizes 8 to 256, ragged lengths (1, past a page, past a tile), splits,
and a bad block index (the NaN path, no host check).

    compute-sanitizer --tool memcheck --error-exitcode 2 python3 scripts/sanitize_mla_dev.py

Exits 1 when a result is wrong; with --error-exitcode the sanitizer exits 2 on a memory error
(by default it returns the program's code). The wgmma pass runs on sm_90a only.
"""
import os
import sys

os.environ["CLO_MLA_SM90"] = ""  # set before the first call: read again on every call

os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")  # exact bounds: see sanitize_decode_dev.py

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import paged_mla_attention_reference  # noqa: E402
from cuda_llm_ops.testing import assert_close  # noqa: E402
from test_mla import make_mla_problem  # noqa: E402

failed = []
sm90a = torch.cuda.get_device_capability() == (9, 0)
for kernel in ("1", "0") if sm90a else ("0",):  # elsewhere "1" would run mma.sync again
    os.environ["CLO_MLA_SM90"] = kernel
    for i, (lens, hq, bs, ns) in enumerate((([1, 70, 300], 64, 8, 0), ([129, 2], 128, 16, 3), ([1000], 100, 64, 1),
                                            ([65, 700], 64, 256, 2), ([200], 64, 32, 5))):
        dtype = (torch.float16, torch.bfloat16)[i % 2]
        q, kv, table, seq_lens = make_mla_problem(lens, hq, bs, dtype, i)
        what = f"sm90={kernel} lens={lens} hq={hq} bs={bs} splits={ns}"
        try:
            out = llm.paged_mla_attention(q, kv, table, seq_lens, num_splits=ns)
            assert_close(out, paged_mla_attention_reference(q, kv, table, seq_lens), dtype=dtype, what=what)
            bad = table.clone()
            bad[0, 0] = kv.shape[0]
            out = llm.paged_mla_attention(q, kv, bad, seq_lens, num_splits=ns, check_indices=False)
            assert torch.isnan(out[0]).all(), f"{what}: bad index not NaN"
        except AssertionError as e:
            failed.append(str(e)[:300])
torch.cuda.synchronize()
print("\n".join(failed) if failed else "sanitize_mla_dev: all cases match")
sys.exit(1 if failed else 0)
