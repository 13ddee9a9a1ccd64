"""The device library of backend="cuda": the aclshmem symbols, implemented for NVIDIA GPUs.

Why one long file: it is one generated artifact, the LLVM IR of every aclshmem symbol, built
from one table; its emitters share the IR helpers and the state layout, and splitting them
would scatter the one place that must match triton_dist/symbols.py.

Kernels written for Ascend call the aclshmem device library by symbol (triton_dist/symbols.py);
on a GPU those same symbols are defined here, as LLVM IR for the NVPTX target, assembled to
bitcode with llvmlite and linked into every kernel through Triton's `extern_libs` option
(Triton 3.6 ignores an extern call's own lib_path).  Ascend's rules are the contract:
signal slots 64 bytes apart, int32 signals with SET/ADD, the pull barrier with its +1 rule.
GPU memory ordering replaces Ascend's dcci: signals are written with release and polled
with acquire, both at system scope (peers are other GPUs).

How a call runs.  A `dl.*` op on scalars is executed by every thread of the program (CTA);
each function here is written for that: communication is done by thread 0 after a
`bar.sync` (so the whole program's earlier stores are ordered before it, as Triton does for
its own atomics), copies are shared by all threads, and waits end with a `bar.sync` so that
every thread's later loads come after the acquire.

Device state.  The global `triton_dist_state` (STATE_* slots, int64) holds rank, PE count,
heap size, the report record's address, the wait timeout, the module id and the heap base
of every PE.  Every loaded module has its own copy; loader.py fills it after each load, so
`rank()` and `symm_at()` need no kernel argument, as on Ascend.

ABI.  Each function takes the aclshmem arguments; those that translate an address or wait
also take a trailing i32 `site`: the kernel source line of the call, for the report.
Functions the aclshmem library declares void return i32 0 (an extern elementwise call
needs a result).  Timeouts: a wait that sees no progress for STATE_TIMEOUT_NS records
kind/line/address/awaited/seen in the report record (first one wins) and gives up; waits
started after that give up at once, so the kernel ends and the host raises DeadlockError.
"""
from __future__ import annotations

import hashlib
import os

from triton_dist import symbols as S
from triton_dist.errors import TritonDistError
from triton_dist.symm_heap import SYNC_COUNTER_OFFSET, SYNC_POOL_OFFSET

STATE_SYMBOL = "triton_dist_state"
# The extern-library name kernels link this library under; pyproject.toml registers
# backend_cuda.emit under the same name (entry-point group triton_dist.device_libraries).
LIBNAME = "triton_dist_cuda"
MAX_PES = 64
# int64 slots of the state
STATE_RANK, STATE_N_PES, STATE_HEAP_SIZE, STATE_REPORT, STATE_TIMEOUT_NS, STATE_MODULE = 0, 1, 2, 3, 4, 5
STATE_BASES = 8
STATE_SLOTS = STATE_BASES + MAX_PES

# The grid barrier (barrier of the local cores) keeps its arrival count and generation in
# the heap's reserved area, after the pull barrier's counter and flag, each in its own line.
GRID_COUNT_OFFSET = 128
GRID_GEN_OFFSET = 192

# int64 fields of the report record
REPORT_FIELDS = ("flag", "kind", "line", "address", "awaited", "seen", "program", "module", "cmp")
REPORT_SLOTS = 16
KIND_WAIT, KIND_SIGNAL_WAIT, KIND_BARRIER_PE, KIND_BARRIER_GRID, KIND_BAD_POINTER, KIND_BAD_PE = 1, 2, 3, 4, 5, 6
KIND_NAMES = {KIND_WAIT: "dl.wait", KIND_SIGNAL_WAIT: "signal_wait_until",
              KIND_BARRIER_PE: "barrier_all (waiting for a peer's flag)",
              KIND_BARRIER_GRID: "barrier_all (waiting for the other programs of this kernel)",
              KIND_BAD_POINTER: "symm_at/put/get on an address outside the symmetric heap",
              KIND_BAD_PE: "a PE number out of range"}
CMP_PLUS_ONE = 6          # td_cmp: value == want or want + 1 (the barrier's +1 rule)

# LLVM type of each element type name used in symbols
LLVM_TYPES = {"bfloat16": "bfloat", "half": "half", "float": "float", "double": "double",
              "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
              "uint8": "i8", "uint16": "i16", "uint32": "i32", "uint64": "i64"}
# dl.wait symbols: one per signed width, as in AscendNPU-IR's Shmem.cpp (unsigned signals
# are waited on by the same function: triton_dist/symbols.py wait_symbol)
WAIT_TYPES = tuple(sorted(set(S.WAIT_SIGNAL_TYPES.values())))
PTR = "ptr addrspace(1)"

