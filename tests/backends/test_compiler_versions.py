"""The C-family GPU backends record their compiler's version in the toolchain (so in every
result's run hash) and keep one build per compiler version in the cache: a cubin made by
another nvcc is never reused. Fake compilers are shell scripts that print a version, count
their compiles and write the -o file."""

from __future__ import annotations

from kevolve.backends.base import KernelSource
from kevolve.backends.cuda import CudaBackend
from kevolve.backends.cuda.runtime import compile_cubin
from kevolve.backends.hip import HipBackend
from kevolve.backends.toolchain import tool_version
from kevolve.evaluate.hardware import toolchain


def fake_nvcc(tmp_path, name: str, release: str):
    p = tmp_path / name
    p.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then
  echo 'nvcc: NVIDIA (R) Cuda compiler driver'
  echo 'Cuda compilation tools, release {release[:4]}, V{release}'
  exit 0
fi
echo {name} >> {tmp_path}/compiles
while [ $# -gt 0 ]; do [ "$1" = "-o" ] && echo cubin > "$2"; shift; done
echo 'ptxas info    : Used 32 registers'
""")
    p.chmod(0o755)
    return p


def test_a_cubin_is_reused_only_by_the_same_nvcc_version(tmp_path, monkeypatch):
    monkeypatch.setenv("KEVOLVE_CACHE", str(tmp_path / "cache"))
    old, new = fake_nvcc(tmp_path, "nvcc-old", "12.8.93"), fake_nvcc(tmp_path, "nvcc-new",
                                                                      "13.0.88")
    src = KernelSource("cuda", "softmax", "cuda", "__global__ void k() {}\n", "k")
    a, _ = compile_cubin(src, str(old), "cuda", ("-cubin",))
    b, _ = compile_cubin(src, str(new), "cuda", ("-cubin",))
    again, log = compile_cubin(src, str(old), "cuda", ("-cubin",))
    assert a != b and again == a and "Used 32 registers" in log
    assert (tmp_path / "compiles").read_text().split() == ["nvcc-old", "nvcc-new"]


def test_the_compiler_version_is_in_the_toolchain(tmp_path):
    nvcc = fake_nvcc(tmp_path, "nvcc", "12.9.41")
    assert tool_version(str(nvcc)) == "12.9.41"
    assert toolchain(CudaBackend(nvcc=str(nvcc)))["nvcc"] == "12.9.41"
    assert toolchain(HipBackend(platform="nvidia", nvcc=str(nvcc)))["nvcc"] == "12.9.41"
    assert "nvcc" not in toolchain(CudaBackend(emulate=True))
    # hipcc wraps nvcc or clang by HIP_PLATFORM: the AMD build's version is clang's
    hipcc = tmp_path / "hipcc"
    hipcc.write_text("#!/bin/sh\necho 'HIP version: 5.2.1'\n"
                     "if [ \"$HIP_PLATFORM\" = amd ]; then echo 'clang version 15.0.6'; "
                     "else echo 'Cuda compilation tools, release 13.0, V13.0.88'; fi\n")
    hipcc.chmod(0o755)
    assert toolchain(HipBackend(hipcc=str(hipcc)))["hipcc"] == \
        "HIP version: 5.2.1; clang version 15.0.6"
