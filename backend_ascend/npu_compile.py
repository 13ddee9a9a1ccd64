"""Device side of the NPU path: ConvertTritonDistributedToHIVM inside triton-ascend's compiler.

On an NPU, kernels are compiled by triton-ascend.  Its frontend is Triton's, so the dl /
libshmem_device calls arrive in the TTIR as the carriers of triton_dist/language/_emit.py.
install() wraps triton-ascend's `ttadapter` stage (TTIR -> Linalg) so that, first thing,
the same lowering `backend_ascend.lower` runs on a CPU turns every carrier into its
`hivm.hir.custom` op, with the module-wide facts (the core type depends on whether the
module holds a dot; gm_addr_args_indices on the enclosing function's arguments) fixed
there, where the whole module is visible.

What triton-ascend must be able to do for that (checked by triton_ascend_problems(), which
backend 'npu' runs before anything else; docs/ascend.md says how to get each):
- its frontend passes `_semantic=` to builtins (Triton >= 3.3; the 3.2.0 wheel on PyPI
  passes `_builder=`);
- it has the hivm.hir.custom support of its main line (triton.language.extra.cann.extension:
  custom, register_custom_op; the Linalg conversion of custom ops);
- the stage hook takes effect: the AscendBackend class Triton's backend discovery returns
  is the one patched here (the 3.2.0 wheel loads its compiler module under the bare name
  "ascend", so `triton.backends.ascend.compiler.AscendBackend` is another class);
- likely needed beyond its main line (Triton-distributed carries a patch): converting
  custom ops that return values without `outs`, pointers produced by custom ops, and a
  driver that accepts pointers into the shmem heap.  What can be read without running a
  kernel is checked; the rest is named in the error a failing ttadapter stage gives.

The aclshmem wrappers (`_mlir_ciface_aclshmem_*`) are AscendNPU-IR's template library
bishengir/lib/Template/lib/Shmem/Shmem.cpp, compiled per core type (aiv, aic, mix.aiv,
mix.aic) and architecture (c220: Atlas A2/A3; c310) only when AscendNPU-IR is built with
--build-shmem-template.  bitcode_for_kernels() says which bitcode each op links:
- TRITON_DIST_ACLSHMEM_BITCODE = a directory of that build's Shmem.<variant>.<arch>.bc:
  each op gets the variant of its kernel's core type (bitcode_selector);
- TRITON_DIST_ACLSHMEM_BITCODE = one .bc file: every op links it;
- unset: the bishengir-compile on this machine must carry the wrappers in its own template
  library (meta_op.<variant>.<arch>.bc, linked per core type by bishengir itself), else
  the compile is refused with the instructions (scripts/aclshmem_bitcode.sh builds or
  finds them).  hicann/shmem's own device bitcode has no _mlir_ciface_* wrappers.

Nothing here is imported before an NPU backend is created.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import tempfile

from triton_dist import symbols as S
from triton_dist.errors import TritonDistError

BITCODE_ENV = "TRITON_DIST_ACLSHMEM_BITCODE"
ARCH_ENV = "TRITON_DIST_ACLSHMEM_ARCH"
ARCHS = {"c220": "Atlas A2/A3 (Ascend910B)", "c310": "Ascend910D"}
DEFAULT_ARCH = "c220"
# AscendNPU-IR bishengir/lib/Template/CMakeLists.txt, compile_shmem_to_bc: Shmem.cpp ->
# Shmem.<aic|aiv|mix.aic|mix.aiv>.<c220|c310>.bc; link_all_to_meta_op merges them into
# lib/meta_op.<variant>.<arch>.bc.
SHMEM_BITCODE = "Shmem.{variant}.{arch}.bc"
TEMPLATE_BITCODE = "meta_op.{variant}.{arch}.bc"
WRAPPER_PROBE = b"_mlir_ciface_aclshmem_my_pe"
SCRIPT = "scripts/aclshmem_bitcode.sh"
INSTALL_HINT = ("install triton-ascend built from its main line (github.com/Ascend/triton-ascend, 3.5.x) with "
                "Triton-distributed's patch for the distributed ops; see docs/ascend.md")


# --- the aclshmem wrapper bitcode -------------------------------------------------------------------
def variant(core_type: str, has_dot: bool) -> str:
    """The wrapper variant an op links: `aiv` in a vector-only kernel; in a mix kernel (the
    module holds a dot) `mix.aiv` for VECTOR ops and `mix.aic` for CUBE_AND_VECTOR ones."""
    if not has_dot:
        return "aiv"
    return "mix.aiv" if core_type == S.VECTOR else "mix.aic"


def arch_from_env(value: str | None = None) -> str:
    arch = (value if value is not None else os.environ.get(ARCH_ENV, "")).strip() or DEFAULT_ARCH
    if arch not in ARCHS:
        raise TritonDistError(f"{ARCH_ENV} must be one of {', '.join(f'{k} ({v})' for k, v in ARCHS.items())}, "
                              f"got {arch!r}")
    return arch


def _missing_message(what: str, arch: str) -> str:
    return (f"{what}.  Kernels using dl.* / libshmem_device.* call the _mlir_ciface_aclshmem_* wrappers of "
            f"AscendNPU-IR (bishengir/lib/Template/lib/Shmem/Shmem.cpp), which exist only in a build with "
            f"--build-shmem-template, per core type: Shmem.aiv.{arch}.bc, Shmem.mix.aiv.{arch}.bc, "
            f"Shmem.mix.aic.{arch}.bc.  `bash {SCRIPT} build` builds them (needs CANN) and `bash {SCRIPT} find DIR` "
            f"looks for them; then set {BITCODE_ENV} to the directory holding them (or use a bishengir-compile "
            f"built with --build-shmem-template, whose template library carries them).  The device bitcode of "
            f"hicann/shmem has no _mlir_ciface_* wrappers and does not link.")


def bitcode_selector(path: str, arch: str | None = None, check: bool = True):
    """What `hivm.convert_text(bitcode=...)` takes for TRITON_DIST_ACLSHMEM_BITCODE=path: the
    file itself, or for a directory a function (core type, module has a dot) -> the
    Shmem.<variant>.<arch>.bc of that directory.  check: refuse missing files."""
    arch = arch_from_env(arch)
    if os.path.isfile(path):
        return os.path.abspath(path)
    if check and not os.path.isdir(path):
        raise TritonDistError(_missing_message(f"{BITCODE_ENV}={path}: no such file or directory", arch))
    root = os.path.abspath(path)

    def select(core_type, has_dot):
        f = os.path.join(root, SHMEM_BITCODE.format(variant=variant(core_type, has_dot), arch=arch))
        if check and not os.path.isfile(f):
            raise TritonDistError(_missing_message(
                f"{BITCODE_ENV}={path} has no {os.path.basename(f)} (the {variant(core_type, has_dot)} variant a "
                f"{core_type} op of a {'mix' if has_dot else 'vector-only'} kernel links)", arch))
        return f

    return select


def template_library_dirs() -> list:
    """Directories of the template bitcode (meta_op.*.bc) of the bishengir-compile here."""
    dirs = []
    exe = shutil.which("bishengir-compile")
    if exe:
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(exe))), "lib"))
    try:
        spec = importlib.util.find_spec("ascendnpuir")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        dirs.append(os.path.join(os.path.dirname(spec.origin), "lib"))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def has_wrappers(bitcode_file: str) -> bool:
    """Does this bitcode define the aclshmem wrappers?  (Symbol names are stored verbatim in
    a bitcode file's string table.)"""
    try:
        with open(bitcode_file, "rb") as f:
            return WRAPPER_PROBE in f.read()
    except OSError:
        return False


def bitcode_for_kernels(arch: str | None = None):
    """The `bitcode` argument of convert_text for kernels compiled here; None when the
    local bishengir-compile links the wrappers from its own template library."""
    arch = arch_from_env(arch)
    path = os.environ.get(BITCODE_ENV, "").strip()
    if path:
        return bitcode_selector(path, arch)
    dirs = template_library_dirs()
    if any(has_wrappers(os.path.join(d, TEMPLATE_BITCODE.format(variant="aiv", arch=arch))) for d in dirs):
        return None
    where = ", ".join(dirs) or "no bishengir-compile found on PATH"
    raise TritonDistError(_missing_message(
        f"{BITCODE_ENV} is not set and the template library of bishengir-compile ({where}) has no aclshmem "
        f"wrappers", arch))


# --- triton-ascend's capabilities -----------------------------------------------------------------------
def _triton_dir():
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def triton_ascend_version():
    try:
        from importlib.metadata import version
        return version("triton-ascend")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a source build)
        return None


