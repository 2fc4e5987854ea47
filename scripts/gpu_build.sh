# Sourced by the GPU-machine scripts (gpu_check.sh, gpu_ab.sh): the build environment, and
# build_extension LOG, the editable build of the extension from the sources as sent (their
# copies may carry times older than a warm machine's objects, which ninja would keep), its
# output to LOG; extra CUDA_LLM_OPS_* settings (areas, dev defines) come from the caller's
# environment. Returns pip's status.
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
build_extension() {
  find csrc -type f -exec touch {} +
  python3 -m pip install --no-build-isolation --no-deps -v -e . >"$1" 2>&1
}
