"""Build of llm-speed: one CUDA extension, cuda_llm_ops._C.

Environment:
  TORCH_CUDA_ARCH_LIST   archs to build, e.g. "8.0;9.0a" (default: the visible GPU;
                         a Hopper GPU gets 9.0a so wgmma/TMA/cluster code is enabled)
  MAX_JOBS               parallel compile jobs (ninja)
  CUDA_LLM_OPS_AREAS     comma list of kernel areas to build (default: all), e.g.
                         "attention,gemm": a faster build while working on one area
  CUDA_LLM_OPS_SKIP_CUDA_BUILD=1   install the Python package without kernels

Without a CUDA-enabled torch the package installs without its extension; calling
a kernel then raises a RuntimeError that says how to build it.
"""
import glob
import os
import sys

from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
AREAS = ("attention", "gemm", "decode", "lightning", "fused")


def _want_cuda_build():
    if os.environ.get("CUDA_LLM_OPS_SKIP_CUDA_BUILD", "0") == "1":
        return False, "CUDA_LLM_OPS_SKIP_CUDA_BUILD=1"
    try:
        import torch
    except ImportError:
        return False, "torch is not installed in the build environment"
    if torch.version.cuda is None:
        return False, f"torch {torch.__version__} has no CUDA support"
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        return False, "no CUDA toolkit found (set CUDA_HOME)"
    return True, ""


def _default_arch_list():
    import torch

    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}.{minor}" + ("a" if (major, minor) == (9, 0) else "")
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    else:
        os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;9.0a"


def _extensions():
    ok, why = _want_cuda_build()
    if not ok:
        print(f"llm-speed: building without CUDA kernels ({why})", file=sys.stderr)
        return [], {}
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension

    _default_arch_list()
    areas = [a.strip() for a in os.environ.get("CUDA_LLM_OPS_AREAS", ",".join(AREAS)).split(",") if a.strip()]
    unknown = sorted(set(areas) - set(AREAS))
    if unknown:
        raise SystemExit(f"CUDA_LLM_OPS_AREAS: unknown area(s) {unknown}; known: {list(AREAS)}")
    sources = ["csrc/bindings/library.cpp"]
    if not os.path.exists(os.path.join(ROOT, sources[0])):
        raise SystemExit(f"llm-speed: {os.path.join(ROOT, sources[0])} is missing: this source tree has no csrc/ "
                         "(an sdist packed without MANIFEST.in?); build from a checkout or a complete sdist")
    for area in areas:
        sources += sorted(glob.glob(f"csrc/{area}/*.cu"))
        binding = f"csrc/bindings/{area}.cpp"
        if os.path.exists(os.path.join(ROOT, binding)):
            sources.append(binding)
    print(f"llm-speed: building areas {areas} for TORCH_CUDA_ARCH_LIST={os.environ['TORCH_CUDA_ARCH_LIST']}",
          file=sys.stderr)
    include = [os.path.join(ROOT, "csrc", "include"), os.path.join(ROOT, "csrc")]
    define = [("CUDA_LLM_OPS_BUILD_AREAS", '"' + ",".join(areas) + '"')]
    # Dev builds: CUDA_LLM_OPS_DEV_DEFINES="CLO_DEV_CHAOS,..." (macros the kernels' dev probes test)
    define += [(m.strip(), None) for m in os.environ.get("CUDA_LLM_OPS_DEV_DEFINES", "").split(",") if m.strip()]
    ext = CUDAExtension(
        name="cuda_llm_ops._C",
        sources=sources,
        include_dirs=include,
        define_macros=define,
        extra_compile_args={
            # no -std here: torch picks the standard its headers were built for (C++20 in 2.10+);
            # a different one changes c10::Error's layout and a TORCH_CHECK crashes the process.
            "cxx": ["-O3"],
            "nvcc": ["-O3", "-std=c++20", "-lineinfo", "--expt-relaxed-constexpr", "-Xptxas=-v" if
                     os.environ.get("CUDA_LLM_OPS_PTXAS_VERBOSE") == "1" else "-Xptxas=-O3",
                     "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                     "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"],
        },
    )
    return [ext], {"build_ext": BuildExtension.with_options(use_ninja=True)}


ext_modules, cmdclass = _extensions()

setup(
    packages=find_packages(include=["cuda_llm_ops", "cuda_llm_ops.*"]),
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
