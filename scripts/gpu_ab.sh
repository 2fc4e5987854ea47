#!/usr/bin/env bash
# Builds of the extension compared in one GPU call: A is the tree as sent, B (C, ... up to F)
# the same tree with CUDA_LLM_OPS_DEV_DEFINES set to each space-separated word of $AB_DEFINES (a
# dev macro, or a comma-separated set of them, that switches a kernel variant). Each is built
# once; then $AB_CMD runs on A, B, ..., A, B, ... ($AB_ROUNDS rounds, default 2), the built .so
# copied in before each run (each run its own process), so the machine's drift spreads over all
# the builds. Build A is installed again at the end ($AB_INSTALL names another side to leave
# installed, e.g. B, for tests on the variant in the same call).
# AB_PATCH=FILE instead of AB_DEFINES: B is the tree with that patch reversed (`git diff`
# of a change: B is the code before it; the patch must be in the tree sent, or carried).
#   AB_DEFINES=CLO_DEV_SOME_VARIANT CUDA_LLM_OPS_AREAS=attention,decode \
#     AB_CMD="python3 scripts/bench_decode_dev.py --iters 30 --build-ab" bash scripts/gpu_ab.sh
# Logs under $OUT (ab_build_{A,B,...}.log, ab_{A,B,...}{1,2,...}.log); each run's table lines
# (those holding "|") printed last. Exit status: 1 when a build or a copy fails, 2 when a run
# of $AB_CMD failed (the others still ran).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
: "${AB_CMD:?set AB_CMD (the command timed)}"
if [ -n "${AB_PATCH:-}" ]; then
  [ -f "$AB_PATCH" ] || { echo "AB_PATCH: no file $AB_PATCH"; exit 1; }
  variants=("")  # one B: no dev define, the patch reversed
else
  : "${AB_DEFINES:?set AB_DEFINES (the dev macro of build B) or AB_PATCH}"
  read -r -a variants <<<"$AB_DEFINES"
fi
sides=(A B C D E F)
if [ ${#variants[@]} -eq 0 ] || [ ${#variants[@]} -ge ${#sides[@]} ]; then
  echo "AB_DEFINES: 1 to $(( ${#sides[@]} - 1 )) words, got ${#variants[@]}"; exit 1
fi
defines_of=("" "${variants[@]}")
sides=("${sides[@]:0:${#defines_of[@]}}")
source scripts/gpu_build.sh  # the build environment and build_extension
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader || true
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
installed() {  # the one built extension (a second, e.g. another Python's, would make the swap ambiguous)
  local sos=(cuda_llm_ops/_C*.so)
  [ ${#sos[@]} -eq 1 ] && [ -f "${sos[0]}" ] || { echo "want one cuda_llm_ops/_C*.so, found: ${sos[*]}" >&2; return 1; }
  echo "${sos[0]}"
}
for i in "${!sides[@]}"; do
  side=${sides[$i]} defines=${defines_of[$i]}
  t0=$(date +%s)
  reversed=0
  if [ -n "${AB_PATCH:-}" ] && [ "$i" -gt 0 ]; then
    git apply -R "$AB_PATCH" || { echo "AB_PATCH: $AB_PATCH does not reverse on this tree"; exit 1; }
    reversed=1
  fi
  CUDA_LLM_OPS_DEV_DEFINES=$defines build_extension "$OUT/ab_build_$side.log"
  brc=$?
  [ $reversed -eq 0 ] || git apply "$AB_PATCH" || { echo "AB_PATCH: could not re-apply $AB_PATCH"; exit 1; }
  [ $brc -eq 0 ] || { echo "build $side failed"; grep -E "error" "$OUT/ab_build_$side.log" | head -20; exit 1; }
  echo "build $side (defines '$defines'): $(( $(date +%s) - t0 )) s"
  so=$(installed) && cp "$so" "$store/$side.so" || exit 1
done
status=0
for r in $(seq 1 "${AB_ROUNDS:-2}"); do
  for side in "${sides[@]}"; do
    cp "$store/$side.so" "$so" || exit 1
    bash -c "$AB_CMD" >"$OUT/ab_$side$r.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=2
    echo "---- $side$r (rc $rc) ----"
    grep -E "\|" "$OUT/ab_$side$r.log" | sed -E 's/ \(sets [0-9]+\)//'
  done
done
cp "$store/${AB_INSTALL:-A}.so" "$so" || exit 1
exit $status