# Families whose CUDA function takes the trailing `site` argument (they translate or wait).
SITED_FAMILIES = frozenset({
    "aclshmem_ptr", "aclshmem_p", "aclshmemx_signal_op", "aclshmem_wait", "aclshmem_signal_wait_until",
    "aclshmem_putmem", "aclshmem_getmem", "aclshmem_putmem_nbi", "aclshmem_getmem_nbi",
    "aclshmem_putmem_signal", "aclshmem_putmem_signal_nbi",
    "aclshmem_barrier_all", "aclshmemx_barrier_all_vec", "aclshmem_barrier", "aclshmemx_barrier_vec"})


def takes_site(symbol: str) -> bool:
    return S.family_of(symbol) in SITED_FAMILIES


# ---- the IR -----------------------------------------------------------------------------------------

_HELPERS = r"""
target triple = "nvptx64-nvidia-cuda"

@triton_dist_state = addrspace(1) externally_initialized global [@SLOTS@ x i64] zeroinitializer, align 8

define internal i64 @td_get(i32 %i) #0 {
  %p = getelementptr inbounds [@SLOTS@ x i64], ptr addrspace(1) @triton_dist_state, i32 0, i32 %i
  %v = load i64, ptr addrspace(1) %p, align 8
  ret i64 %v
}

define internal i32 @td_get32(i32 %i) #0 {
  %v = call i64 @td_get(i32 %i)
  %r = trunc i64 %v to i32
  ret i32 %r
}

define internal i64 @td_base(i32 %pe) #0 {
  %i = add i32 %pe, @BASES@
  %v = call i64 @td_get(i32 %i)
  ret i64 %v
}

define internal i32 @td_tid() #0 {
  %t = call i32 asm "mov.u32 $0, %tid.x;", "=r"()
  ret i32 %t
}

define internal i32 @td_ntid() #0 {
  %t = call i32 asm "mov.u32 $0, %ntid.x;", "=r"()
  ret i32 %t
}

define internal i32 @td_cta() #0 {
  %x = call i32 asm "mov.u32 $0, %ctaid.x;", "=r"()
  %y = call i32 asm "mov.u32 $0, %ctaid.y;", "=r"()
  %z = call i32 asm "mov.u32 $0, %ctaid.z;", "=r"()
  %nx = call i32 asm "mov.u32 $0, %nctaid.x;", "=r"()
  %ny = call i32 asm "mov.u32 $0, %nctaid.y;", "=r"()
  %zy = mul i32 %z, %ny
  %zyy = add i32 %zy, %y
  %row = mul i32 %zyy, %nx
  %r = add i32 %row, %x
  ret i32 %r
}

define internal i32 @td_ncta() #0 {
  %nx = call i32 asm "mov.u32 $0, %nctaid.x;", "=r"()
  %ny = call i32 asm "mov.u32 $0, %nctaid.y;", "=r"()
  %nz = call i32 asm "mov.u32 $0, %nctaid.z;", "=r"()
  %a = mul i32 %nx, %ny
  %r = mul i32 %a, %nz
  ret i32 %r
}

define internal void @td_bar() #0 {
  call void asm sideeffect "bar.sync 0;", "~{memory}"() #2
  ret void
}

define internal i64 @td_now() #0 {
  %t = call i64 asm sideeffect "mov.u64 $0, %globaltimer;", "=l"()
  ret i64 %t
}

define internal i64 @td_ld_acq32(i64 %a) #0 {
  %v = call i32 asm sideeffect "ld.acquire.sys.global.b32 $0, [$1];", "=r,l,~{memory}"(i64 %a)
  %w = sext i32 %v to i64
  ret i64 %w
}

define internal i64 @td_ld_acq64(i64 %a) #0 {
  %v = call i64 asm sideeffect "ld.acquire.sys.global.b64 $0, [$1];", "=l,l,~{memory}"(i64 %a)
  ret i64 %v
}

define internal i64 @td_ld_vol64(i64 %a) #0 {
  %v = call i64 asm sideeffect "ld.volatile.global.b64 $0, [$1];", "=l,l,~{memory}"(i64 %a)
  ret i64 %v
}

define internal void @td_st_rel32(i64 %a, i32 %v) #0 {
  call void asm sideeffect "st.release.sys.global.b32 [$0], $1;", "l,r,~{memory}"(i64 %a, i32 %v)
  ret void
}

define internal void @td_st_rel64(i64 %a, i64 %v) #0 {
  call void asm sideeffect "st.release.sys.global.b64 [$0], $1;", "l,l,~{memory}"(i64 %a, i64 %v)
  ret void
}

define internal void @td_st64(i64 %a, i64 %v) #0 {
  call void asm sideeffect "st.global.b64 [$0], $1;", "l,l,~{memory}"(i64 %a, i64 %v)
  ret void
}

define internal void @td_add_rel32(i64 %a, i32 %v) #0 {
  %o = call i32 asm sideeffect "atom.add.release.sys.global.s32 $0, [$1], $2;", "=r,l,r,~{memory}"(i64 %a, i32 %v)
  ret void
}

define internal i64 @td_add_acqrel64(i64 %a, i64 %v) #0 {
  %o = call i64 asm sideeffect "atom.add.acq_rel.sys.global.u64 $0, [$1], $2;", "=l,l,l,~{memory}"(i64 %a, i64 %v)
  ret i64 %o
}

define internal i64 @td_cas64(i64 %a, i64 %c, i64 %n) #0 {
  %o = call i64 asm sideeffect "atom.global.cas.b64 $0, [$1], $2, $3;", "=l,l,l,l,~{memory}"(i64 %a, i64 %c, i64 %n)
  ret i64 %o
}

define internal void @td_fence_sys() #0 {
  call void asm sideeffect "fence.acq_rel.sys;", "~{memory}"()
  ret void
}

; ---- the report: the first wait that times out (or bad address) records what it saw ----
define internal void @td_report(i64 %kind, i32 %site, i64 %addr, i64 %want, i64 %seen, i32 %cmp) #0 {
entry:
  %rep = call i64 @td_get(i32 @REPORT@)
  %old = call i64 @td_cas64(i64 %rep, i64 0, i64 1)
  %won = icmp eq i64 %old, 0
  br i1 %won, label %write, label %done
write:
  %a1 = add i64 %rep, 8
  call void @td_st64(i64 %a1, i64 %kind)
  %a2 = add i64 %rep, 16
  %s64 = sext i32 %site to i64
  call void @td_st64(i64 %a2, i64 %s64)
  %a3 = add i64 %rep, 24
  call void @td_st64(i64 %a3, i64 %addr)
  %a4 = add i64 %rep, 32
  call void @td_st64(i64 %a4, i64 %want)
  %a5 = add i64 %rep, 40
  call void @td_st64(i64 %a5, i64 %seen)
  %a6 = add i64 %rep, 48
  %cta = call i32 @td_cta()
  %c64 = zext i32 %cta to i64
  call void @td_st64(i64 %a6, i64 %c64)
  %a7 = add i64 %rep, 56
  %mod = call i64 @td_get(i32 @MODULE@)
  call void @td_st64(i64 %a7, i64 %mod)
  %a8 = add i64 %rep, 64
  %cmp64 = sext i32 %cmp to i64
  call void @td_st64(i64 %a8, i64 %cmp64)
  call void @td_fence_sys()
  br label %done
done:
  ret void
}

define internal i1 @td_cmp(i32 %cmp, i64 %x, i64 %w) #0 {
entry:
  switch i32 %cmp, label %eq [ i32 1, label %ne
                               i32 2, label %gt
                               i32 3, label %ge
                               i32 4, label %lt
                               i32 5, label %le
                               i32 @PLUS_ONE@, label %eqp1 ]
eq:
  %r0 = icmp eq i64 %x, %w
  ret i1 %r0
ne:
  %r1 = icmp ne i64 %x, %w
  ret i1 %r1
gt:
  %r2 = icmp sgt i64 %x, %w
  ret i1 %r2
ge:
  %r3 = icmp sge i64 %x, %w
  ret i1 %r3
lt:
  %r4 = icmp slt i64 %x, %w
  ret i1 %r4
le:
  %r5 = icmp sle i64 %x, %w
  ret i1 %r5
eqp1:
  %e = icmp eq i64 %x, %w
  %w1 = add i64 %w, 1
  %e1 = icmp eq i64 %x, %w1
  %r6 = or i1 %e, %e1
  ret i1 %r6
}

; Poll a 32- or 64-bit word with acquire until cmp(word, want); gives up after the timeout
; (recording the report) or as soon as another wait of this rank has recorded one.
define internal i64 @td_spin(i64 %addr, i32 %bits, i32 %cmp, i64 %want, i64 %kind, i32 %site) #0 {
entry:
  %t0 = call i64 @td_now()
  %tmo = call i64 @td_get(i32 @TIMEOUT@)
  %rep = call i64 @td_get(i32 @REPORT@)
  %is64 = icmp eq i32 %bits, 64
  br label %poll
poll:
  %it = phi i32 [ 0, %entry ], [ %it1, %check ], [ %it1, %abortchk ]
  br i1 %is64, label %l64, label %l32
l64:
  %x64 = call i64 @td_ld_acq64(i64 %addr)
  br label %got
l32:
  %x32 = call i64 @td_ld_acq32(i64 %addr)
  br label %got
got:
  %x = phi i64 [ %x64, %l64 ], [ %x32, %l32 ]
  %ok = call i1 @td_cmp(i32 %cmp, i64 %x, i64 %want)
  br i1 %ok, label %done, label %check
check:
  %it1 = add i32 %it, 1
  %m = and i32 %it1, 255
  %z = icmp eq i32 %m, 0
  br i1 %z, label %slow, label %poll
slow:
  %now = call i64 @td_now()
  %el = sub i64 %now, %t0
  %late = icmp ugt i64 %el, %tmo
  br i1 %late, label %timeout, label %abortchk
abortchk:
  %flag = call i64 @td_ld_vol64(i64 %rep)
  %ab = icmp ne i64 %flag, 0
  br i1 %ab, label %done, label %poll
timeout:
  call void @td_report(i64 %kind, i32 %site, i64 %addr, i64 %want, i64 %x, i32 %cmp)
  br label %done
done:
  ret i64 %x
}

; remote = base[pe] + (addr - base[me]); an address outside the heap or a bad PE is reported
; (and the address returned unchanged) rather than turned into a stray remote access.
define internal i64 @td_translate(i64 %addr, i32 %pe, i32 %site) #0 {
entry:
  %me = call i32 @td_get32(i32 @RANK@)
  %n = call i32 @td_get32(i32 @N_PES@)
  %pe_ok = icmp ult i32 %pe, %n
  br i1 %pe_ok, label %inheap, label %badpe
badpe:
  %n64 = sext i32 %n to i64
  %pe64 = sext i32 %pe to i64
  call void @td_report(i64 @BAD_PE@, i32 %site, i64 %addr, i64 %n64, i64 %pe64, i32 0)
  ret i64 %addr
inheap:
  %mine = call i64 @td_base(i32 %me)
  %off = sub i64 %addr, %mine
  %size = call i64 @td_get(i32 @HEAP_SIZE@)
  %ok = icmp ult i64 %off, %size
  br i1 %ok, label %xl, label %badptr
badptr:
  call void @td_report(i64 @BAD_POINTER@, i32 %site, i64 %addr, i64 %mine, i64 %size, i32 0)
  ret i64 %addr
xl:
  %theirs = call i64 @td_base(i32 %pe)
  %r = add i64 %theirs, %off
  ret i64 %r
}

; Copy n bytes with every thread of the program: 16-byte vectors (4 in flight per thread)
; when both addresses are 16-byte aligned, bytes otherwise and for the tail.
define internal void @td_copy(i64 %d, i64 %s, i64 %n) #0 {
entry:
  %tid32 = call i32 @td_tid()
  %nt32 = call i32 @td_ntid()
  %tid = zext i32 %tid32 to i64
  %nt = zext i32 %nt32 to i64
  %or = or i64 %d, %s
  %mis = and i64 %or, 15
  %al = icmp eq i64 %mis, 0
  %nv = lshr i64 %n, 4
  %nvec = select i1 %al, i64 %nv, i64 0
  %nt2 = shl i64 %nt, 1
  %nt3 = mul i64 %nt, 3
  %nt4 = shl i64 %nt, 2
  br label %u.cond
u.cond:
  %v = phi i64 [ %tid, %entry ], [ %vn, %u.body ]
  %last = add i64 %v, %nt3
  %uc = icmp ult i64 %last, %nvec
  br i1 %uc, label %u.body, label %r.cond
u.body:
  %v1 = add i64 %v, %nt
  %v2 = add i64 %v, %nt2
  %v3 = add i64 %v, %nt3
  %o0 = shl i64 %v, 4
  %o1 = shl i64 %v1, 4
  %o2 = shl i64 %v2, 4
  %o3 = shl i64 %v3, 4
  %sa0 = add i64 %s, %o0
  %sa1 = add i64 %s, %o1
  %sa2 = add i64 %s, %o2
  %sa3 = add i64 %s, %o3
  %sp0 = inttoptr i64 %sa0 to ptr addrspace(1)
  %sp1 = inttoptr i64 %sa1 to ptr addrspace(1)
  %sp2 = inttoptr i64 %sa2 to ptr addrspace(1)
  %sp3 = inttoptr i64 %sa3 to ptr addrspace(1)
  %x0 = load <4 x i32>, ptr addrspace(1) %sp0, align 16
  %x1 = load <4 x i32>, ptr addrspace(1) %sp1, align 16
  %x2 = load <4 x i32>, ptr addrspace(1) %sp2, align 16
  %x3 = load <4 x i32>, ptr addrspace(1) %sp3, align 16
  %da0 = add i64 %d, %o0
  %da1 = add i64 %d, %o1
  %da2 = add i64 %d, %o2
  %da3 = add i64 %d, %o3
  %dp0 = inttoptr i64 %da0 to ptr addrspace(1)
  %dp1 = inttoptr i64 %da1 to ptr addrspace(1)
  %dp2 = inttoptr i64 %da2 to ptr addrspace(1)
  %dp3 = inttoptr i64 %da3 to ptr addrspace(1)
  store <4 x i32> %x0, ptr addrspace(1) %dp0, align 16
  store <4 x i32> %x1, ptr addrspace(1) %dp1, align 16
  store <4 x i32> %x2, ptr addrspace(1) %dp2, align 16
  store <4 x i32> %x3, ptr addrspace(1) %dp3, align 16
  %vn = add i64 %v, %nt4
  br label %u.cond
r.cond:
  %w = phi i64 [ %v, %u.cond ], [ %wn, %r.body ]
  %rc = icmp ult i64 %w, %nvec
  br i1 %rc, label %r.body, label %t.start
r.body:
  %ow = shl i64 %w, 4
  %swa = add i64 %s, %ow
  %swp = inttoptr i64 %swa to ptr addrspace(1)
  %xw = load <4 x i32>, ptr addrspace(1) %swp, align 16
  %dwa = add i64 %d, %ow
  %dwp = inttoptr i64 %dwa to ptr addrspace(1)
  store <4 x i32> %xw, ptr addrspace(1) %dwp, align 16
  %wn = add i64 %w, %nt
  br label %r.cond
t.start:
  %tb = shl i64 %nvec, 4
  %b0 = add i64 %tb, %tid
  br label %t.cond
t.cond:
  %b = phi i64 [ %b0, %t.start ], [ %bn, %t.body ]
  %tc = icmp ult i64 %b, %n
  br i1 %tc, label %t.body, label %done
t.body:
  %sba = add i64 %s, %b
  %sbp = inttoptr i64 %sba to ptr addrspace(1)
  %xb = load i8, ptr addrspace(1) %sbp, align 1
  %dba = add i64 %d, %b
  %dbp = inttoptr i64 %dba to ptr addrspace(1)
  store i8 %xb, ptr addrspace(1) %dbp, align 1
  %bn = add i64 %b, %nt
  br label %t.cond
done:
  ret void
}

; putmem (%put true: dst is on PE pe) or getmem (src is on PE pe), by every thread of the program
define internal void @td_rma(ptr addrspace(1) %dst, ptr addrspace(1) %src, i32 %nbytes, i32 %pe, i32 %site,
                             i1 %put) #0 {
  call void @td_bar()
  %d = ptrtoint ptr addrspace(1) %dst to i64
  %s = ptrtoint ptr addrspace(1) %src to i64
  %remote = select i1 %put, i64 %d, i64 %s
  %r = call i64 @td_translate(i64 %remote, i32 %pe, i32 %site)
  %to = select i1 %put, i64 %r, i64 %d
  %from = select i1 %put, i64 %s, i64 %r
  %n = zext i32 %nbytes to i64
  call void @td_copy(i64 %to, i64 %from, i64 %n)
  call void @td_bar()
  ret void
}

; SET (a release store) or ADD (an atomic add with release) on PE pe's copy of sig, by
; thread 0 after the program's barrier: everything the program wrote before is ordered first.
define internal void @td_signal(ptr addrspace(1) %sig, i32 %val, i32 %op, i32 %pe, i32 %site) #0 {
entry:
  call void @td_bar()
  %tid = call i32 @td_tid()
  %t0 = icmp eq i32 %tid, 0
  br i1 %t0, label %do, label %done
do:
  %a = ptrtoint ptr addrspace(1) %sig to i64
  %r = call i64 @td_translate(i64 %a, i32 %pe, i32 %site)
  %isadd = icmp eq i32 %op, @SIG_ADD@
  br i1 %isadd, label %add, label %set
add:
  call void @td_add_rel32(i64 %r, i32 %val)
  br label %done
set:
  call void @td_st_rel32(i64 %r, i32 %val)
  br label %done
done:
  ret void
}

define internal void @td_p64(ptr addrspace(1) %dst, i64 %val, i32 %pe, i32 %site) #0 {
entry:
  call void @td_bar()
  %tid = call i32 @td_tid()
  %t0 = icmp eq i32 %tid, 0
  br i1 %t0, label %do, label %done
do:
  %a = ptrtoint ptr addrspace(1) %dst to i64
  %r = call i64 @td_translate(i64 %a, i32 %pe, i32 %site)
  call void @td_st_rel64(i64 %r, i64 %val)
  br label %done
done:
  ret void
}

; dl.wait: slot i (64 bytes apart) polled by thread i mod ntid until it equals want.
define internal void @td_wait_slots(i64 %a, i32 %n, i64 %want, i32 %bits, i32 %site) #0 {
entry:
  %tid = call i32 @td_tid()
  %nt = call i32 @td_ntid()
  br label %loop
loop:
  %i = phi i32 [ %tid, %entry ], [ %inext, %body ]
  %more = icmp slt i32 %i, %n
  br i1 %more, label %body, label %done
body:
  %i64 = sext i32 %i to i64
  %off = mul i64 %i64, @SLOT_BYTES@
  %slot = add i64 %a, %off
  %seen = call i64 @td_spin(i64 %slot, i32 %bits, i32 0, i64 %want, i64 @KIND_WAIT@, i32 %site)
  %inext = add i32 %i, %nt
  br label %loop
done:
  call void @td_bar()
  ret void
}

; Barrier of the programs of this kernel (Ascend: of the local cores): a generation count.
define internal void @td_grid_barrier(i32 %site) #0 {
entry:
  call void @td_bar()
  %tid = call i32 @td_tid()
  %t0 = icmp eq i32 %tid, 0
  br i1 %t0, label %lead, label %done
lead:
  %me = call i32 @td_get32(i32 @RANK@)
  %base = call i64 @td_base(i32 %me)
  %cnt = add i64 %base, @GRID_COUNT@
  %gen = add i64 %base, @GRID_GEN@
  %nb32 = call i32 @td_ncta()
  %nb = zext i32 %nb32 to i64
  %g = call i64 @td_ld_acq64(i64 %gen)
  %old = call i64 @td_add_acqrel64(i64 %cnt, i64 1)
  %nb1 = sub i64 %nb, 1
  %lastone = icmp eq i64 %old, %nb1
  br i1 %lastone, label %release, label %wait
release:
  call void @td_st64(i64 %cnt, i64 0)
  %g1 = add i64 %g, 1
  call void @td_st_rel64(i64 %gen, i64 %g1)
  br label %done
wait:
  %seen = call i64 @td_spin(i64 %gen, i32 64, i32 1, i64 %g, i64 @KIND_BARRIER_GRID@, i32 %site)
  br label %done
done:
  call void @td_bar()
  ret void
}

; aclshmem_barrier_all: the centralized pull barrier with the +1 rule (docs/semantics.md §3).
define internal void @td_barrier_all(i32 %site) #0 {
entry:
  %me = call i32 @td_get32(i32 @RANK@)
  %n = call i32 @td_get32(i32 @N_PES@)
  %base = call i64 @td_base(i32 %me)
  %ctr = add i64 %base, @SYNC_COUNTER@
  %flag = add i64 %base, @SYNC_POOL@
  %c0 = call i64 @td_ld_acq32(i64 %ctr)
  %count = add i64 %c0, 1
  %count32 = trunc i64 %count to i32
  call void @td_grid_barrier(i32 %site)
  %cta = call i32 @td_cta()
  %ncta = call i32 @td_ncta()
  %c1 = icmp slt i32 %n, 8
  %k1 = select i1 %c1, i32 %n, i32 8
  %c2 = icmp slt i32 %ncta, %k1
  %k = select i1 %c2, i32 %ncta, i32 %k1
  %tid = call i32 @td_tid()
  %t0 = icmp eq i32 %tid, 0
  %mine = icmp slt i32 %cta, %k
  %share = and i1 %t0, %mine
  br i1 %share, label %pe.cond, label %after
pe.cond:
  %pe = phi i32 [ %cta, %entry ], [ %pen, %pe.next ]
  %pc = icmp slt i32 %pe, %n
  br i1 %pc, label %pe.body, label %after
pe.body:
  %self = icmp eq i32 %pe, %me
  br i1 %self, label %set, label %pull
set:
  call void @td_st_rel32(i64 %flag, i32 %count32)
  br label %pe.next
pull:
  %pb = call i64 @td_base(i32 %pe)
  %pf = add i64 %pb, @SYNC_POOL@
  %seen = call i64 @td_spin(i64 %pf, i32 32, i32 @PLUS_ONE@, i64 %count, i64 @KIND_BARRIER_PE@, i32 %site)
  br label %pe.next
pe.next:
  %pen = add i32 %pe, %k
  br label %pe.cond
after:
  %first = icmp eq i32 %cta, 0
  %store = and i1 %t0, %first
  br i1 %store, label %st, label %end
st:
  call void @td_st_rel32(i64 %ctr, i32 %count32)
  br label %end
end:
  call void @td_grid_barrier(i32 %site)
  ret void
}

attributes #0 = { alwaysinline convergent nounwind }
attributes #1 = { alwaysinline convergent nounwind }
attributes #2 = { convergent }
"""


