"""The on-disk cache of NPU compile verdicts: one JSON file per (kernel source, signature,
constexprs, target, options, tools, pipeline code), shared by every process and kept between
sessions.  A per-key file lock makes concurrent processes (ranks, pytest-xdist workers) compile
a kernel once: the first compiles, the others wait and read its verdict.

Where: $TRITON_DIST_NPU_COMPILE_CACHE, else $XDG_CACHE_HOME/triton_dist/npu-compile, else
~/.cache/triton_dist/npu-compile.  Deleting the directory is always safe.

A directory that cannot be made or written (a read-only HOME, a path under a file) is found
before anything is compiled (`problem()`); callers compile without the cache, saying so, and
never take the failure for a verdict.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager

from triton_dist.errors import TritonDistError

ENV = "TRITON_DIST_NPU_COMPILE_CACHE"


def default_dir() -> str:
    env = os.environ.get(ENV, "").strip()
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "triton_dist", "npu-compile")


class CacheUnavailable(TritonDistError):
    """The verdict cache's directory cannot be made or written (the message says where and what to do)."""


_problems: dict = {}        # root -> the reason it cannot be used ("" when it can), once per process


class Cache:
    def __init__(self, root: str | None = None):
        self.root = os.path.abspath(root or default_dir())

    def problem(self) -> str:
        """Why this cache cannot be used here (empty: it can): made and written once, the answer kept."""
        if self.root not in _problems:
            try:
                os.makedirs(self.root, exist_ok=True)
                fd, probe = tempfile.mkstemp(dir=self.root, prefix=".probe-")
                os.close(fd)
                os.unlink(probe)
                _problems[self.root] = ""
            except OSError as e:
                _problems[self.root] = (f"the NPU compile verdict cache {self.root} cannot be used "
                                        f"({e.strerror or e}); set {ENV} to a writable directory")
        return _problems[self.root]

    def _path(self, key, ext):
        return os.path.join(self.root, key[:2], f"{key}.{ext}")

    def get(self, key, decode):
        """decode(the stored JSON) for this key, or None when it is absent or unreadable.  The caller
        hands in its reader (pipeline.Outcome.from_json): the cache stores JSON and imports nothing
        of what it holds (the pipeline imports the cache)."""
        try:
            with open(self._path(key, "json")) as f:
                return decode(json.load(f))
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