_DRIVER_CHECK = re.compile(r"location\.type\s*!=\s*ACL_MEM_LOCATION_TYPE_DEVICE")


def triton_ascend_problems() -> list:
    """What the triton-ascend of this environment lacks for distributed kernels (empty: nothing
    known).  Reads its files; imports nothing but triton.language (when triton-ascend is there)."""
    root = _triton_dir()
    if root is None or not os.path.isdir(os.path.join(root, "backends", "ascend")):
        return [f"triton-ascend (triton.backends.ascend is not installed; {INSTALL_HINT})"]
    version = triton_ascend_version() or "(source build)"
    problems = []
    import triton.language as tl
    params = inspect.signature(tl.program_id).parameters
    if "_semantic" not in params:
        problems.append(
            f"a triton-ascend whose frontend passes `_semantic=` to builtins: triton-ascend {version} passes "
            f"`{'_builder' if '_builder' in params else next(iter(params), '?')}=` (the Triton 3.2 API), so every "
            f"dl.* call fails with TypeError(\"rank() got an unexpected keyword argument '_builder'\"); "
            f"{INSTALL_HINT}")
    ext = _read(os.path.join(root, "language", "extra", "cann", "extension", "__init__.py"))
    if ext is None or "register_custom_op" not in ext:
        problems.append(
            f"a triton-ascend with hivm.hir.custom support (triton.language.extra.cann.extension with custom / "
            f"register_custom_op): triton-ascend {version} has none, and the distributed ops lower to "
            f"hivm.hir.custom; {INSTALL_HINT}")
    driver = _read(os.path.join(root, "backends", "ascend", "driver.py"))
    if driver is not None and _DRIVER_CHECK.search(driver):
        problems.append(
            "a triton-ascend driver that accepts pointers into the shmem heap: its driver.py refuses kernel "
            "arguments whose aclrtPointerGetAttributes location is not ACL_MEM_LOCATION_TYPE_DEVICE; apply the "
            "driver.py hunk of Triton-distributed's 3rdparty/triton-ascend.patch (docs/ascend.md)")
    return problems