def _helpers() -> str:
    from triton_dist.symm_heap import RESERVED_BYTES
    assert GRID_GEN_OFFSET + 64 <= RESERVED_BYTES
    subs = {"SLOTS": STATE_SLOTS, "BASES": STATE_BASES, "RANK": STATE_RANK, "N_PES": STATE_N_PES,
            "HEAP_SIZE": STATE_HEAP_SIZE, "REPORT": STATE_REPORT, "TIMEOUT": STATE_TIMEOUT_NS,
            "MODULE": STATE_MODULE, "PLUS_ONE": CMP_PLUS_ONE, "BAD_PE": KIND_BAD_PE,
            "BAD_POINTER": KIND_BAD_POINTER, "KIND_WAIT": KIND_WAIT, "KIND_BARRIER_GRID": KIND_BARRIER_GRID,
            "KIND_BARRIER_PE": KIND_BARRIER_PE, "SLOT_BYTES": S.SIGNAL_SLOT_BYTES,
            "GRID_COUNT": GRID_COUNT_OFFSET, "GRID_GEN": GRID_GEN_OFFSET,
            "SYNC_COUNTER": SYNC_COUNTER_OFFSET, "SYNC_POOL": SYNC_POOL_OFFSET,
            "SIG_ADD": S.ACLSHMEM_SIGNAL_ADD}
    text = _HELPERS
    for k, v in subs.items():
        text = text.replace(f"@{k}@", str(v))
    return text


