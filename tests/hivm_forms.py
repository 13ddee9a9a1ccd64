"""Every form the HIVM lowering can produce, and AscendNPU-IR's own verifier run on them.

Shared by tests/test_hivm_verify.py (bishengir-opt parses and verifies each form) and
tests/test_symbols_exist.py (each symbol is one the aclshmem wrapper library defines).

The grid: every dl / libshmem_device op x every element type it takes x both core types
the lowering assigns (VECTOR in a module without a dot, CUBE_AND_VECTOR where the module
holds one: docs/semantics.md §6).  A form is one `hivm.hir.custom` op as printed, with
its SSA names abstracted; it is verified inside a `func.func` whose arguments are its
operands (bishengir-opt has no Triton dialect, so `!tt.ptr<...>` stays an opaque type
under --allow-unregistered-dialect; the CustomOp parser and verifier are HIVM's own).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

BISHENGIR_VERSION = "1.2.0"           # the ascendnpu-ir wheel pinned in pyproject.toml's test extra

# Triton type strings of every element type the typed ops take (symbols.TYPE_NAMES)
ALL_DTYPES = ["fp16", "bf16", "fp32", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
WAIT_DTYPES = ["i32", "i64", "u32", "u64"]
CORE_TYPES = {"VECTOR": False, "CUBE_AND_VECTOR": True}      # core type -> the module holds a dot


@triton.jit
def _dot(x, y, DOT: tl.constexpr):
    if DOT:
        offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
        tl.store(y + offs, tl.dot(tl.load(x + offs), tl.load(x + offs)))


@triton.jit
def f_ids(out, x, y, DOT: tl.constexpr):
    _dot(x, y, DOT)
    v = dl.rank() + dl.num_ranks() + shm.my_pe() + shm.n_pes()
    v += shm.team_my_pe(shm.ACLSHMEM_TEAM_WORLD) + shm.team_n_pes(shm.ACLSHMEM_TEAM_WORLD)
    v += shm.team_translate_pe(shm.ACLSHMEM_TEAM_WORLD, 0, shm.ACLSHMEM_TEAM_WORLD)
    tl.store(out, v)


@triton.jit
def f_ptr(p, peer, x, y, DOT: tl.constexpr):
    _dot(x, y, DOT)
    tl.store(dl.symm_at(p, peer), tl.load(p))
    tl.store(shm.remote_ptr(p + 1, peer), tl.load(p))


@triton.jit
def f_notify(sig, peer, x, y, SIG_OP: tl.constexpr, DOT: tl.constexpr):
    _dot(x, y, DOT)
    dl.notify(sig, peer, signal=1, sig_op=SIG_OP)


@triton.jit
def f_wait(sig, out, x, y, DOT: tl.constexpr):
    _dot(x, y, DOT)
    tok = dl.wait(sig, 2, "sys", "acquire", waitValue=3)
    tl.store(out, tok)


@triton.jit
def f_consume(sig, buf, x, y, DOT: tl.constexpr):
    """consume_token of a scalar value and of pointers of rank 1 (scalar and block) to 5."""
    _dot(x, y, DOT)
    tok = dl.wait(sig, 1, "sys", "acquire")
    v = dl.consume_token(tl.load(buf), tok)
    tl.store(buf + 1, v)
    p0 = dl.consume_token(buf, tok)
    tl.store(buf + 2, tl.load(p0))
    r = tl.arange(0, 2)
    p1 = dl.consume_token(buf + r, tok)
    tl.store(buf + 4 + r, tl.load(p1))
    p2 = dl.consume_token(buf + r.reshape(2, 1), tok)
    tl.store(buf + 8 + r.reshape(2, 1), tl.load(p2))
    p3 = dl.consume_token(buf + r.reshape(2, 1, 1), tok)
    tl.store(buf + 12 + r.reshape(2, 1, 1), tl.load(p3))
    p4 = dl.consume_token(buf + r.reshape(2, 1, 1, 1), tok)
    tl.store(buf + 16 + r.reshape(2, 1, 1, 1), tl.load(p4))
    p5 = dl.consume_token(buf + r.reshape(2, 1, 1, 1, 1), tok)
    tl.store(buf + 20 + r.reshape(2, 1, 1, 1, 1), tl.load(p5))


@triton.jit
def f_rma(a, b, sig, peer, x, y, DOT: tl.constexpr):
    _dot(x, y, DOT)
    shm.putmem(a, b, 64, peer)
    shm.getmem(a + 16, b, 64, peer)
    shm.putmem_nbi(a, b + 16, 64, peer)
    shm.getmem_nbi(a, b, 64, peer)
    shm.putmem_signal(a, b, 64, sig, 1, shm.ACLSHMEM_SIGNAL_SET, peer)
    shm.putmem_signal_nbi(a, b, 64, sig + 16, 1, shm.ACLSHMEM_SIGNAL_ADD, peer)


@triton.jit
def f_sync(sig, sig64, peer, x, y, DOT: tl.constexpr):
    _dot(x, y, DOT)
    shm.int_p(sig, 1, peer)
    shm.int64_p(sig64, 1, peer)
    shm.signal_op(sig, 1, shm.ACLSHMEM_SIGNAL_ADD, peer)
    v = shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_GE, 1)
    shm.quiet()
    shm.fence()
    shm.barrier_all()
    shm.barrier_all_vec()
    shm.barrier(shm.ACLSHMEM_TEAM_WORLD)
    shm.barrier_vec(shm.ACLSHMEM_TEAM_WORLD)
    tl.store(sig + 16, v)


DOT_SIG = {"x": "*fp32", "y": "*fp32"}


def grid():
    """[(case id, kernel, signature, constexprs without DOT)] over ops x dtypes."""
    cases = [("ids", f_ids, {"out": "*i32"}, {})]
    cases += [(f"ptr-{dt}", f_ptr, {"p": f"*{dt}", "peer": "i32"}, {}) for dt in ALL_DTYPES]
    cases += [(f"notify-{dt}-{op}", f_notify, {"sig": f"*{dt}", "peer": "i32"}, {"SIG_OP": op})
              for dt, op in (("i32", "set"), ("i32", "add"), ("i64", "set"), ("u64", "set"))]
    cases += [(f"wait-{dt}", f_wait, {"sig": f"*{dt}", "out": "*i32"}, {}) for dt in WAIT_DTYPES]
    cases += [(f"consume-{dt}", f_consume, {"sig": "*i32", "buf": f"*{dt}"}, {}) for dt in ALL_DTYPES]
    cases += [(f"rma-{dt}", f_rma, {"a": f"*{dt}", "b": f"*{dt}", "sig": "*i32", "peer": "i32"}, {})
              for dt in ALL_DTYPES]
    cases += [("sync", f_sync, {"sig": "*i32", "sig64": "*i64", "peer": "i32"}, {})]
    return [(cid, fn, {**sig, **DOT_SIG}, consts) for cid, fn, sig, consts in cases]


def lower_npu(fn, signature, constexprs, bitcode_dir="/opt/aclshmem"):
    """What the NPU's ttadapter pre-step emits (backend_ascend.npu_compile.lower_module, with
    the bitcode variant of each op chosen from a directory of AscendNPU-IR's Shmem bitcode),
    as text without locations."""
    from triton_dist.backend_ascend import npu_compile
    from triton_dist.backend_ascend.frontend import build_ttir
    from triton_dist.backend_ascend.hivm import convert_text, module_facts
    module, _ = build_ttir(fn, signature, constexprs)
    has_dot, count = module_facts(module)
    text, n = convert_text(module.str_nodebug(), has_dot=has_dot,
                           bitcode=npu_compile.bitcode_selector(bitcode_dir, check=False))
    assert n == count
    return text


# --- forms ---------------------------------------------------------------------------------------
_CUSTOM = re.compile(
    r'^\s*(?:(?P<res>%\S+) = )?hivm\.hir\.custom (?P<attrs>\{.*?\}) "(?P<name>[^"]+)"'
    r'(?: ins\((?P<ins>[^:]*) : (?P<ins_t>[^)]*(?:\)[^)]*)*?)\))?'
    r'(?: outs\((?P<outs>[^:]*) : (?P<outs_t>.*?)\))?'
    r'(?: -> (?P<ret>\S+))?$')


def _split(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def forms(text):
    """{form: verification function body} of every hivm.hir.custom op in a lowered module.

    A form is the op with its operands replaced by %a0, %a1, ... (the function arguments
    its verification function takes) and its result named %r."""
    found = {}
    for line in text.splitlines():
        if "hivm.hir.custom" not in line:
            continue
        m = _CUSTOM.match(line)
        assert m, f"unreadable custom op: {line}"
        ins = _split(m["ins"]) if m["ins"] else []
        ins_t = _split(m["ins_t"]) if m["ins_t"] else []
        outs = _split(m["outs"]) if m["outs"] else []
        outs_t = _split(m["outs_t"]) if m["outs_t"] else []
        assert len(ins) == len(ins_t) and len(outs) == len(outs_t), line
        args = [f"%a{i}" for i in range(len(ins) + len(outs))]
        op = f'hivm.hir.custom {m["attrs"]} "{m["name"]}"'
        if ins:
            op += f" ins({', '.join(args[:len(ins)])} : {', '.join(ins_t)})"
        if outs:
            op += f" outs({', '.join(args[len(ins):])} : {', '.join(outs_t)})"
        if m["ret"]:
            op = f"%r = {op} -> {m['ret']}"
        params = ", ".join(f"{a}: {t}" for a, t in zip(args, ins_t + outs_t))
        found[op] = params
    return found


def module_of(forms_):
    """One module: a func.func per form."""
    funcs = []
    for i, (op, params) in enumerate(sorted(forms_.items())):
        funcs.append(f"  func.func @form{i}({params}) {{\n    {op}\n    return\n  }}")
    return "module {\n" + "\n".join(funcs) + "\n}\n"


# --- bishengir-opt ---------------------------------------------------------------------------------
def bishengir_opt():
    """(path, None) of AscendNPU-IR's bishengir-opt, or (None, why it is not available)."""
    path = os.environ.get("TRITON_DIST_BISHENGIR_OPT")
    if path:
        return (path, None) if os.access(path, os.X_OK) else (None, f"TRITON_DIST_BISHENGIR_OPT={path} is not executable")
    try:
        import ascendnpuir
    except ImportError:
        found = shutil.which("bishengir-opt")
        if found:
            return found, None
        return None, (f"AscendNPU-IR's bishengir-opt is not installed: the test extra installs it from the "
                      f"ascendnpu-ir=={BISHENGIR_VERSION} wheel, published for CPython 3.11 on x86_64 Linux only "
                      f"(pip install -e '.[sim,test]' there, or set TRITON_DIST_BISHENGIR_OPT)")
    path = os.path.join(os.path.dirname(ascendnpuir.__file__), "bin", "bishengir-opt")
    if not os.access(path, os.X_OK):
        return None, f"the ascendnpu-ir package has no executable {path}"
    return path, None


def verify(opt, module_text):
    """(returncode, stderr) of bishengir-opt parsing and verifying `module_text`."""
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(module_text)
    try:
        proc = subprocess.run([opt, "--allow-unregistered-dialect", f.name,
                               "-o", os.devnull], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    return proc.returncode, proc.stderr


def verify_forms(opt, forms_):
    """{form: error} of the forms bishengir-opt rejects (empty when it accepts all)."""
    rc, err = verify(opt, module_of(forms_))
    if rc == 0:
        return {}
    bad = {}
    for op, params in forms_.items():          # find which ones, one by one
        rc1, err1 = verify(opt, module_of({op: params}))
        if rc1 != 0:
            bad[op] = err1.strip()
    return bad or {"<module>": err.strip()}
