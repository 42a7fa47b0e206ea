"""The launch ABI of host-compiled kernels (Inductor's generated kernels and
users' C kernels, torch_neuronx.c_kernels).

``_C._launch_compiled(entry, fmt, name, *args)`` queues a task on the current
stream of the arguments' device. The task calls ``entry``, a function
generated here next to the kernel::

    int <entry>(const uint64_t *a, char *msg, size_t msg_size)

which turns each 64-bit slot ``a[i]`` back into the kernel's i-th argument
and calls it. ``fmt`` has one letter per argument: ``p`` a tensor (its data
pointer), ``i`` an integer, ``u`` an address, ``f`` a float (its float32
bits). The entry returns 0, or (C++ kernels) 1 for an integer division by
zero and 2 for another exception, with its message in ``msg``.
"""

from __future__ import annotations

import ctypes
import functools

_INT_TYPES = {
    "int64_t": "i",
    "long": "i",
    "long long": "i",
    "int": "i",
    "int32_t": "i",
    "bool": "i",
    "uintptr_t": "u",
}


def _slot(ctype: str, i: int, cxx: bool) -> tuple[str, str]:
    t = " ".join(ctype.split())
    if t.endswith("*"):
        cast = f"reinterpret_cast<{t}>" if cxx else f"({t})"
        return "p", f"{cast}((uintptr_t)a[{i}])"
    base = t.removeprefix("const ").strip()
    if base in _INT_TYPES:
        return _INT_TYPES[base], f"({base})a[{i}]"
    if base in ("float", "double"):
        return "f", f"({base})tn_slot_float(a[{i}])"
    raise NotImplementedError(
        f"torch_neuronx: a kernel argument of C type {ctype!r} cannot be passed by the neuron "
        "launcher (it takes pointers, integers and float/double)"
    )


_PRELUDE = """
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static inline float tn_slot_float(uint64_t v) {
    uint32_t bits = (uint32_t)v;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
"""


def packed_entry(
    argtypes: list[str], kernel: str, entry: str, cxx: bool, prelude: bool = True
) -> tuple[str, str]:
    """(fmt, source of the entry) for a kernel taking argtypes."""
    slots = [_slot(t, i, cxx) for i, t in enumerate(argtypes)]
    fmt = "".join(k for k, _ in slots)
    call = f"{kernel}({', '.join(e for _, e in slots)});"
    head = _PRELUDE if prelude else ""
    if cxx:
        body = f"""
extern "C" __attribute__((visibility("default")))
int {entry}(const uint64_t* a, char* msg, size_t msg_size) {{
    (void)a;
    try {{
        {call}
        return 0;
    }} catch (const std::exception& e) {{
        if (std::strstr(e.what(), "ZeroDivisionError") != nullptr) return 1;
        std::snprintf(msg, msg_size, "%s", e.what());
        return 2;
    }} catch (...) {{
        std::snprintf(msg, msg_size, "unknown C++ exception");
        return 2;
    }}
}}
"""
        head = head + "#include <cstring>\n#include <cstdio>\n#include <exception>\n"
    else:
        body = f"""
__attribute__((visibility("default")))
int {entry}(const uint64_t* a, char* msg, size_t msg_size) {{
    (void)a;
    (void)msg;
    (void)msg_size;
    {call}
    return 0;
}}
"""
    return fmt, head + body


@functools.cache
def team_ops() -> int:
    """The address of the runtime's team table (tnrt_team_ops)."""
    from . import _C

    fn = ctypes.CDLL(_C.__file__).tnrt_team_ops
    fn.restype = ctypes.c_void_p
    return fn()


def launcher(path: str, entry: str, fmt: str, name: str, team: bool = False):
    """The callable that queues the kernel behind entry in the shared
    library at path (already loaded or not). team: the library may bind its
    OpenMP regions to the runtime's teams (``neuron_set_team``)."""
    from . import _C

    lib = ctypes.CDLL(path)
    if team and hasattr(lib, "neuron_set_team"):
        if lib.neuron_set_team(ctypes.c_void_p(team_ops())) != 0:
            raise RuntimeError(f"torch_neuronx: {path} was built for another runtime's team table")
    addr = ctypes.cast(getattr(lib, entry), ctypes.c_void_p).value
    fn = functools.partial(_C._launch_compiled, addr, fmt, _C._compiled_kernel_name(name))
    fn._library = lib  # keeps the library loaded as long as the launcher lives
    return fn
