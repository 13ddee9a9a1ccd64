"""At a failure: what the device model saw, most relevant first, in the failure's own text.

The launcher calls `attach(error, ...)` on every RankError, DeadlockError and
LaunchTimeoutError of a simulated launch.  It takes the findings the watchers recorded
(watch.py: fence, cache line, stale), adds the waits that were stuck on a slot nothing ever
signalled (`never`, worked out here from the status board and the signal table), ranks
them against the failure -- a finding at the address a stuck wait awaits first, then those
of the failing rank, then the newest -- and appends them to the error's message, with the
fix each one names.  `error.evidence` keeps them as a list of strings.
"""
from __future__ import annotations

from .. import board as B
from ..board import text
from .watch import CACHE_LINE, FENCE, NEVER, STALE

SHOWN = 6            # findings printed; the rest are counted
NEAREST = 3          # signalled slots named beside a `never`
LABELS = {FENCE: "fence", CACHE_LINE: "cache line", STALE: "stale cache line", NEVER: "never signalled"}
HEAD = "what the device model saw (most relevant first):"


def findings(ev, status, namer, world_size: int) -> tuple:
    """([(seq, kind, rank, core, addr, words)], the addresses stuck waits await)."""
    found = list(ev.all_findings())
    stuck = set()
    seq = max((f[0] for f in found), default=0)
    for rank in range(world_size):
        for core in range(status.cores):
            r = status.rec[rank, core]
            if int(r["state"]) != B.WAITING:
                continue
            addr = int(r["addr"])
            stuck.add(addr)
            if int(r["cond"]) == B.COND_NONE:
                continue            # a spin on a cached line (`stale` says why) or a local barrier
            words = _never(ev, namer, rank, core, r, addr)
            if words:
                seq += 1
                found.append((seq, NEVER, rank, core, addr, words))
    return found, stuck


def _never(ev, namer, rank, core, r, addr):
    """The words for a wait on addr if no signal op, atomic or put ever wrote it, else None."""
    if namer.heap_of(addr) is None or ev.signal(addr) is not None:
        return None
    writes, forgot = ev.writes_covering(addr)
    if writes or ev.full() or _changed(r, addr):
        return None
    span = namer.tensor_span(addr)
    near = ev.signalled_near(*span) if span is not None else []
    near = sorted(near, key=lambda s: abs(int(s["addr"]) - addr))[:NEAREST]
    names = []
    for s in near:
        op = "ADD of" if int(s["add"]) else "SET to"
        names.append(f"{namer.name(int(s['addr']), short=True)} ({op} {int(s['value'])} by rank {int(s['rank'])} "
                     f"core {int(s['core'])} at {text(s['site'])}{_times(int(s['count']))})")
    others = ("; the slots of that tensor that were signalled, nearest first: " + ", ".join(names)
              if names else "; no slot of that tensor was signalled at all")
    more = " (nor, as far as the last puts remembered go, a put)" if forgot else " and no put wrote it"
    what = "awaits " + str(B.value(r, "awaited")) if int(r["cond"]) != B.COND_CHANGES else "awaits a change"
    return (f"rank {rank} core {core}'s {text(r['op'])} at {text(r['where'])} {what} at "
            f"{namer.name(addr)}, which was never signalled during this launch: no notify, signal_op, int_p or "
            f"putmem_signal targeted it{more}, and it still holds what the wait sees (tl.atomic_* and host writes "
            f"are not told apart){others}. Check the slot the wait "
            f"computes against the slot and rank the signal targets")


def _changed(r, addr: int) -> bool:
    """Does the slot at addr (mapped here at the ranks' address) hold something other than
    what the stuck wait sees?  Then something wrote it (an atomic, the host)."""
    import ctypes
    n = int(r["nbytes"])
    if n not in (1, 2, 4, 8):
        return False
    raw = int.from_bytes(ctypes.string_at(addr, n), "little", signed=True)
    seen = B.value(r, "seen")
    return raw != seen and raw % (1 << 8 * n) != seen % (1 << 8 * n)


def _times(n: int) -> str:
    return "" if n <= 1 else f", {n} times"


def ranked(found, stuck, failing_rank) -> list:
    """The findings' words, most relevant first, each once."""
    def score(f):
        seq, kind, rank, core, addr, words = f
        return (addr in stuck, kind == NEVER, rank == failing_rank, seq)
    out, seen = [], set()
    for f in sorted(found, key=score, reverse=True):
        key = (f[1], f[5])
        if key not in seen:
            seen.add(key)
            out.append(f"[{LABELS.get(f[1], f[1])}] {f[5]}")
    return out


def section(items) -> str:
    if not items:
        return ""
    lines = [f"  {i + 1}. {w}" for i, w in enumerate(items[:SHOWN])]
    if len(items) > SHOWN:
        lines.append(f"  ... and {len(items) - SHOWN} more (error.evidence lists them all)")
    return "\n" + HEAD + "\n" + "\n".join(lines)


def attach(e, ev, status, namer, world_size: int) -> None:
    """Append what the device model saw to the failure e (RankError, DeadlockError,
    LaunchTimeoutError); e.evidence = the findings' words."""
    try:
        found, stuck = findings(ev, status, namer, world_size)
        items = ranked(found, stuck, getattr(e, "rank", None))
    except Exception as why:  # noqa: BLE001 - a failure must never be hidden by its explanation
        items = [f"(the evidence could not be read: {type(why).__name__}: {why})"]
    e.evidence = items
    add_text(e, section(items))


def add_text(e, more: str) -> None:
    """Append `more` to the message of a launch failure, keeping str(e) and e.args in step."""
    if not more:
        return
    e.message += more
    from triton_dist.errors import RankError
    e.args = (str(e),) if isinstance(e, RankError) else (e.message + ("\n" + e.report if e.report else ""),)