def _define(symbol: str, params: list[tuple[str, str]], ret: str, body: list[str]) -> str:
    args = ", ".join(f"{t} %{n}" for n, t in params)
    lines = "\n".join("  " + b for b in body)
    return f"define {ret} @{symbol}({args}) #1 {{\n{lines}\n}}\n"


def _exports() -> dict[str, str]:
    """symbol -> LLVM definition, for every aclshmem symbol a kernel can call."""
    out: dict[str, str] = {}
    site = ("site", "i32")

    def add(symbol, params, ret, body):
        out[symbol] = _define(symbol, params, ret, body)

    # ids
    for sym, slot in (("aclshmem_my_pe", STATE_RANK), ("aclshmem_n_pes", STATE_N_PES)):
        add(sym, [], "i32", [f"%r = call i32 @td_get32(i32 {slot})", "ret i32 %r"])
    for sym, slot in (("aclshmem_team_my_pe", STATE_RANK), ("aclshmem_team_n_pes", STATE_N_PES)):
        # only ACLSHMEM_TEAM_WORLD exists; any other team is invalid: -1, as OpenSHMEM says
        add(sym, [("team", "i32")], "i32",
            [f"%v = call i32 @td_get32(i32 {slot})", f"%w = icmp eq i32 %team, {S.ACLSHMEM_TEAM_WORLD}",
             "%r = select i1 %w, i32 %v, i32 -1", "ret i32 %r"])
    # world -> world is the identity for a PE in range; anything else is invalid: -1
    add("aclshmem_team_translate_pe", [("src", "i32"), ("pe", "i32"), ("dst", "i32")], "i32",
        [f"%n = call i32 @td_get32(i32 {STATE_N_PES})", f"%ws = icmp eq i32 %src, {S.ACLSHMEM_TEAM_WORLD}",
         f"%wd = icmp eq i32 %dst, {S.ACLSHMEM_TEAM_WORLD}", "%lo = icmp sge i32 %pe, 0",
         "%hi = icmp slt i32 %pe, %n", "%a = and i1 %ws, %wd", "%b = and i1 %lo, %hi", "%ok = and i1 %a, %b",
         "%r = select i1 %ok, i32 %pe, i32 -1", "ret i32 %r"])
    # addresses
    ptr_body = ["%a = ptrtoint ptr addrspace(1) %p to i64", "%r = call i64 @td_translate(i64 %a, i32 %pe, i32 %site)",
                "%q = inttoptr i64 %r to ptr addrspace(1)", "ret ptr addrspace(1) %q"]
    for t in S.TYPE_NAMES.values():          # dl.symm_at and libshmem_device.remote_ptr
        add(S.DL_OPS["symm_at"].symbol_for(t), [("p", PTR), ("pe", "i32"), site], PTR, ptr_body)
    # signals
    add("aclshmemx_signal_op", [("sig", PTR), ("val", "i32"), ("op", "i32"), ("pe", "i32"), site], "i32",
        ["call void @td_signal(ptr addrspace(1) %sig, i32 %val, i32 %op, i32 %pe, i32 %site)", "ret i32 0"])
    add("aclshmem_int32_p", [("dst", PTR), ("val", "i32"), ("pe", "i32"), site], "i32",
        [f"call void @td_signal(ptr addrspace(1) %dst, i32 %val, i32 {S.ACLSHMEM_SIGNAL_SET}, i32 %pe, i32 %site)",
         "ret i32 0"])
    for sym in ("aclshmem_int64_p", "aclshmem_uint64_p"):
        add(sym, [("dst", PTR), ("val", "i64"), ("pe", "i32"), site], "i32",
            ["call void @td_p64(ptr addrspace(1) %dst, i64 %val, i32 %pe, i32 %site)", "ret i32 0"])
    # waits
    for t in WAIT_TYPES:
        ty = LLVM_TYPES[t]
        bits = 64 if ty == "i64" else 32
        widen = "%w = sext i32 %v to i64" if bits == 32 else "%w = add i64 %v, 0"
        add(S.DL_OPS["wait"].symbol_for(t), [("p", PTR), ("n", "i32"), ("v", ty), site], "i32",
            ["%a = ptrtoint ptr addrspace(1) %p to i64", widen,
             f"call void @td_wait_slots(i64 %a, i32 %n, i64 %w, i32 {bits}, i32 %site)", "ret i32 0"])
    add("aclshmem_signal_wait_until", [("sig", PTR), ("cmp", "i32"), ("v", "i32"), site], "i32",
        ["%a = ptrtoint ptr addrspace(1) %sig to i64", "%w = sext i32 %v to i64",
         f"%x = call i64 @td_spin(i64 %a, i32 32, i32 %cmp, i64 %w, i64 {KIND_SIGNAL_WAIT}, i32 %site)",
         "call void @td_bar()", "%r = trunc i64 %x to i32", "ret i32 %r"])
    # tokens: the value itself (the wait before it is a memory barrier to LLVM and Triton)
    for t, ty in LLVM_TYPES.items():
        add(S.DL_OPS["consume_token"].symbol_for(t), [("v", ty), ("tok", "i32")], ty, [f"ret {ty} %v"])
        for rank in (1, 2, 3):
            add(S.DL_OPS["consume_token"].symbol_for(f"{t}_ptr_{rank}d"), [("v", PTR), ("tok", "i32")], PTR,
                [f"ret {PTR} %v"])
    # RMA
    rma = [("dst", PTR), ("src", PTR), ("nbytes", "i32"), ("pe", "i32"), site]
    for t in S.TYPE_NAMES.values():
        for op in ("putmem", "putmem_nbi"):
            add(S.SHMEM_OPS[op].symbol_for(t), rma, "i32",
                ["call void @td_rma(ptr addrspace(1) %dst, ptr addrspace(1) %src, i32 %nbytes, i32 %pe, i32 %site, i1 true)",
                 "ret i32 0"])
        for op in ("getmem", "getmem_nbi"):
            add(S.SHMEM_OPS[op].symbol_for(t), rma, "i32",
                ["call void @td_rma(ptr addrspace(1) %dst, ptr addrspace(1) %src, i32 %nbytes, i32 %pe, i32 %site, i1 false)",
                 "ret i32 0"])
        for op in ("putmem_signal", "putmem_signal_nbi"):
            add(S.SHMEM_OPS[op].symbol_for(t),
                [("dst", PTR), ("src", PTR), ("nbytes", "i32"), ("sig", PTR), ("val", "i32"), ("op", "i32"),
                 ("pe", "i32"), site], "i32",
                ["call void @td_rma(ptr addrspace(1) %dst, ptr addrspace(1) %src, i32 %nbytes, i32 %pe, i32 %site, i1 true)",
                 "call void @td_signal(ptr addrspace(1) %sig, i32 %val, i32 %op, i32 %pe, i32 %site)", "ret i32 0"])
    # ordering and barriers
    for sym in ("aclshmem_quiet", "aclshmem_fence"):
        add(sym, [], "i32", ["call void @td_bar()", "call void @td_fence_sys()", "ret i32 0"])
    for sym in ("aclshmem_barrier_all", "aclshmemx_barrier_all_vec"):
        add(sym, [site], "i32", ["call void @td_barrier_all(i32 %site)", "ret i32 0"])
    for sym in ("aclshmem_barrier", "aclshmemx_barrier_vec"):     # only the world team exists here
        add(sym, [("team", "i32"), site], "i32", ["call void @td_barrier_all(i32 %site)", "ret i32 0"])
    return out


