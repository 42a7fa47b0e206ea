"""Builds torch_neuronx._C: the C libraries (csrc/runtime, csrc/kernels) are
compiled by csrc/Makefile into a static archive, then linked into the thin
C++ extension (csrc/aten). Build with --no-build-isolation against torch."""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup

# Importing torch must not load an old (or half-built) torch_neuronx through
# the torch.backends entry point while we build the new one.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

ROOT = Path(__file__).resolve().parent
C_BUILD = ROOT / "build" / "c"


class BuildWithCLibraries(BuildExtension):
    def run(self):
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["make", "-C", str(ROOT / "csrc"), f"-j{jobs}", f"BUILD={C_BUILD}"])
        # The kernel library's public headers, for users' C kernels
        # (torch_neuronx.c_kernels): installed with the package.
        for sub, name in (
            ("kernels", "tnk.h"),
            ("kernels", "eltwise_ops.h"),
            ("runtime", "tnrt.h"),
        ):
            dst = ROOT / "torch_neuronx" / "include" / sub
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / "csrc" / sub / name, dst / name)
        super().run()


ext = CppExtension(
    name="torch_neuronx._C",
    sources=sorted(str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "aten").glob("*.cpp")),
    # kineto: the PrivateUse1 activity profiler (csrc/aten/profiler.cpp)
    include_dirs=[str(ROOT / "csrc")] + [os.path.join(p, "kineto") for p in include_paths()[:1]],
    # fmt (used inline by kineto headers) is not exported by libtorch
    define_macros=[("USE_KINETO", None), ("FMT_HEADER_ONLY", None)],
    extra_objects=[str(C_BUILD / "libtnrt.a")],
    extra_compile_args={"cxx": ["-O2", "-g0", "-std=c++17", "-Wno-unused-parameter"]},
    libraries=["m", "mvec"],  # mvec: glibc's vector libm (csrc/kernels/unary.c)
)

setup(
    ext_modules=[ext],
    cmdclass={"build_ext": BuildWithCLibraries},
    package_data={"torch_neuronx": ["include/*/*.h"]},
)
