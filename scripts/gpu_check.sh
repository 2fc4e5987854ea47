#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, CPU tests, benchmark, summary.
#   bash scripts/gpu_check.sh                      # everything
# Knobs (environment):
#   CUDA_LLM_OPS_AREAS=attention,gemm   build only these kernel areas (faster)
#   TESTS="tests/test_attention.py"      pytest paths/args for the cuda tests (default: tests)
#   BENCH="--quick"                      run `llm-speed bench $BENCH` (unset: no bench; BENCH_TIMEOUT=300 s)
#   SLOW=1                               also run the `slow` sweeps, last (decode's dev-variants test
#                                        needs CUDA_LLM_OPS_AREAS=attention,decode; it builds as fast as decode alone)
#   EXTRA="python3 some_script.py"       extra command after the tests (output to $OUT/extra.log)
#   SKIP_BUILD=1                         reuse the extension built by the previous call (warm machine)
#   SKIP_TESTS=1                         no pytest (e.g. a bench-only second call)
#   SKIP_CPU_TESTS=1                     the cuda tests only (CI runs the CPU ones)
# Logs and JSON go to $OUT (./out when unset); a short summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source scripts/gpu_build.sh  # the build environment and build_extension
TESTS=${TESTS:-tests}
summary=()
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader || true

t0=$(date +%s)
if [ "${SKIP_BUILD:-0}" = "1" ] && ls cuda_llm_ops/_C*.so >/dev/null 2>&1; then
  rc=0; echo "reusing the extension of the previous call" >"$OUT/build.log"
else
  build_extension "$OUT/build.log"
  rc=$?
fi
t1=$(date +%s)
summary+=("build: rc=$rc in $((t1 - t0)) s (areas=${CUDA_LLM_OPS_AREAS:-all}, arch=$TORCH_CUDA_ARCH_LIST)")
if [ $rc -ne 0 ]; then
  grep -E "error|Error" "$OUT/build.log" | head -40
  tail -30 "$OUT/build.log"
  printf '%s\n' "${summary[@]}"
  exit 1
fi
python3 -c "import cuda_llm_ops as c; print('kernels:', c.kernels_available(), c.build_info())"
# Device-code checks outside the extension: the FP8 conversions (the bit-trick path sm_80
# runs, against the sm_89+ instruction, on all inputs).
if [ "${SKIP_TESTS:-0}" != "1" ]; then
  nvcc -std=c++20 -arch=sm_90a -Icsrc/include -o "$OUT/check_fp8_convert" scripts/check_fp8_convert.cu \
    && "$OUT/check_fp8_convert" >"$OUT/check_fp8.log" 2>&1
  summary+=("fp8 conversion check: rc=$? $(tail -1 "$OUT/check_fp8.log" 2>/dev/null)")
  rm -f "$OUT/check_fp8_convert"
fi

if [ "${SKIP_TESTS:-0}" != "1" ]; then
# CLO_REQUIRE_KERNELS: a build or load failure fails the run instead of skipping every cuda test;
# -rfEs lists each failure, error and skip (with its reason); the summary names the first
# failures under "failures" and the first skips (a skip is not a pass).
CLO_REQUIRE_KERNELS=1 python3 -m pytest -q -rfEs -m "cuda and not slow" $TESTS -p no:cacheprovider --durations=30 2>&1 \
  | tee "$OUT/test_cuda.log" >/dev/null
summary+=("cuda tests: $(grep -v '^$' "$OUT/test_cuda.log" | tail -1)$([ "${SLOW:-0}" = "1" ] || echo " (slow-marked tests not run: SLOW=1 adds them)")")
while IFS= read -r line; do summary+=("  $line"); done < <(grep -E "^SKIPPED" "$OUT/test_cuda.log" | head -5)
if [ "${SKIP_CPU_TESTS:-0}" != "1" ]; then
  python3 -m pytest -q -m "not cuda" tests -p no:cacheprovider 2>&1 | tee "$OUT/test_cpu.log" >/dev/null
  summary+=("cpu tests:  $(tail -1 "$OUT/test_cpu.log")")
fi
t2=$(date +%s)
summary+=("tests took $((t2 - t1)) s")
fi
t2=$(date +%s)

if [ -n "${EXTRA:-}" ]; then
  bash -c "$EXTRA" 2>&1 | tee "$OUT/extra.log" | tail -40
fi
if [ -n "${BENCH+x}" ]; then
  if [ -z "${LLM_SPEED_GIT_SHA:-}" ]; then
    # The device's copy of the tree may carry no .git, or an older one: records would name the wrong commit.
    summary+=("WARNING: LLM_SPEED_GIT_SHA unset: the bench records' git_sha is not this commit's")
  fi
  # BENCH_TIMEOUT (s, default 300): on expiry the bench is interrupted (SIGINT) and still prints
  # and saves what it measured, so the summary below always comes back.
  mkdir -p "$OUT/plots"
  tb=$(date +%s)
  timeout --signal=INT --kill-after=30 "${BENCH_TIMEOUT:-300}" \
    python3 -m cuda_llm_ops bench $BENCH --no-progress --json "$OUT/bench.json" --plot "$OUT/plots" 2>&1 \
    | tee "$OUT/bench.log" | tail -${BENCH_TAIL:-60}
  summary+=("bench: rc=${PIPESTATUS[0]} in $(( $(date +%s) - tb )) s (rc 0: ok, 1: an impl failed, 124: timed out, partial results)")
  (cd "$OUT" && tar cf plots.tar plots && rm -rf plots)
fi
if [ "${SLOW:-0}" = "1" ]; then
  python3 -m pytest -q -m "slow" tests -p no:cacheprovider 2>&1 | tee "$OUT/test_slow.log" >/dev/null
  summary+=("slow tests: $(tail -1 "$OUT/test_slow.log")")
  # a skipped slow test is not a pass: name why (say, an op its area build left out)
  while IFS= read -r line; do summary+=("  $line"); done < <(grep -E "^SKIPPED" "$OUT/test_slow.log" | head -5)
fi

# issue #5's decode targets, where this call's bench files hold its cases (a short table, then a summary line)
target_files=()
for f in "$OUT/bench.json" "$OUT/recheck.json"; do [ -f "$f" ] && target_files+=("$f"); done
if [ ${#target_files[@]} -gt 0 ]; then
  python3 scripts/decode_targets.py "${target_files[@]}" > "$OUT/targets.log" 2>&1
  trc=$?
  if [ $trc -ne 0 ]; then
    summary+=("issue #5 targets: decode_targets.py rc=$trc ($OUT/targets.log)")
  elif ! grep -q "^no issue #5 case" "$OUT/targets.log"; then
    echo "---- issue #5 targets ----"; cat "$OUT/targets.log"
    summary+=("issue #5 targets: $(tail -1 "$OUT/targets.log") ($OUT/targets.log)")
  fi
fi

echo "---- failures ----"
grep -E "^(FAILED|ERROR)" "$OUT/test_cuda.log" "$OUT/test_cpu.log" 2>/dev/null | head -30
echo "---- summary ----"
printf '%s\n' "${summary[@]}"