# --- the ttadapter pre-step ------------------------------------------------------------------------------
def lower_module(module, bitcode=None):
    """The ttadapter pre-step: a module whose distributed carriers became hivm.hir.custom ops.

    The text is parsed back in the module's own context, where triton-ascend has loaded
    the HIVM dialect.  A module without distributed ops is returned as it is.
    bitcode: as convert_text takes it; by default bitcode_for_kernels().
    """
    from triton._C.libtriton import ir

    from .hivm import LoweringError, convert_text, module_facts
    has_dot, count = module_facts(module)
    if count == 0:
        return module
    if bitcode is None:
        bitcode = bitcode_for_kernels()
    text, n = convert_text(str(module), has_dot=has_dot, bitcode=bitcode)
    if n != count:
        raise LoweringError(f"the module holds {count} distributed ops but {n} were lowered; this is a bug in "
                            f"backend_ascend.hivm")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.dist.ttir.mlir")
        with open(path, "w") as f:
            f.write(text)
        lowered = ir.parse_mlir_module(path, module.context)
    lowered.context = module.context
    return lowered


TTADAPTER_LIMITS = (
    "triton-ascend's ttadapter stage failed on a kernel with distributed ops.  Known limits of triton-ascend "
    "without Triton-distributed's patch: its TritonToLinalg CustomOpConverter takes a custom op's result types "
    "from `outs` only, so ops that return a value without outs (dl.wait, dl.symm_at, dl.consume_token of a "
    "scalar, signal_wait_until, my_pe) cannot be converted, and its pointer analysis aborts on a pointer produced "
    "by a custom op (dl.symm_at, remote_ptr); " + INSTALL_HINT)


def _ttadapter_with_lowering(ttadapter):
    def stage(src, metadata):
        lowered = lower_module(src)
        if lowered is src:
            return ttadapter(src, metadata)
        try:
            return ttadapter(lowered, metadata)
        except Exception as e:  # noqa: BLE001 - re-raised with what to do
            raise TritonDistError(f"{TTADAPTER_LIMITS}.  The error: {type(e).__name__}: {e}") from e
    return stage


def _patch(cls):
    if getattr(cls, "_triton_dist_lowering", False):
        return
    original = cls.add_stages

    def add_stages(self, stages, options, *args, **kwargs):
        original(self, stages, options, *args, **kwargs)
        if "ttadapter" in stages:
            stages["ttadapter"] = _ttadapter_with_lowering(stages["ttadapter"])

    cls.add_stages = add_stages
    cls._triton_dist_lowering = True


def install() -> None:
    """Make triton-ascend run the distributed lowering at the start of its ttadapter stage.

    Patches the AscendBackend that Triton's backend discovery returns (the class compiles
    use) and the importable one, then checks that the hook is on the class compiles use."""
    problems = triton_ascend_problems()
    if problems:
        raise TritonDistError("backend 'npu' needs " + "; ".join(problems))
    from triton.backends import backends
    entry = backends.get("ascend")
    if entry is None:
        raise TritonDistError(f"Triton's backend discovery found no 'ascend' backend (found: "
                              f"{', '.join(backends) or 'none'}); {INSTALL_HINT}")
    classes = [entry.compiler]
    try:
        from triton.backends.ascend.compiler import AscendBackend
        if AscendBackend not in classes:
            classes.append(AscendBackend)
    except ImportError:
        pass
    for cls in classes:
        _patch(cls)
    if not getattr(backends["ascend"].compiler, "_triton_dist_lowering", False):
        raise TritonDistError("the distributed lowering could not be hooked into the ttadapter stage of the "
                              "AscendBackend Triton compiles with; " + INSTALL_HINT)
