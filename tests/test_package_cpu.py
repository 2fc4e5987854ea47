"""CPU tests of the distribution: what the sdist carries, and what an installed copy reports."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".cpp")


def _tree_files(top: str, suffixes: tuple[str, ...]) -> set[str]:
    found = set()
    for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
        found.update(os.path.relpath(os.path.join(dirpath, n), ROOT) for n in names if n.endswith(suffixes))
    return found


def test_sdist_carries_every_cuda_and_cpp_source(tmp_path):
    # Packed with the kernels off, as on a CPU machine: what goes in must not depend on what
    # the packing machine could compile. Packed from a copy so the checkout's egg-info stays.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                             "*.so", "benchmarks", ".hypothesis", ".pytest_cache"))
    env = dict(os.environ, CUDA_LLM_OPS_SKIP_CUDA_BUILD="1")
    run = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(tmp_path / "dist")], cwd=src,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (archive,) = (tmp_path / "dist").glob("llm_speed-*.tar.gz")
    with tarfile.open(archive) as tar:
        prefix = archive.name[: -len(".tar.gz")] + "/"
        packed = {m.name[len(prefix):] for m in tar.getmembers() if m.isfile()}
    sources = _tree_files("csrc", SOURCE_SUFFIXES)
    assert len(sources) > 50  # the kernels, their headers and the bindings
    assert sorted(sources - packed) == []
    python = _tree_files("cuda_llm_ops", (".py",)) | {"cuda_llm_ops/py.typed"}
    assert sorted(python - packed) == []
    assert {"setup.py", "pyproject.toml", "README.md", "MANIFEST.in", "LICENSE"} <= packed
    assert not any(name.endswith("NOTES.md") for name in packed)


def _git(*args: str, cwd) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True, timeout=30).stdout.strip()


def _copy_package(dest) -> None:
    shutil.copytree(os.path.join(ROOT, "cuda_llm_ops"), dest / "cuda_llm_ops",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))


def _git_sha_of_copy(site: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LLM_SPEED_GIT_SHA"}
    code = f"import sys; sys.path.insert(0, {site!r}); from cuda_llm_ops.bench.runner import git_sha; print(git_sha())"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip()


def test_git_sha_of_an_install_inside_another_repository_is_unknown(tmp_path):
    # A wheel installed into a project's .venv: site-packages lies inside the project's repo,
    # whose commit is not this package's.
    project = tmp_path / "project"
    site = project / ".venv" / "lib" / "site-packages"
    _copy_package(site)
    _git("init", "-q", cwd=project)
    (project / "app.py").write_text("print('hi')\n")
    _git("add", "app.py", cwd=project)
    _git("commit", "-q", "-m", "app", cwd=project)
    assert _git_sha_of_copy(str(site)) == "unknown"


def test_git_sha_of_a_checkout_is_its_head(tmp_path):
    # The same copy as above, as the top of its own repository: that repository's commit.
    repo = tmp_path / "repo"
    _copy_package(repo)
    _git("init", "-q", cwd=repo)
    _git("add", "cuda_llm_ops", cwd=repo)
    _git("commit", "-q", "-m", "copy", cwd=repo)
    head = _git("rev-parse", "--short", "HEAD", cwd=repo)
    assert _git_sha_of_copy(str(repo)) == head
    (repo / "cuda_llm_ops" / "py.typed").write_text("changed\n")  # tracked, imported by nothing
    assert _git_sha_of_copy(str(repo)) == head + "-dirty"
