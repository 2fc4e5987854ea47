#!/usr/bin/env bash
# On the GPU machine: the path a user without a checkout takes. Pack an sdist (kernels off,
# as on a CPU machine), build a wheel from it, install the wheel into a fresh directory, and
# run GPU tests against that install from outside the checkout (so nothing of the tree is
# imported). Logs to $OUT (./out when unset); a summary last.
#   CUDA_LLM_OPS_AREAS (default decode), TESTS (default tests/test_decode.py), MAX_JOBS, TORCH_CUDA_ARCH_LIST
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source scripts/gpu_build.sh  # the build environment (MAX_JOBS, TORCH_CUDA_ARCH_LIST)
export CUDA_LLM_OPS_AREAS=${CUDA_LLM_OPS_AREAS:-decode}
TESTS=${TESTS:-tests/test_decode.py}
work=$(mktemp -d)
summary=()
fail() { summary+=("$1"); printf '%s\n' "${summary[@]}"; exit 1; }

CUDA_LLM_OPS_SKIP_CUDA_BUILD=1 python3 setup.py -q sdist --dist-dir "$work/dist" >"$OUT/sdist.log" 2>&1 \
  || fail "sdist: failed (sdist.log)"
sdist=$(ls "$work"/dist/llm_speed-*.tar.gz)
summary+=("sdist: $(basename "$sdist"), $(tar tzf "$sdist" | grep -c '/csrc/') csrc files, $(du -k "$sdist" | cut -f1) KB")

t0=$(date +%s)
python3 -m pip wheel --no-build-isolation --no-deps -v "$sdist" -w "$work/wheel" >"$OUT/wheel.log" 2>&1 \
  || { grep -E "error|Error" "$OUT/wheel.log" | head -20; fail "wheel from the sdist: failed (wheel.log)"; }
wheel=$(ls "$work"/wheel/llm_speed-*.whl)
summary+=("wheel from the sdist: $(basename "$wheel") in $(($(date +%s) - t0)) s (areas=$CUDA_LLM_OPS_AREAS, arch=$TORCH_CUDA_ARCH_LIST)")

python3 -m pip install -q --no-deps --target "$work/site" "$wheel" >"$OUT/install.log" 2>&1 \
  || fail "install of the wheel: failed (install.log)"
# The tests and the pytest settings, copied beside nothing else of the tree.
mkdir -p "$work/run" && cp -r tests pyproject.toml README.md "$work/run/"
cd "$work/run"
export PYTHONPATH="$work/site"
python3 -c "import cuda_llm_ops as c, os; assert c.__file__.startswith(os.environ['PYTHONPATH']), c.__file__; \
print('installed at', os.path.dirname(c.__file__), '| kernels:', c.kernels_available(), c.build_info())" \
  2>&1 | tee "$OUT/import.log"
CLO_REQUIRE_KERNELS=1 python3 -m pytest -q -rs -m "cuda and not slow" $TESTS -p no:cacheprovider 2>&1 \
  | tee "$OUT/test_installed.log" >/dev/null
test_rc=${PIPESTATUS[0]}
summary+=("cuda tests against the installed wheel ($TESTS): $(grep -v '^$' "$OUT/test_installed.log" | tail -1)")
python3 -m cuda_llm_ops --help >/dev/null 2>&1 && summary+=("python3 -m cuda_llm_ops --help: ok")
rm -rf "$work"
printf '%s\n' "${summary[@]}"
exit "$test_rc"
