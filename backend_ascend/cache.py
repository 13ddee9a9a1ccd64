"""The on-disk cache of NPU compile verdicts: one JSON file per (kernel source, signature,
constexprs, target, options, tools, pipeline code), shared by every process and kept between
sessions.  A per-key file lock makes concurrent processes (ranks, pytest-xdist workers) compile
a kernel once: the first compiles, the others wait and read its verdict.

Where: $TRITON_DIST_NPU_COMPILE_CACHE, else $XDG_CACHE_HOME/triton_dist/npu-compile, else
~/.cache/triton_dist/npu-compile.  Deleting the directory is always safe.
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager

ENV = "TRITON_DIST_NPU_COMPILE_CACHE"


def default_dir() -> str:
    env = os.environ.get(ENV, "").strip()
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "triton_dist", "npu-compile")


class Cache:
    def __init__(self, root: str | None = None):
        self.root = root or default_dir()

    def _path(self, key, ext):
        return os.path.join(self.root, key[:2], f"{key}.{ext}")

    def get(self, key):
        from .pipeline import Outcome
        try:
            with open(self._path(key, "json")) as f:
                return Outcome.from_json(json.load(f))
        except (OSError, ValueError, TypeError):
            return None

    def put(self, key, outcome) -> None:
        path = self._path(key, "json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        part = f"{path}.{os.getpid()}.part"
        with open(part, "w") as f:
            json.dump(outcome.to_json(), f, indent=1, sort_keys=True)
        os.replace(part, path)

    @contextmanager
    def lock(self, key):
        path = self._path(key, "lock")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
