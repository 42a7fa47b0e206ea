"""Kernels written in C by users, run on the neuron device as its own kernels
are: queued on the current stream, in order with every other op.

A kernel is a C function taking pointers, integers and floats. It may use
the kernel library's public header (``#include <tnk.h>``), in particular
``tnk_parallel_for``, which runs on the device's host thread pool (so a
kernel does not start threads of its own). ``load_inline`` compiles the
source with the system C compiler (``$CC``, else ``cc``), links it against
the TorchNeuron extension that provides the library, caches the result by
content, and returns a launcher per function::

    lib = torch_neuronx.c_kernels.load_inline(
        "scale", SOURCE, functions={"scale": ["const float*", "float*", "int64_t", "float"]})
    lib.scale(x, out, x.numel(), 2.0)   # x, out: neuron tensors (contiguous)

A launcher checks that every tensor is on one neuron device and passes its
data pointer (the caller makes tensors contiguous and allocates outputs).
Wrap launchers in a ``torch.library.custom_op`` to get an op that works in
eager mode, in ``torch.compile(fullgraph=True)`` (with a fake
implementation) and under autograd (``register_autograd``): see
examples/c_kernels/ and docs/c_kernels.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from . import _C
from ._packed import launcher, packed_entry

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def include_dir() -> Path:
    """The directory holding tnk.h (the kernel library's public header)."""
    here = Path(__file__).resolve().parent
    for d in (here / "include" / "kernels", here.parent / "csrc" / "kernels"):
        if (d / "tnk.h").is_file():
            return d
    raise RuntimeError("torch_neuronx: the kernel library's headers (tnk.h) are not installed")


def cache_dir() -> Path:
    d = os.environ.get("TORCH_NEURONX_KERNEL_CACHE")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch_neuronx" / "c_kernels"


def _headers_digest(inc: Path) -> bytes:
    h = hashlib.sha256()
    for p in (inc / "tnk.h", inc / "eltwise_ops.h", inc.parent / "runtime" / "tnrt.h"):
        if p.is_file():
            h.update(p.read_bytes())
    return h.digest()


def _compile(name: str, source: str, cflags: list[str], verbose: bool) -> Path:
    inc = include_dir()
    ext = _C.__file__
    cc = shlex.split(os.environ.get("CC", "cc"))
    flags = ["-O3", "-march=native", "-std=gnu11", "-fPIC", "-shared", *cflags]
    key = hashlib.sha256()
    for part in (source, " ".join(cc + flags), ext, str(os.stat(ext).st_mtime_ns)):
        key.update(part.encode())
    key.update(_headers_digest(inc))
    out_dir = cache_dir()
    out = out_dir / f"{name}-{key.hexdigest()[:20]}.so"
    if out.is_file():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        src = Path(tmp) / f"{name}.c"
        src.write_text(source)
        lib = Path(tmp) / "lib.so"
        # Linked against the extension by its path (it has no soname), so
        # the loader binds tnk_* to the copy this process already loaded.
        cmd = [
            *cc,
            *flags,
            f"-I{inc}",
            str(src),
            "-o",
            str(lib),
            ext,
            f"-Wl,-rpath,{Path(ext).parent}",
        ]
        if verbose:
            print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(
                f"torch_neuronx.c_kernels: compiling {name!r} failed "
                f"(exit {r.returncode}):\n{r.stderr.strip()}"
            )
        os.replace(lib, out)  # atomic: concurrent builders agree on the file
    return out


def load_inline(
    name: str,
    source: str,
    functions: dict[str, list[str]],
    extra_cflags: list[str] | None = None,
    verbose: bool = False,
) -> SimpleNamespace:
    """Compiles C source and returns a namespace with one launcher per entry
    of functions ({C function name: [C type of each argument]}), and
    ``path``, the shared library."""
    if not _NAME.match(name):
        raise ValueError(f"c_kernels: name must be a C identifier, got {name!r}")
    if not functions:
        raise ValueError("c_kernels: functions is empty: name the C functions to launch")
    entries = []
    fmts = {}
    for i, (fn, argtypes) in enumerate(functions.items()):
        if not _NAME.match(fn):
            raise ValueError(f"c_kernels: {fn!r} is not a C function name")
        fmt, src = packed_entry(
            list(argtypes), fn, f"{fn}__neuron_entry", cxx=False, prelude=i == 0
        )
        entries.append(src)
        fmts[fn] = fmt
    path = _compile(name, source + "\n" + "\n".join(entries), list(extra_cflags or []), verbose)
    lib = SimpleNamespace(path=str(path))
    for fn, fmt in fmts.items():
        setattr(lib, fn, launcher(str(path), f"{fn}__neuron_entry", fmt, f"{name}.{fn}"))
    return lib


def load(
    name: str,
    sources: list[str | os.PathLike],
    functions: dict[str, list[str]],
    extra_cflags: list[str] | None = None,
    verbose: bool = False,
) -> SimpleNamespace:
    """load_inline of the concatenation of C source files."""
    text = "\n".join(Path(s).read_text() for s in sources)
    return load_inline(name, text, functions, extra_cflags, verbose)
