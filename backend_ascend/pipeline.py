"""The NPU compile pipeline on any machine: TTIR -> triton-adapter-opt -> bishengir-compile, stop at hivmc.

    outcome = compile_kernel(kernel, {"x": "*fp32", "n": "i32"}, {"BLOCK": 1024})
    outcome.status        # "accepted" | "refused"
    outcome.symbols       # the aclshmem wrappers it calls, e.g. ["aclshmem_wait_int32"]

The stages, each the real tool with triton-ascend 3.2.0's own arguments (its
triton/backends/ascend/compiler.py, byte-identical to ascend/backend/compiler.py of
triton-lang/triton-ascend at commit 8edbaaed2ad70ffae4beb033707d4d52dc15a9b1):
1. TTIR: Triton's frontend and triton-ascend's `make_ttir` passes (frontend.build_ttir, the
   TTIR `triton-dist lower` starts from), distributed ops carried through the next stage by
   carry.py (the 3.2.0 adapter cannot parse hivm.hir.custom).
2. ttadapter: `triton-adapter-opt` with the pass list of `ttir_to_linalg` (compiler.py:109-131),
   with the options add_stages gives on an NPU (`named_ops=True`, compiler.py:767-769) and the
   NPUOptions defaults (compiler.py:581-611: compile_on_910_95=False, enable_nd2nz_on_vector=False,
   enable_select_analysis=False, force_simt_template=False; no --triton-linearize, and no
   --mlir-print-debuginfo as TRITON_DISABLE_LINE_INFO defaults to true, utils.py:231-232).
   Then the distributed ops become hivm.hir.custom again, and `, mix_mode = "..."` is removed
   as `_parse_linalg_metadata` does (compiler.py:289, 305).
3. bishengir-compile with the flags of `linalg_to_bin_enable_npu_compile_A2_A3`
   (compiler.py:443-548) for the NPUOptions defaults: --target, --enable-auto-multi-buffer=True,
   --enable-auto-bind-sub-block=True (compiler.py:593-594), then --enable-hfusion-compile=true,
   --enable-hivm-compile=true (no `reg-based` in this compiler's --help, utils.py:194-216),
   --enable-triton-kernel-compile=true (compiler.py:538-543).  triton-ascend 3.2.0 takes this
   A2/A3 path for every target (`is_compile_on_910_95 = False`, compiler.py:63).
   The whole BiShengHIR pipeline runs (HFusion, HIVM, PlanMemory and its UB check, the sync
   solver) and ends calling `hivmc`, the device code generator, which ships with CANN only:
   "Cannot find hivmc" is the expected end on a CPU.  The IR after convert-hivm-to-std
   (--mlir-print-ir-after) is the module hivmc would get; its external aclshmem calls are
   checked against the wrapper library (wrappers.py).
Where hivmc is there (an NPU host with CANN), the compile simply completes.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field

from triton_dist.errors import TritonDistError

from . import toolchain

DEFAULT_TARGET = "Ascend910B4"
STOP_PASS = "convert-hivm-to-std"
HIVMC_MISSING = "Cannot find hivmc"

# ttir_to_linalg (compiler.py:109-131) with the NPU defaults named above.
ADAPTER_PASSES = (
    "--discrete-mask-access-conversion=compile-on-910-95=False force-simt-template=False",
    "--triton-to-annotation",
    "--triton-to-unstructure=compile-on-910-95=False force-simt-template=False",
    "--triton-to-hivm",
    "--triton-to-hfusion",
    "--triton-to-llvm",
    "--bubble-up-operation",
    "--triton-to-linalg=global-kernel=false named-ops=True enable-nd2nz-on-vector=False "
    "enable-select-analysis=False compile-on-910-95=False",
)

# NPUOptions fields that linalg_to_bin_enable_npu_compile_A2_A3 turns into flags (compiler.py:462-533),
# with their defaults (None: no flag).
OPTION_FLAGS = {
    "multibuffer": ("--enable-auto-multi-buffer", True),
    "enable_auto_bind_sub_block": ("--enable-auto-bind-sub-block", True),
    "enable_hivm_auto_cv_balance": ("--enable-hivm-auto-cv-balance", None),
    "sync_solver": ("--enable-hivm-graph-sync-solver", None),
    "unit_flag": ("--enable-hivm-unit-flag-sync", None),
    "inject_barrier_all": ("--enable-hivm-inject-barrier-all-sync", None),
    "inject_block_all": ("--enable-hivm-inject-block-all-sync", None),
    "limit_auto_multi_buffer_only_for_local_buffer": ("--limit-auto-multi-buffer-only-for-local-buffer", None),
    "set_workspace_multibuffer": ("--set-workspace-multibuffer", None),
    "tile_mix_vector_loop": ("--tile-mix-vector-loop", None),
    "tile_mix_cube_loop": ("--tile-mix-cube-loop", None),
    "limit_auto_multi_buffer_of_local_buffer": ("--limit-auto-multi-buffer-of-local-buffer", None),
    "disable_auto_inject_block_sync": ("--disable-auto-inject-block-sync", None),
}
TAIL_FLAGS = ("--enable-hfusion-compile=true", "--enable-hivm-compile=true", "--enable-triton-kernel-compile=true")

TIMEOUT_S = 600


class ToolsMissing(TritonDistError):
    """The adapter or the compiler is not on this machine (the message names which and why)."""


class UsageError(TritonDistError):
    """An argument, a path, a target or a cache that is wrong: no verdict on the kernel (exit 2; one
    line saying what to do).  Only the compilers' own refusal of the kernel is a refusal."""


