"""The two real compilers of the NPU pipeline, found (or fetched) on any machine.

- `triton-adapter-opt`: triton-ascend's ttadapter stage (TTIR -> Linalg/HIVM).  On a CPU it
  comes out of the PyPI wheel triton-ascend==3.2.0 (`triton/backends/ascend/triton-adapter-opt`),
  taken with `pip download --no-deps` and unzipped into a cache inside this environment
  (`fetch_adapter`, run by scripts/setup.sh).  The wheel is never installed: it would replace
  stock triton's `triton/` package.  The file's sha256 is pinned below and checked.
- `bishengir-compile`: AscendNPU-IR's BiShengHIR pipeline.  On a CPU it is in the `ascendnpuir`
  package (PyPI ascendnpu-ir==1.2.0, the `test` extra).
- and, from the same wheel, triton-ascend's `triton/_C/libtriton.so` (`fetch_libtriton`, sha256
  pinned too), in which ascend_ttir.py runs the `ttir` passes of kernels stock Triton refuses.

On an NPU host the installed triton-ascend's own adapter and CANN's bishengir-compile (on PATH)
are used instead; TRITON_DIST_TRITON_ADAPTER_OPT / TRITON_DIST_BISHENGIR_COMPILE name others.
`find()` says what is missing and why, so callers can skip or exit naming it.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass

ADAPTER_ENV = "TRITON_DIST_TRITON_ADAPTER_OPT"
COMPILER_ENV = "TRITON_DIST_BISHENGIR_COMPILE"

TRITON_ASCEND_VERSION = "3.2.0"
WHEEL_MEMBER = "triton/backends/ascend/triton-adapter-opt"
# sha256 of triton/backends/ascend/triton-adapter-opt in
# triton_ascend-3.2.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl (PyPI; the wheel's
# own sha256 is 17c8d7161eed1e96a286281963fe04d3113ee85affaa5d82c7dd0c35803962f0), measured when it
# was pinned.  Its compiler.py is byte-identical to ascend/backend/compiler.py of
# triton-lang/triton-ascend at commit 8edbaaed2ad70ffae4beb033707d4d52dc15a9b1 (2026-01-07).
ADAPTER_SHA256 = "c7f72b8a8a55887b925b59631669c4321acc4d942d6d655cb52a7b07cfbb0f3b"
# The wheel is published for CPython 3.11 on x86_64 Linux only; the executable links no
# libpython, so any Python on x86_64 Linux can fetch and run it.
PIP_PLATFORM = ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp",
                "--abi", "cp311", "--only-binary=:all:"]


def cache_dir() -> str:
    """Where the adapter is kept: inside this environment (so a fresh venv fetches its own)."""
    return os.path.join(sys.prefix, "share", "triton_dist", f"triton-ascend-{TRITON_ASCEND_VERSION}")


def cached_adapter() -> str:
    return os.path.join(cache_dir(), "triton-adapter-opt")


@dataclass(frozen=True)
class Tools:
    adapter: str | None
    compiler: str | None
    adapter_why: str = ""
    compiler_why: str = ""
    adapter_from: str = ""        # "triton-ascend 3.2.0 wheel (cache)", "installed triton-ascend", "$ENV"
    compiler_from: str = ""

    @property
    def missing(self) -> list:
        """One line per tool that cannot be had, saying why and what to do."""
        out = []
        if self.adapter is None:
            out.append(f"triton-adapter-opt: {self.adapter_why}")
        if self.compiler is None:
            out.append(f"bishengir-compile: {self.compiler_why}")
        return out

    def digest(self) -> str:
        """What identifies the tools in a cache key: where each comes from, its real path, inode, size
        and modification time in ns (cheap: no 100 MB hash per process, and a replaced or rebuilt binary
        changes it), and for the wheel's adapter the pinned sha256 it was checked against."""
        parts = []
        for p, where in ((self.adapter, self.adapter_from), (self.compiler, self.compiler_from)):
            st = os.stat(p)
            pinned = ADAPTER_SHA256 if p == self.adapter and where.startswith("the triton-ascend") else ""
            parts.append(f"{where}:{os.path.realpath(p)}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{pinned}")
        return "|".join(parts)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _installed_triton_ascend_adapter():
    """The adapter of an installed triton-ascend (an NPU host), without importing triton."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "backends", "ascend", "triton-adapter-opt")
        if _executable(path):
            return path
    return None


@functools.lru_cache(maxsize=None)
def _verified(path: str, mtime: float, size: int) -> bool:
    return sha256(path) == ADAPTER_SHA256


def _from_env(var):
    """(path, why not, where from) of a tool named by an environment variable, or None if unset."""
    env = os.environ.get(var, "").strip()
    if not env:
        return None
    if _executable(env):
        return env, "", f"${var}"
    return None, f"{var}={env} is not an executable file", ""


def _find_adapter():
    named = _from_env(ADAPTER_ENV)
    if named:
        return named
    installed = _installed_triton_ascend_adapter()
    if installed:
        return installed, "", "the installed triton-ascend"
    path = cached_adapter()
    if not os.path.exists(path):
        # an environment layered over another one (scripts/triton_venv.sh: another stock triton over
        # .venv's site-packages) uses the adapter that environment fetched; it is checked the same way
        path = next((p for p in _layered_adapters() if os.path.exists(p)), path)
    if not os.path.exists(path):
        return None, (f"not in this environment's cache ({path}); `bash scripts/setup.sh` fetches it from the "
                      f"triton-ascend=={TRITON_ASCEND_VERSION} wheel (pip download, x86_64 Linux, needs PyPI), or "
                      f"run `{sys.executable} -m triton_dist.backend_ascend.toolchain fetch`"), ""
    st = os.stat(path)
    if not _verified(path, st.st_mtime, st.st_size):
        return None, (f"{path} does not have the pinned sha256 {ADAPTER_SHA256}; delete it and run "
                      f"`bash scripts/setup.sh` again"), ""
    return path, "", f"the triton-ascend {TRITON_ASCEND_VERSION} wheel (cached in {os.path.dirname(path)})"


def _layered_adapters(name: str = "triton-adapter-opt") -> list:
    """The caches' `name` (the adapter, or another file taken from the same wheel) of the environments
    whose site-packages are on sys.path besides this one's (<prefix>/lib/pythonX.Y/site-packages -> the
    same place as cache_dir() under <prefix>); none when the cache is not inside this environment (a
    cache_dir() pointed elsewhere)."""
    rel = os.path.relpath(cache_dir(), sys.prefix)
    if rel.startswith(os.pardir):
        return []
    out = []
    for entry in sys.path:
        parts = os.path.normpath(entry or ".").split(os.sep)
        if len(parts) > 3 and parts[-1] == "site-packages" and parts[-3] == "lib":
            prefix = os.sep.join(parts[:-3])
            if os.path.realpath(prefix) != os.path.realpath(sys.prefix):
                out.append(os.path.join(prefix, rel, name))
    return out


def _find_compiler():
    named = _from_env(COMPILER_ENV)
    if named:
        return named
    # CANN's (an NPU host: set_env.sh puts it on PATH), as triton-ascend's _get_npucompiler_path looks
    on_path = shutil.which("bishengir-compile")
    if on_path:
        return on_path, "", "PATH"
    try:
        spec = importlib.util.find_spec("ascendnpuir")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None, ("not on PATH and the ascendnpu-ir package is not installed: the test extra installs it "
                      "(ascendnpu-ir==1.2.0, published for CPython 3.11 on x86_64 Linux only; "
                      "pip install -e '.[sim,test]' there), or install CANN"), ""
    path = os.path.join(os.path.dirname(spec.origin), "bin", "bishengir-compile")
    if not _executable(path):
        return None, f"the ascendnpuir package has no executable {path}", ""
    return path, "", "the ascendnpu-ir package"


def find() -> Tools:
    """The tools of this machine (nothing is fetched here)."""
    adapter, awhy, afrom = _find_adapter()
    compiler, cwhy, cfrom = _find_compiler()
    return Tools(adapter, compiler, awhy, cwhy, afrom, cfrom)


# --- fetching the adapter (scripts/setup.sh) -------------------------------------------------------------
def _verified_copy(path: str, name: str, sha: str):
    """`path` if it holds the pinned file (a stale one is removed), else the environment's this one is
    layered over (scripts/triton_venv.sh) if that holds it, else None."""
    if os.path.exists(path):
        if sha256(path) == sha:
            return path
        os.unlink(path)
    return next((p for p in _layered_adapters(name) if os.path.exists(p) and sha256(p) == sha), None)


def _from_wheel(member: str, sha: str, path: str, executable: bool) -> tuple:
    """(path, "") once `member` of the pinned triton-ascend wheel is at `path` with the pinned sha256;
    (None, why not).  One download for whichever file is asked for (the adapter, libtriton)."""
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        return None, (f"triton-ascend's {os.path.basename(member)} is published for x86_64 Linux only "
                      f"(this is {sys.platform} {os.uname().machine})")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
               "-d", tmp, *PIP_PLATFORM, f"triton-ascend=={TRITON_ASCEND_VERSION}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if proc.returncode != 0 or not wheels:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
            return None, f"could not download triton-ascend=={TRITON_ASCEND_VERSION} ({tail[0]})"
        os.makedirs(cache_dir(), exist_ok=True)
        part = f"{path}.{os.getpid()}.part"          # concurrent setups never write one file
        with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z:
            try:
                src = z.open(member)
            except KeyError:
                return None, f"{wheels[0]} has no {member}"
            with src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)    # libtriton is ~500 MB: never whole in memory
        if sha256(part) != sha:
            os.unlink(part)
            return None, f"{member} of {wheels[0]} does not have the pinned sha256 {sha}; not used"
        if executable:
            os.chmod(part, os.stat(part).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.replace(part, path)
    return path, ""


def fetch_adapter(quiet: bool = False) -> tuple:
    """(path or None, message).  Cheap when the cached file is there and verified."""
    have = _verified_copy(cached_adapter(), "triton-adapter-opt", ADAPTER_SHA256)
    if have:
        return have, f"triton-adapter-opt {TRITON_ASCEND_VERSION} is cached and verified ({have})"
    path, why = _from_wheel(WHEEL_MEMBER, ADAPTER_SHA256, cached_adapter(), executable=True)
    if path is None:
        return None, f"{why}; the NPU compile checks will skip" + (" (offline?)" if why.startswith("could not") else "")
    return path, f"triton-adapter-opt {TRITON_ASCEND_VERSION} fetched and verified ({path})"


# --- triton-ascend's libtriton, from the same wheel (ascend_ttir.py runs the `ttir` passes in it) ---------
LIBTRITON_MEMBER = "triton/_C/libtriton.so"
# sha256 of triton/_C/libtriton.so in the triton-ascend 3.2.0 wheel named above (measured 2026-12-02
# from the PyPI wheel whose adapter has ADAPTER_SHA256)
LIBTRITON_SHA256 = "f5aa787eac8dc227d6485dcbed908047bf553a406eb7f2b250a4f7bffa8a6442"


def cached_libtriton() -> str:
    return os.path.join(cache_dir(), "libtriton.so")


def fetch_libtriton() -> tuple:
    """(path, "") of the verified file, fetched once into the cache; (None, why not) when it cannot be
    had.  Here, beside fetch_adapter, so that `fetch` below takes both without importing ascend_ttir
    (which imports this module)."""
    have = _verified_copy(cached_libtriton(), "libtriton.so", LIBTRITON_SHA256)
    if have:
        return have, ""
    return _from_wheel(LIBTRITON_MEMBER, LIBTRITON_SHA256, cached_libtriton(), executable=False)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["fetch"]:
        path, message = fetch_adapter()
        print(f"[setup] {message}")
        # triton-ascend's libtriton (the TTIR passes of non-power-of-two kernels, ascend_ttir.py): taken
        # now, once, rather than by the first compile of each test process
        lib, why = fetch_libtriton()
        if lib:
            print(f"[setup] triton-ascend's libtriton is cached and verified ({lib})")
        else:
            print(f"[setup] {why}; non-power-of-two kernels will not compile here")
        return 0           # a machine without the tool still sets up; the checks skip saying why
    if args == ["find"]:
        tools = find()
        for name, path, where in (("triton-adapter-opt", tools.adapter, tools.adapter_from),
                                  ("bishengir-compile", tools.compiler, tools.compiler_from)):
            print(f"{name}: {path} (from {where})" if path else f"{name}: missing")
        for line in tools.missing:
            print(f"  {line}")
        return 0 if not tools.missing else 2
    print("usage: python -m triton_dist.backend_ascend.toolchain fetch|find", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
