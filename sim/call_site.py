"""Where the user's code called into the simulator: the innermost frame outside sim/ and
triton_dist/, for the messages that name a call site ('script.py:12').  Here, below the
backend, so that the host-side modules (host_p2p, the backend itself) share it without the
lower ones importing sim/backend.py (docs/index.md "Layers")."""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = os.path.join(os.path.dirname(_HERE), "triton_dist")


def user_frame():
    """The innermost frame outside the simulator and triton_dist: the user's call."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(_HERE) or f.f_code.co_filename.startswith(_PKG)):
        f = f.f_back
    return f


def caller() -> str:
    """'file.py:line' of the user's call, '<unknown>' when every frame is the simulator's."""
    f = user_frame()
    return "<unknown>" if f is None else f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
