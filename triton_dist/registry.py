"""Which backends, device libraries and subcommands exist: found by name, never imported by name.

This is the one module of the core that names backend packages, and only as data: the
built-in entries below, used when the installed distribution's metadata cannot be read.
Everything else is found through entry points (the fsspec / pytest pattern), so a third
party adds a backend by declaring, in its own pyproject.toml,

    [project.entry-points."triton_dist.backends"]
    mybackend = "my_package.backend:MyBackend"        # a triton_dist.backend.Backend subclass

and optionally

    [project.entry-points."triton_dist.device_libraries"]
    my_devlib = "my_package.emit:emit"      # emits dl ops for kernels linking extern lib `my_devlib`

    [project.entry-points."triton_dist.subcommands"]
    mycmd = "my_package.cli:MYCMD"          # a triton_dist.cli.Subcommand

    [project.entry-points."triton_dist.launch_checks"]
    mycheck = "my_package.check:check"      # called with every kernel launch (triton_dist/kernel_launches.py)

The core never imports a backend package except through `load()` here.
"""
from __future__ import annotations

import importlib
from importlib import metadata

from .errors import TritonDistError

BACKENDS = "triton_dist.backends"
DEVICE_LIBRARIES = "triton_dist.device_libraries"
SUBCOMMANDS = "triton_dist.subcommands"
LAUNCH_CHECKS = "triton_dist.launch_checks"

# The backend of a session that asks for nothing in particular and detects no device, and
# the one whose behaviour the tests that take no `backend` fixture assert.
DEFAULT_BACKEND = "sim"

# Only a fallback for a source tree used without `pip install -e .` (no entry points
# registered); pyproject.toml declares the same entries, which take precedence.
_BUILTIN = {
    BACKENDS: {"sim": "triton_dist.sim.backend:SimBackend",
               "npu": "triton_dist.backend_ascend.runtime:NpuBackend",
               "cuda": "triton_dist.backend_cuda.runtime:CudaBackend"},
    DEVICE_LIBRARIES: {"triton_dist_cuda": "triton_dist.backend_cuda.emit:emit"},
    SUBCOMMANDS: {"run": "triton_dist.sim.cli:RUN", "explore": "triton_dist.sim.cli:EXPLORE", "replay": "triton_dist.sim.cli:REPLAY",
                  "predict": "triton_dist.sim.predict.cli:PREDICT", "lower": "triton_dist.backend_ascend.cli:LOWER",
                  "npu-compile": "triton_dist.backend_ascend.cli:NPU_COMPILE",
                  "compare": "triton_dist.compare_cli:COMPARE", "explore-merge": "triton_dist.seed_shards:MERGE"},
    LAUNCH_CHECKS: {"npu-compile": "triton_dist.backend_ascend.compile_check:check_launch",
                    "npu-lint": "triton_dist.backend_ascend.lint_check:check_launch"},
}

_cache: dict = {}
_loaded: dict = {}


def refresh() -> None:
    """Forget what was found (after installing a distribution in this process, in tests)."""
    _cache.clear()
    _loaded.clear()


def entries(group: str) -> dict:
    """name -> 'module:attribute' for every entry of `group`, built-ins first, then entry points."""
    if group not in _cache:
        found = dict(_BUILTIN.get(group, {}))
        try:
            eps = metadata.entry_points(group=group)
        except Exception:  # noqa: BLE001 - unreadable metadata: the built-ins still work
            eps = ()
        for ep in eps:
            found[ep.name] = ep.value
        _cache[group] = found
    return _cache[group]


def load(group: str, name: str):
    """The object entry `name` of `group` points at (imported on first use)."""
    key = (group, name)
    if key not in _loaded:
        target = entries(group).get(name)
        if target is None:
            raise TritonDistError(f"no {group} entry named {name!r}; known: {', '.join(sorted(entries(group)))}")
        module, _, attr = target.partition(":")
        try:
            obj = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except ImportError as e:
            raise TritonDistError(f"{group} entry {name!r} ({target}) cannot be imported: {e}") from e
        except AttributeError as e:
            raise TritonDistError(f"{group} entry {name!r} points at {target}, which does not exist: {e}") from e
        _loaded[key] = obj
    return _loaded[key]


def backend_names() -> list:
    return list(entries(BACKENDS))


def backend_class(name: str):
    """The Backend subclass registered as `name`."""
    if name not in entries(BACKENDS):
        raise TritonDistError(f"unknown backend {name!r}; known: {', '.join(backend_names())} (or 'auto')")
    return load(BACKENDS, name)


def device_library_emitter(lib_name: str):
    """The compiled-mode emitter of the device library `lib_name`, or None if none is registered."""
    if lib_name not in entries(DEVICE_LIBRARIES):
        return None
    return load(DEVICE_LIBRARIES, lib_name)


def launch_check(name: str):
    """The check registered as `name` (called with each kernel_launches.Launch)."""
    if name not in entries(LAUNCH_CHECKS):
        raise TritonDistError(f"unknown launch check {name!r} (in TRITON_DIST_LAUNCH_CHECKS?); known: "
                              f"{', '.join(sorted(entries(LAUNCH_CHECKS))) or 'none'}")
    return load(LAUNCH_CHECKS, name)


def subcommands() -> list:
    """Every registered triton_dist.cli.Subcommand, in their `order`."""
    return sorted((load(SUBCOMMANDS, n) for n in entries(SUBCOMMANDS)), key=lambda c: (c.order, c.name))
