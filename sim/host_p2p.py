"""torch.distributed point-to-point calls in rank host code: scheduling points and race edges.

gloo's send is a rendezvous: it returns only once the receiver has posted the matching
receive (measured here with torch 2.13's gloo: a 4-element send waits the 3 s its
receiver sleeps), and a receive waits for its send.  Under random/pct exactly one task
runs at a time, so a rank blocking in gloo while holding the baton waits for a peer that
never gets it ("launch timed out"), and under the free schedule the race detector saw no
order between what the sender did before and what the receiver does after (a false race).

So each call is split into what gloo lets us split it into (torch's own send/recv are
isend/irecv + wait):
- the post (isend/irecv, which never block): a scheduling point; the schedule counts it
  (per sender, receiver and tag) and the sender's log gets a release;
- the wait: under random/pct the rank first passes the baton until the partner has posted
  the matching call (a spin: a deadlock -- two ranks that both receive first -- is reported
  at once, and a partner that returned without posting is named); then gloo completes the
  transfer by itself (its own threads move the data; neither main thread is needed) and
  the receiver's log gets the acquire of the matching send's release.
The n-th send from a to b with tag t matches the n-th receive on b from a with tag t (gloo
matches by tag, in order).  While a call waits, the status board shows the host as blocked
in it (so the free schedule's watchdog sees it like a host collective).
"""
from __future__ import annotations

import functools
import threading

from . import board as B
from .call_site import caller
from . import context, host_collectives

SEND, RECV = 0, 1
NAMES = {"send": (SEND, True), "recv": (RECV, True), "isend": (SEND, False), "irecv": (RECV, False)}
_local = threading.local()


def install(backend) -> None:
    """Wrap torch.distributed's point-to-point calls in this (rank) process; idempotent."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    posts = {SEND: getattr(c10d.isend, "_triton_dist_orig", c10d.isend),
             RECV: getattr(c10d.irecv, "_triton_dist_orig", c10d.irecv)}
    for name, (kind, blocking) in NAMES.items():
        wrapped = None
        for mod in (dist, c10d):
            orig = getattr(mod, name, None)
            if orig is None or getattr(orig, "_triton_dist_orig", None) is not None:
                continue
            wrapped = wrapped or _wrap(backend, name, kind, blocking, orig, posts[kind])
            setattr(mod, name, wrapped)


def _sequence(kind, src, dst, tag) -> int:
    """This process's count of its posts on (kind, src, dst, tag): the n of the n-th message."""
    seen = getattr(_local, "seq", None)
    if seen is None:
        seen = _local.seq = {}
    key = (kind, src, dst, tag)
    seen[key] = seen.get(key, 0) + 1
    return seen[key]


class Request:
    """What isend/irecv return here: gloo's work, whose wait() is a scheduling point first."""

    def __init__(self, work, finish):
        self._work, self._finish, self._done = work, finish, False

    def wait(self, timeout=None):
        if not self._done:
            self._done = True
            self._finish(self._work)
        return True

    def is_completed(self):
        return self._done or self._work.is_completed()

    def __getattr__(self, name):          # is_success, exception, _source_rank, ...
        return getattr(self._work, name)


def _wrap(backend, name, kind, blocking, orig, post):
    what = f"torch.distributed.{name}"

    @functools.wraps(orig)
    def p2p(tensor, peer=None, group=None, tag=0, **kw):
        peer = kw.pop("dst" if kind == SEND else "src", peer)     # send(t, dst=1), recv(t, src=0)
        rt = context._runtime
        if rt is None or host_collectives._busy() or getattr(_local, "posting", False):
            # posting: torch's own call re-enters, through a torch function mode (the race
            # check's host accesses, sim/race/host.py) that is handed c10d's global, i.e. us
            return orig(tensor, peer, group, tag, **kw)
        import torch.distributed as dist
        me = rt.rank
        free = rt.sched.name == "free"
        whole_world = group is None or group is dist.group.WORLD
        if peer is None and whole_world:    # batch_isend_irecv names the peer by its group rank
            peer = kw.get("group_dst" if kind == SEND else "group_src")
        if not whole_world or peer is None:
            if not free:
                from triton_dist.errors import TritonDistError
                why = (f"a subgroup" if not whole_world else
                       f"no {'dst' if kind == SEND else 'src'} (a receive from any rank)")
                raise TritonDistError(
                    f"{what} with {why}: under schedule={rt.sched.name!r} a point-to-point call is a "
                    f"scheduling point matched by sender and receiver rank in the default group; pass "
                    f"{'dst' if kind == SEND else 'src'}= a rank of the default group, or use schedule='free'")
            if not whole_world:
                return orig(tensor, peer, group, tag, **kw)
        src, dst = (me, peer) if kind == SEND else (peer, me)
        where = _caller()
        rt.sched.point("host " + name)
        _local.posting = True
        try:
            work = post(tensor, None if "group_dst" in kw or "group_src" in kw else peer, group, tag, **kw)
        finally:
            _local.posting = False
        seq = None
        if peer is not None:
            seq = _sequence(kind, src, dst, tag)
            if kind == SEND and rt.observers is not None:
                rt.observers.p2p_send(src, dst, tag, seq)
            rt.sched.p2p_posted(kind, src, dst, tag)

        def finish(w):
            _complete(rt, what, where, kind, src, dst, tag, seq, w)

        if blocking:
            return _complete(rt, what, where, kind, src, dst, tag, seq, work)
        return Request(work, finish)

    p2p._triton_dist_orig = orig
    return p2p


def _complete(rt, what, where, kind, src, dst, tag, seq, work):
    """Wait for a posted call: first (random/pct) until the partner posted, then in gloo."""
    peer = dst if kind == SEND else src
    rt.board.set(rt.rank, -1, B.HOST_COLLECTIVE, f"{what} {'to' if kind == SEND else 'from'} rank "
                 f"{'any' if peer is None else peer}", where)
    if rt.tracer:
        rt.tracer.begin(what)
    try:
        if seq is not None:
            rt.sched.p2p_wait(what, where, kind, src, dst, tag, seq)
        with host_collectives.inside():
            try:
                work.wait()
            except RuntimeError as e:
                if peer is not None and (host_collectives.peer_lost(e) or
                                         int(rt.board.slot(peer, -1)["state"]) == B.DONE):
                    raise partner_gone(what, where, kind, peer, e) from None
                raise
        if kind == RECV:
            if src is None:                 # a receive from any rank (free schedule only)
                src = int(work._source_rank())
                seq = _sequence(RECV, src, dst, tag)
            if rt.observers is not None:
                rt.observers.p2p_recv(src, dst, tag, seq)
            return src
        return None
    finally:
        rt.board.set_state(rt.rank, -1, B.RUNNING)
        if rt.tracer:
            rt.tracer.end(what)


def partner_gone(what, where, kind, peer, cause=None):
    """The error of a send or receive whose partner rank returned without the matching call."""
    from triton_dist.errors import TritonDistError
    raw = f" (gloo: {str(cause).splitlines()[0][:200]})" if cause is not None and str(cause) else ""
    other = "receive (recv/irecv)" if kind == SEND else "send (send/isend)"
    return TritonDistError(
        f"{what} at {where} can never complete: rank {peer} returned from its host code without the "
        f"matching {other}{raw}. Every send needs a receive on its destination rank, with the same tag, "
        f"in the same order")


def _caller():
    return caller()