# bishengir-compile's complaints about its command line (LLVM's cl parser), not about the kernel
_CMDLINE_ERROR = re.compile(r"for the --[\w-]+ option:|Unknown command line argument|Failed to open input file")


@functools.lru_cache(maxsize=None)
def known_targets(compiler: str) -> tuple:
    """The --target values this bishengir-compile takes, from its own --help (empty when it lists none)."""
    try:
        out = subprocess.run([compiler, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    targets, inside = [], False
    for line in out.splitlines():
        if re.match(r"\s*--target=<value>", line):
            inside = True
            continue
        m = re.match(r"\s*=([\w.-]+)\s+-", line)
        if inside and m:
            targets.append(m.group(1))
        elif inside:
            break
    return tuple(targets)


def targets_of(text) -> list:
    """A --target value or TRITON_DIST_NPU_COMPILE_TARGET as a list: one target, or a comma list of them
    (compiled one after the other), empty parts and repeats dropped."""
    out = [t.strip() for t in str(text or "").split(",") if t.strip()]
    return list(dict.fromkeys(out)) or [DEFAULT_TARGET]


def _compiler_says(compiler: str, target) -> str:
    """bishengir-compile's own complaint about --target=<target> (its command-line parser's line)."""
    try:
        proc = subprocess.run([compiler, f"--target={target}", "--version"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((line.strip() for line in (proc.stderr + proc.stdout).splitlines()
                 if "--target option" in line), "")


def check_target(target, tools) -> None:
    """A target bishengir-compile does not know is the caller's mistake, never the kernel's refusal (exit 2,
    nothing compiled or cached): the message is the compiler's own line, then the targets it takes."""
    import difflib
    if target == DEFAULT_TARGET:        # in every bishengir-compile's list (1.2.0's --help; CANN's): no --help run
        return
    known = known_targets(tools.compiler)
    if not known or target in known:
        return
    close = difflib.get_close_matches(target, known, n=3, cutoff=0.6)
    close += [t for t in known if t.lower() == str(target).lower() and t not in close]
    hint = f" (did you mean {' or '.join(dict.fromkeys(close))}?)" if close else ""
    says = _compiler_says(tools.compiler, target)
    raise UsageError(f"unknown NPU target {target!r}{hint}: " + (f"{says}; " if says else "") +
                     f"{tools.compiler} takes --target {', '.join(known)} (default {DEFAULT_TARGET}; "
                     f"`triton-dist npu-compile --target list` shows each with its Unified Buffer); give one "
                     f"of these (or a comma list) with --target, pytest --npu-compile-targets or "
                     f"TRITON_DIST_NPU_COMPILE_TARGET")


def keep_dir(keep):
    """--keep DIR as an absolute directory (bishengir-compile runs inside it, so a relative path would be
    looked up again below itself); a path that exists and is not a directory is refused."""
    if keep is None:
        return None
    path = os.path.abspath(os.fspath(keep))
    if os.path.exists(path) and not os.path.isdir(path):
        where = "" if path == os.fspath(keep) else f" ({path})"
        raise UsageError(f"--keep {keep}{where} exists and is not a directory; name a directory to keep the "
                         f"stages in (it is created if missing)")
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"--keep {keep}: cannot write there ({e.strerror or e}); name a writable directory") \
            from None
    return path


@dataclass
class Outcome:
    kernel: str
    signature: dict
    constexprs: dict
    target: str
    status: str                        # "accepted" or "refused"
    stage: str = ""                    # how far the kernel got
    failed_at: str = ""                # "ttadapter" or "bishengir-compile" when refused
    errors: list = field(default_factory=list)      # the compiler's own error lines
    symbols: list = field(default_factory=list)     # aclshmem wrappers called (bare names)
    call_problems: list = field(default_factory=list)
    call_notes: list = field(default_factory=list)
    hint: str = ""                     # what to do (UB overflow)
    seconds: dict = field(default_factory=dict)     # per stage
    cached: bool = False
    key: str = ""                      # the cache key (empty when compiled without a cache)

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"

    def signature_text(self) -> str:
        sig = ",".join(f"{k}={v}" for k, v in self.signature.items())
        cx = ",".join(f"{k}={v}" for k, v in self.constexprs.items())
        return f"--signature {sig or '-'}" + (f" --constexpr {cx}" if cx else "") + f" --target {self.target}"

    def report(self) -> str:
        """The refusal as a user reads it: kernel, signature, the compiler's lines, the hint."""
        head = (f"the NPU compiler refuses kernel {self.kernel} ({self.signature_text()}) at {self.failed_at}:")
        lines = [head] + [f"  {e}" for e in self.errors] + [f"  {p}" for p in self.call_problems]
        if self.hint:
            lines.append(self.hint)
        return "\n".join(lines)

    def to_json(self):
        d = asdict(self)
        d.pop("cached")
        d.pop("key")
        return d

    @classmethod
    def from_json(cls, d):
        return cls(**d)


def _options(options):
    opts = {k: v for k, (_, v) in OPTION_FLAGS.items()}
    for k, v in (options or {}).items():
        if k not in OPTION_FLAGS:
            raise TritonDistError(f"unknown triton-ascend compile option {k!r}; known: {', '.join(OPTION_FLAGS)}")
        opts[k] = v
    return opts


def compiler_flags(target: str, options=None) -> list:
    """bishengir-compile's flags for this target and options, in linalg_to_bin_enable_npu_compile_A2_A3's order."""
    flags = [f"--target={target}"]
    for name, value in _options(options).items():
        if value is not None:
            flags.append(f"{OPTION_FLAGS[name][0]}={value}")
    return flags + list(TAIL_FLAGS)


def _error_lines(text: str) -> list:
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or HIVMC_MISSING in s or "External hivmc run fails" in s or "hivmc --version" in s:
            continue
        if re.search(r"\berror:|LLVM ERROR|Assertion .* failed|Segmentation fault|PLEASE submit a bug report", s):
            out.append(s)
    return out


def _signal_name(rc):
    import signal
    n = -rc if rc < 0 else rc - 128
    try:
        return f"{signal.Signals(n).name}, exit status {rc}"
    except ValueError:
        return f"exit status {rc}"


def _write(keep, name, text):
    if keep:
        with open(os.path.join(keep, name), "w") as f:
            f.write(text)


def _ir_after(stderr: str, pass_name: str):
    """The first module printed after `pass_name` (--mlir-print-ir-after) in bishengir's stderr."""
    marker = f"// -----// IR Dump After"
    chunks = stderr.split(marker)
    for chunk in chunks[1:]:
        head, _, body = chunk.partition("\n")
        if f"({pass_name})" in head and "func.func" in body:
            return body
    return None


def run_pipeline(ttir: str, has_dot: bool, kernel: str, tools, target=DEFAULT_TARGET, options=None, keep=None):
    """(status, stage, failed_at, errors, extern calls, notes, seconds) of a TTIR module."""
    from . import carry, extension_ops, ttir_forms, wrappers
    seconds = {}
    t0 = time.monotonic()
    frontend_ttir = ttir
    ttir, _ = ttir_forms.to_320(ttir)       # a newer stock Triton's forms, as triton-ascend 3.2's frontend prints them
    cuda_calls = ttir_forms.cuda_libdevice_calls(ttir)
    if cuda_calls:
        raise extension_ops.CannotLower(
            f"cannot lower kernel {kernel}: it calls CUDA's libdevice ({', '.join(cuda_calls)}): stock Triton's "
            f"tl.extra.libdevice resolves to it here, triton-ascend's frontend to its own __hmf_* functions "
            f"(triton.language.extra.ascend.libdevice), which the 3.2.0 adapter would be given instead; not the "
            f"compiler's verdict.  Use tl.math's functions (tl.exp, tl.sqrt, ...) or compile with triton-ascend")
    carried, plan = carry.carry_ttir(ttir, has_dot)
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or tmp
        _write(keep, "kernel.ttir.mlir", frontend_ttir)
        src = os.path.join(work, "kernel.carried.ttir.mlir")
        with open(src, "w") as f:
            f.write(carried)
        adapted = os.path.join(work, "kernel.ttadapter-out.mlir")
        proc = _run("triton-adapter-opt", [tools.adapter, src, *ADAPTER_PASSES, "-o", adapted])
        seconds["ttadapter"] = round(time.monotonic() - t0, 3)
        _write(keep, "ttadapter.log", proc.stderr)
        # an extension op this adapter does not take: no verdict (its converter may report the op
        # and still exit 0, leaving it for bishengir-compile to fail on)
        gap = extension_ops.cannot_lower(kernel, carried, _error_lines(proc.stderr))
        if gap is not None:
            raise gap
        if proc.returncode != 0 or not os.path.exists(adapted):
            unparsed = _parse_errors(tools, src)
            if unparsed:            # the adapter cannot even read the module: a gap between releases
                raise extension_ops.CannotLower(_unparsed_message(kernel, unparsed))
            errors = _error_lines(proc.stderr)
            if proc.returncode < 0 or proc.returncode > 128:
                errors.insert(0, f"triton-adapter-opt crashed ({_signal_name(proc.returncode)})")
            return dict(status="refused", stage="TTIR", failed_at="ttadapter (triton-adapter-opt)",
                        errors=errors or proc.stderr.strip().splitlines()[-3:], calls=[], seconds=seconds)
        with open(adapted) as f:
            linalg = f.read()
        t1 = time.monotonic()
        linalg = carry.insert_custom_ops(linalg, plan)
        linalg = re.sub(r', mix_mode\s*=\s*"[^"]*"', "", linalg)       # as _parse_linalg_metadata does
        inp = os.path.join(work, "kernel.ttadapter.mlir")
        with open(inp, "w") as f:
            f.write(linalg)
        out = os.path.join(work, "kernel")
        cmd = [tools.compiler, inp, *compiler_flags(target, options), "-o", out, f"--mlir-print-ir-after={STOP_PASS}"]
        proc = _run("bishengir-compile", cmd, cwd=work, env=compiler_env(tools))
        seconds["bishengir-compile"] = round(time.monotonic() - t1, 3)
        _write(keep, "bishengir-compile.log", proc.stderr)
        _write(keep, "bishengir-compile.cmd", " ".join(cmd) + "\n")
        final = _ir_after(proc.stderr, STOP_PASS)
        if final is not None:
            _write(keep, f"kernel.{STOP_PASS}.mlir", final)
        _silent_failure("bishengir-compile", tools.compiler, proc)
        _helper_missing(proc.stderr, target, tools)
        errors = _error_lines(proc.stderr)
        errors = [e for e in errors if "Failed to run BiShengHIR pipeline" not in e or len(errors) == 1]
        cmdline = [line.strip() for line in proc.stderr.splitlines() if _CMDLINE_ERROR.search(line)]
        if proc.returncode != 0 and cmdline:
            raise UsageError(f"bishengir-compile did not compile kernel {kernel}: its command line was refused "
                             f"({cmdline[0]}); no verdict on the kernel.  The command: {' '.join(cmd)}")
        if proc.returncode < 0 or proc.returncode > 128:
            errors.insert(0, f"bishengir-compile crashed ({_signal_name(proc.returncode)})")
        reached_hivmc = HIVMC_MISSING in proc.stderr or proc.returncode == 0
        if proc.returncode != 0 and (errors or not reached_hivmc):
            return dict(status="refused", stage="ttadapter", failed_at="bishengir-compile", calls=[],
                        errors=errors or proc.stderr.strip().splitlines()[-3:], seconds=seconds,
                        notes_text=proc.stderr)
        calls = wrappers.extern_calls(final or "")
        stage = ("bishengir-compile: the whole BiShengHIR pipeline (HFusion, HIVM, PlanMemory, sync solver), "
                 "stopped where it calls hivmc (CANN only)" if proc.returncode != 0 else
                 "bishengir-compile and hivmc: a device binary")
        return dict(status="accepted", stage=stage, failed_at="", errors=[], calls=calls, seconds=seconds)


def _run(tool, cmd, cwd=None, env=None):
    """Run a compiler; one that cannot be started or does not finish gave no verdict (exit 2, one line)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{tool} did not finish within {TIMEOUT_S} s: no verdict on the kernel (a machine too "
                         f"loaded, or the tool hangs); the command: {' '.join(cmd)}") from None
    except OSError as e:
        raise UsageError(f"{tool} ({cmd[0]}) cannot be run: {e.strerror or e}; not a verdict on the kernel; check "
                         f"the tool (`python -m triton_dist.backend_ascend.toolchain find`)") from None


def compiler_env(tools):
    """bishengir-compile's environment: its own directory first on PATH.  For an Ascend950 (A5) target
    bishengir-compile 1.2.0 runs `bishengir-compile-a5`, looked up on $PATH only (measured: ascendnpu-ir
    1.2.0 ships it beside bishengir-compile, whose directory is not on PATH: "[ERROR] Cannot find
    bishengir-compile-a5 under $PATH", which was reported as the kernel's refusal)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(tools.compiler), env.get("PATH", "")])
    return env


_HELPER_MISSING = re.compile(r"Cannot find ([\w.+-]+) under \$PATH")


def _helper_missing(stderr: str, target, tools) -> None:
    """A helper executable bishengir-compile needs for this target is not here (hivmc, the device code
    generator, is the expected end on a CPU): no verdict on the kernel."""
    for m in _HELPER_MISSING.finditer(stderr):
        if not m.group(1).startswith("hivmc"):
            raise ToolsMissing(f"bishengir-compile ({tools.compiler}) needs {m.group(1)} for --target {target} and "
                               f"cannot find it on PATH (nor beside itself): no verdict on the kernel; install the "
                               f"bishengir-compile that ships it (ascendnpu-ir, CANN) or compile for another target")


def _silent_failure(tool, path, proc):
    """A tool that failed without a word (not a crash) gave no verdict: it is not working here."""
    if proc.returncode > 0 and proc.returncode < 128 and not proc.stderr.strip() and not proc.stdout.strip():
        raise UsageError(f"{tool} ({path}) exited with status {proc.returncode} and printed nothing: not a verdict "
                         f"on the kernel; check the tool (`python -m triton_dist.backend_ascend.toolchain find`)")


def _parse_errors(tools, src) -> list:
    """The adapter's errors on reading `src` with no pass at all (empty: it parses and verifies)."""
    proc = _run("triton-adapter-opt", [tools.adapter, src, "-o", os.devnull])
    if proc.returncode == 0:
        return []
    _silent_failure("triton-adapter-opt", tools.adapter, proc)
    return _error_lines(proc.stderr) or proc.stderr.strip().splitlines()[-3:] or [f"exit status {proc.returncode}"]


def _unparsed_message(kernel, errors) -> str:
    made_by = triton_identity()
    newer = re.search(r"stock triton 3\.([89]|\d\d)\b", made_by) is not None
    todo = ("compile with stock triton 3.5-3.7 (the sim extra's range, scripts/setup.sh) or with triton-ascend on an "
            "NPU host" if newer else
            "the kernel uses something triton-ascend 3.2's frontend does not emit (the line above names it): write it "
            "without that, or compile with triton-ascend's main line on an NPU host")
    return (f"cannot lower kernel {kernel}: triton-ascend {toolchain.TRITON_ASCEND_VERSION}'s triton-adapter-opt cannot "
            f"parse the TTIR that {made_by} made of it (not a form triton-ascend 3.2's frontend emits); "
            f"the adapter says:\n" + "\n".join(f"  {e}" for e in errors[:4]) +
            f"\nThis is a gap between Triton releases, not the compiler's verdict on the kernel: {todo} "
            f"(docs/ascend.md, \"What cannot be lowered\")")


@functools.lru_cache(maxsize=None)
def triton_identity() -> str:
    """Which Triton makes the TTIR: its version and whether it is stock triton or triton-ascend."""
    try:
        import triton
    except ImportError:
        return "no triton"
    root = os.path.dirname(os.path.abspath(triton.__file__))
    ascend = os.path.isdir(os.path.join(root, "backends", "ascend"))
    return f"{'triton-ascend' if ascend else 'stock triton'} {getattr(triton, '__version__', '?')}"


# --- the kernel-level entry, with the cache ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _pipeline_digest() -> str:
    """Changes whenever the code of this pipeline does (so a cached verdict never outlives it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in ("pipeline.py", "carry.py", "hivm.py", "ttir_text.py", "extension_ops.py", "frontend.py",
                 "wrappers.py", "ub.py", "ascend_ttir.py", "ttir_forms.py", "source_key.py", "aclshmem_wrappers.txt"):
        with open(os.path.join(here, name), "rb") as f:
            h.update(f.read())
    from triton_dist.language import _ext_emit, ascend_shapes  # how the extension ops and shapes reach the TTIR
    for module in (_ext_emit, ascend_shapes):
        with open(module.__file__, "rb") as f:
            h.update(f.read())
    # the extension module kernels call on stock triton, and its cast, decide what they emit (read as
    # files: a sibling package, not imported here)
    for name in ("cann.py", "ascend_cast.py"):
        path = os.path.join(here, os.pardir, "sim", "compat", name)
        if os.path.exists(path):
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def _json_constexprs(constexprs):
    out = {}
    for k, v in (constexprs or {}).items():
        v = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
        name = getattr(v, "name", None) or (getattr(v, "__name__", None) if hasattr(v, "fn") else None)
        out[k] = v if isinstance(v, (bool, int, float, str)) or v is None else (name or repr(v))
    return out


# the kernel's Python function -> Triton's cache_key of it.  Triton computes a JITFunction's key once
# and keeps it (JITFunction.cache_key, triton/runtime/jit.py:494-506 at 3.6.0); as_jit_function makes
# a new JITFunction per compile, whose key (a walk of the kernel and its callees' sources) costs
# 0.1-0.7 s, most of a cache hit: kept here per function, as Triton keeps it per JITFunction.
_jit_keys: dict = {}


def _jit_key(fn, jit) -> str:
    base = getattr(fn, "fn", fn)
    key = _jit_keys.get(base)
    if key is None:
        key = _jit_keys[base] = jit.cache_key
    return key


def cache_key(jit_key: str, name: str, signature, constexprs, target, options, tools, sources: str = "") -> str:
    """Everything that changes the compile: this pipeline's code, the kernel's code and every @jit function
    it reaches (Triton's key and source_key's walk, constexpr functions included), the Triton that makes
    the TTIR, the signature and constexprs, the target, the options (bishengir's flags) and the tools."""
    blob = json.dumps({"pipeline": _pipeline_digest(), "kernel": jit_key, "sources": sources, "name": name,
                       "triton": triton_identity(), "signature": dict(signature),
                       "constexprs": _json_constexprs(constexprs), "target": target,
                       "options": _options(options), "flags": compiler_flags(target, options),
                       "adapter_passes": ADAPTER_PASSES, "tools": tools.digest()},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def compile_kernel(fn, signature, constexprs=None, *, target=DEFAULT_TARGET, options=None, keep=None,
                   cache=None, tools=None, on_compiled=None) -> Outcome:
    """Compile `fn` for `signature`/`constexprs` through the real NPU pipeline (see the module doc).

    cache: a cache.Cache to read and fill (None: no cache; --keep never uses one).
    on_compiled: called with the fresh outcome while the cache entry is still locked (so that a
    record of who compiled it is written before any other process can read the verdict).
    Raises ToolsMissing when a tool is not here; UsageError for a wrong target, option or --keep path
    (checked before anything is compiled or cached); cache.CacheUnavailable when `cache` cannot be
    used; extension_ops.CannotLower for TTIR the 3.2.0 adapter cannot take; TritonDistError for a
    kernel the frontend or the lowering refuses (a user error, as `triton-dist lower` reports it).
    None of these is a verdict: only a returned Outcome is."""
    from .frontend import as_jit_function
    from .source_key import source_key
    tools = tools or toolchain.find()
    if tools.missing:
        raise ToolsMissing("the NPU compile pipeline needs " + "; ".join(tools.missing))
    check_target(target, tools)             # before anything is compiled or cached
    _options(options)
    keep = keep_dir(keep)
    jit = as_jit_function(fn)
    name = jit.__name__
    if cache is None or keep is not None:
        return _compile(fn, name, signature, constexprs, target, options, keep, tools)
    from .cache import CacheUnavailable
    if cache.problem():             # found before compiling: a failure of the cache is never a verdict
        raise CacheUnavailable(cache.problem())
    key = cache_key(_jit_key(fn, jit), name, signature, constexprs, target, options, tools,
                    source_key(fn, constexprs))
    with _cache_failures(cache, cache.lock(key)):   # another process compiling the same kernel: wait for its verdict
        hit = cache.get(key, Outcome.from_json)
        if hit is not None:
            hit.cached, hit.key = True, key
            return hit
        outcome = _compile(fn, name, signature, constexprs, target, options, keep, tools)
        with _cache_failures(cache):
            cache.put(key, outcome)
        outcome.key = key
        if on_compiled is not None:
            on_compiled(outcome)
        return outcome


class _cache_failures:
    """An OSError of the cache's own files (a full disk, permissions changed since problem()) as
    CacheUnavailable; errors of the compile inside pass through as they are."""

    def __init__(self, cache, inner=None):
        self.cache, self.inner = cache, inner

    def _raise(self, e):
        from .cache import CacheUnavailable
        raise CacheUnavailable(f"the NPU compile verdict cache {self.cache.root} failed ({e}); set "
                               f"TRITON_DIST_NPU_COMPILE_CACHE to a writable directory") from e

    def __enter__(self):
        if self.inner is not None:
            try:
                self.inner.__enter__()
            except OSError as e:
                self._raise(e)
        return self

    def __exit__(self, *exc):
        if self.inner is not None:
            self.inner.__exit__(*exc)
            return False
        if exc[0] is not None and issubclass(exc[0], OSError):
            self._raise(exc[1])
        return False


def _compile(fn, name, signature, constexprs, target, options, keep, tools) -> Outcome:
    from .frontend import build_ttir
    from .hivm import module_facts
    t0 = time.monotonic()
    module, _ = build_ttir(fn, signature, constexprs)
    has_dot, _ = module_facts(module)
    ttir = module.str_nodebug()
    t_front = round(time.monotonic() - t0, 3)
    keep = keep_dir(keep)
    r = run_pipeline(ttir, has_dot, name, tools, target=target, options=options, keep=keep)
    outcome = Outcome(name, dict(signature), _json_constexprs(constexprs), target, r["status"], r["stage"],
                      r["failed_at"], r["errors"], seconds={"frontend": t_front, **r["seconds"]})
    for call in r["calls"]:
        outcome.symbols.append(call.symbol)
        if call.problem:
            outcome.call_problems.append(call.problem)
        if call.note:
            outcome.call_notes.append(call.note)
    if outcome.call_problems:
        outcome.status, outcome.failed_at = "refused", "the aclshmem calls (Shmem.cpp wrappers)"
    if any("ub overflow" in e for e in outcome.errors):
        from .ub import overflow_hint
        outcome.hint = overflow_hint(ttir, outcome.errors, r.get("notes_text", ""), constexprs)
    return outcome
