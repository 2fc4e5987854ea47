#!/usr/bin/env bash
# The decode split counts (decode_attention_num_splits) of a GPU model, listed on a machine
# without a GPU: decode_dispatch.cu compiled host-only, linked with stand-ins for the CUDA
# runtime calls it makes (the device's SM count, compute capability and memory clock) and for
# the launchers it names (never called). For placing a sweep's rows in and around the rules'
# bands before spending device time (csrc/decode/NOTES.md "Stop 107").
#   bash scripts/split_counts_host.sh [--sms 132] [--cc 9.0] [--mem-khz 2619000] < rows
# rows: "B N Hkv rows_per_kv_head Nq D paged(0/1) [dtype: fp16|bf16|fp8]" per line; prints each
# row with its count. H100 SXM: the defaults; H200: --mem-khz 3201000 (HBM3e: above 3 GHz).
set -euo pipefail
sms=132 cc=9.0 mem=2619000
while [ $# -gt 0 ]; do
  case "$1" in
    --sms) sms=$2; shift 2 ;;
    --cc) cc=$2; shift 2 ;;
    --mem-khz) mem=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nvcc -std=c++20 -O1 --expt-relaxed-constexpr -I "$root/csrc/include" -I "$root/csrc" -cudart none \
  -c "$root/csrc/decode/decode_dispatch.cu" -o "$work/dispatch.o"
cat > "$work/runtime.cpp" <<CPP
#include <cuda_runtime_api.h>
extern "C" cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
extern "C" cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = $sms; break;
    case cudaDevAttrComputeCapabilityMajor: *v = ${cc%.*}; break;
    case cudaDevAttrComputeCapabilityMinor: *v = ${cc#*.}; break;
    case cudaDevAttrMemoryClockRate: *v = $mem; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = 233472; break;
    default: *v = 0;
  }
  return cudaSuccess;
}
CPP
cat > "$work/main.cpp" <<'CPP'
#include <cstdio>
#include <cstring>
#include "decode/decode.h"
int main() {
  using cuda_llm_ops::DType;
  char line[256], dt[16];
  while (std::fgets(line, sizeof line, stdin)) {
    int b, n, hkv, rows, nq, d, paged;
    std::strcpy(dt, "fp16");
    if (std::sscanf(line, "%d %d %d %d %d %d %d %15s", &b, &n, &hkv, &rows, &nq, &d, &paged, dt) < 7) continue;
    const DType t = !std::strcmp(dt, "fp8") ? DType::kFloat8E4M3 : !std::strcmp(dt, "bf16") ? DType::kBFloat16
                                                                                           : DType::kFloat16;
    std::printf("B=%d N=%d Hkv=%d rows=%d Nq=%d D=%d %s %s: %d\n", b, n, hkv, rows, nq, d,
                paged ? "paged" : "contiguous", dt,
                cuda_llm_ops::decode::decode_attention_num_splits(b, hkv, rows, n, d, t, paged != 0, nq));
  }
}
CPP
# nvcc for the host files too: it knows where the CUDA headers are
nvcc -std=c++20 -I "$root/csrc" -I "$root/csrc/include" -c "$work/main.cpp" -o "$work/main.o"
nvcc -std=c++20 -c "$work/runtime.cpp" -o "$work/runtime.o"
# every other symbol the dispatcher names (the launchers, the runtime's kernel registration): a
# stub returning 0, never reached by the count
nm --undefined-only "$work/dispatch.o" | awk '{print $2}' \
  | grep -E 'run_decode_attention|^__cuda|^cudaGetLastError$|launch' | sort -u \
  | while read -r sym; do printf 'asm(".globl %s\\n%s:\\n xor %%eax, %%eax\\n ret\\n");\n' "$sym" "$sym"; done \
  > "$work/stubs.c"
gcc -c "$work/stubs.c" -o "$work/stubs.o"
g++ "$work/main.o" "$work/runtime.o" "$work/dispatch.o" "$work/stubs.o" -o "$work/counts"
"$work/counts"