EXPORTS = _exports()
SYMBOLS = frozenset(EXPORTS)


def _frontend_digest() -> str:
    """Hash of the Python that decides what kernels call: Triton's cache key covers a kernel's
    source and this library's bitcode, not our emitter, so the bitcode carries this hash."""
    import triton_dist
    import triton_dist.language as dl
    from triton_dist.language import _emit
    from triton_dist.language.extra.ascend import libshmem_device

    h = hashlib.sha256()
    for path in [m.__file__ for m in (S, dl, _emit, libshmem_device)] + [_EMIT_PY, triton_dist.__file__]:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:32]


# emit.py's source, hashed by _frontend_digest; read as a file, not imported: emit imports this
# module's tables, so importing it here was an import cycle (docs/index.md "Layers")
_EMIT_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "emit.py")


def ir_text() -> str:
    version = f'@triton_dist_frontend = internal constant [32 x i8] c"{_frontend_digest()}"\n'
    return _helpers() + version + "\n" + "\n".join(EXPORTS[s] for s in sorted(EXPORTS))


def _cache_dir() -> str:
    return os.environ.get("TRITON_DIST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "triton_dist")


def bitcode_path() -> str:
    """The library as a bitcode file (built once per content, then reused)."""
    text = ir_text()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(_cache_dir(), f"{LIBNAME}-{digest}.bc")
    if os.path.exists(path):
        return path
    try:
        import llvmlite.binding as llvm
    except ImportError:
        raise TritonDistError("backend 'cuda' assembles its device library with llvmlite, which is not installed: "
                              "pip install llvmlite") from None
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as e:
        raise TritonDistError(f"the CUDA device library does not assemble (a triton_dist bug): {e}") from None
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(module.as_bitcode())
        os.replace(tmp, path)        # atomic: concurrent ranks never read half a file
    except OSError as e:             # a read-only HOME, a path under a file: one line saying what to do
        raise TritonDistError(f"backend 'cuda' cannot write its device library to {os.path.dirname(path)} "
                              f"({e.strerror or e}); set TRITON_DIST_CACHE_DIR to a writable directory") from None
    return path


def decode_report(values, module_names) -> dict:
    """The report record (REPORT_SLOTS int64s) as a dict of named fields, plus the kernel name."""
    rec = dict(zip(REPORT_FIELDS, (int(v) for v in values)))
    mid = rec["module"]
    rec["kernel"] = module_names[mid] if 0 <= mid < len(module_names) else "?"
    return rec
