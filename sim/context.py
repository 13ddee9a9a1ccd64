"""Who is running: the rank-wide runtime and, per thread, the core (program instance)."""
from __future__ import annotations

import os
import sys
import threading

_local = threading.local()
_runtime = None          # the SimRuntime of this process (one rank), set by sim.backend
KERNEL_CODES: set = set()  # code objects of interpreted @triton.jit functions (sim/interp.py)


def runtime():
    if _runtime is None:
        raise not_initialized()
    return _runtime


def not_initialized():
    from triton_dist.errors import TritonDistError
    return TritonDistError(
        "triton_dist is not initialized in this process: run the code inside "
        "triton_dist.launch(...), or call triton_dist.init() first (e.g. under torchrun)")


def current():
    """The runtime of this process, or None where none is set yet (no error)."""
    return _runtime


def set_runtime(rt) -> None:
    global _runtime
    _runtime = rt


# a default argument meaning "the calling thread's core, look it up": the access path looks
# its core up once and hands it to the functions it calls (None is the host)
HERE = object()


def core():
    """The CoreContext of the calling thread, or None on the host."""
    return getattr(_local, "core", None)


def set_core(c) -> None:
    _local.core = c


def kernel_frame(depth: int = 1):
    f = sys._getframe(depth)
    while f is not None:
        if f.f_code in KERNEL_CODES:
            return f
        f = f.f_back
    return None


def kernel_line(depth: int = 2) -> str:
    """'file.py:LINE (kernel)' of the innermost @triton.jit frame calling us."""
    f = kernel_frame(depth)
    if f is None:
        return "<host>"
    return site_name((f.f_code, f.f_lineno))


_SITE_NAMES: dict = {}     # (code, line) -> its words: every scheduling point names its line


def site_name(site) -> str:
    """kernel_line's words for a site (code, line) taken earlier; '<host>' for None."""
    if site is None:
        return "<host>"
    name = _SITE_NAMES.get(site)
    if name is None:
        code, line = site
        name = _SITE_NAMES[site] = f"{os.path.basename(code.co_filename)}:{line} ({code.co_name})"
    return name
