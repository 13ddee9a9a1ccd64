"""Kernel launches as one event stream: the simulator publishes each launch, checks subscribe.

    from triton_dist import kernel_launches
    kernel_launches.subscribe(lambda launch: print(launch.fn.__name__, launch.args))

`launched(fn, args, constexprs, grid)` is called by the simulator once per kernel launch, before
the grid runs, with the kernel's Python function, its bound arguments (name -> value, as the
caller passed them), the names of its tl.constexpr parameters and the launch grid (a callable
grid is called with the arguments, as Triton does; the Launch holds its tuple of ints).  An observer that raises
fails that launch (the error reaches the caller, as a kernel error would).

Besides observers subscribed in-process, named checks are switched on per process: by
`checks([...])` around a launch (triton_dist.launch(..., npu_compile=True); forked ranks inherit
it) or by TRITON_DIST_LAUNCH_CHECKS=name[,name] (pytest --npu-compile sets it, so subprocesses
and pytest-xdist workers inherit it).  A named check is found through the registry
(entry-point group triton_dist.launch_checks: "npu-compile" is backend_ascend's), so the
simulator that publishes never imports the backend that checks.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass

ENV = "TRITON_DIST_LAUNCH_CHECKS"

_observers: list = []
_requested: set = set()
# told when the named checks of a launch begin and end (the simulator keeps that time out of the
# launch timeout: a compile by the real NPU compilers is not the kernel running)
_check_time_listeners: list = []


@dataclass(frozen=True)
class Launch:
    fn: object            # the kernel's Python function
    args: dict            # parameter name -> value passed
    constexprs: tuple     # names of the tl.constexpr parameters
    grid: tuple | None = None   # the launch grid as ints (None: not known, e.g. a grid callable that failed)


def subscribe(observer):
    """Call observer(Launch) at every kernel launch of this process; returns it (to unsubscribe)."""
    _observers.append(observer)
    return observer


def unsubscribe(observer) -> None:
    if observer in _observers:
        _observers.remove(observer)


def on_checks(listener):
    """Call listener(True) before the named checks of each launch of this process run, and
    listener(False) after them."""
    _check_time_listeners.append(listener)
    return listener


@contextmanager
def checks(names):
    """Named checks switched on for the launches inside (and in ranks forked inside)."""
    added = [n for n in names if n not in _requested]
    _requested.update(added)
    try:
        yield
    finally:
        _requested.difference_update(added)


def requested() -> list:
    env = [n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()]
    return sorted(set(env) | _requested)


def grid_of(grid, args):
    """The grid as a tuple of ints: a callable one is called with the arguments (Triton's meta dict);
    None where it cannot be read (the launch itself then reports the problem, not its observers)."""
    try:
        g = grid(dict(args)) if callable(grid) else grid
        if g is None:
            return None
        g = tuple(g) if isinstance(g, (tuple, list)) else (g,)
        return tuple(int(getattr(d, "value", d)) for d in g)
    except Exception:  # noqa: BLE001 - the simulator's own grid handling reports a bad grid
        return None


def launched(fn, args, constexprs, grid=None) -> None:
    """Publish one launch (the simulator's grid executor calls this)."""
    names = requested()
    if not names and not _observers:
        return
    launch = Launch(fn, dict(args), tuple(constexprs), grid_of(grid, args))
    if names:
        from . import registry
        for listener in list(_check_time_listeners):
            listener(True)
        try:
            for name in names:
                try:
                    registry.launch_check(name)(launch)
                except Exception as e:
                    # which check refused the launch (the kernel never ran): the simulator's autotuner
                    # goes on with the other configs and reports every refused one (sim/autotune.py)
                    e.launch_check = name
                    raise
        finally:
            for listener in list(_check_time_listeners):
                listener(False)
    for observer in list(_observers):
        observer(launch)
