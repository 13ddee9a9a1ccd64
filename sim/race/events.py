"""The event encodings shared by the recorder, the analysis and the report.

Access kinds (what an access does to memory), the operations (what the program called,
for the report's words) and the kinds of release a signal slot remembers.

A task's log (RaceRecorder, record.py) is a list of tuples, in program order:
  ("a", kind, op, line, runs, t_ns, cons)   an access: runs is an int64 [n, 2] array of
                                            [lo, hi) byte ranges; cons the heap offset of the
                                            consume_token'd tensor a load went through, or -1
  ("p", [access, ...])                      a put/get issued: the accesses its DMA queue does
  ("d", access)                             a store issued as a DMA (ascend models, sim/dma.py):
                                            done by the core's DMA-store stream, complete at
                                            the next ("Q",); later accesses of the same core to
                                            its bytes are ordered after it (the compiler's sync)
  ("r", rid, group, carry, chain)           a release: its id, the group it belongs to (a
                                            barrier, the end of a kernel, a collective) or
                                            None, the put number whose data it carries, and
                                            the releases it continues (ADDs, atomics)
  ("q", rids, groups, token)                an acquire of releases and of whole groups;
                                            token: a dl.wait's token (loads wait for
                                            consume_token), None for a full acquire
  ("Q",)                                    quiet: every issued transfer is complete
  ("D",)                                    the DMA-store stream is complete, the puts not (a
                                            releasing atomic, sim/stale.py)
  ("c", lo, token)                          consume_token: loads of the tensor at heap
                                            offset lo are ordered after the wait `token`
"""
from __future__ import annotations

# access kinds
READ, WRITE, ATOMIC, SYNC_READ, SYNC_WRITE, SYNC_ADD = range(6)

# what an access was, for reports: (verb, noun)
OPS = ["loads", "stores to", "atomically updates", "putmem reads", "putmem writes", "getmem reads",
       "getmem writes", "sets the signal", "adds to the signal", "waits on the signal",
       "putmem_nbi reads", "putmem_nbi writes", "getmem_nbi reads", "getmem_nbi writes",
       "putmem_signal reads", "putmem_signal writes", "reads", "writes"]     # the last two: host code (torch)
(OP_LOAD, OP_STORE, OP_ATOMIC, OP_PUT_SRC, OP_PUT_DST, OP_GET_SRC, OP_GET_DST, OP_SET, OP_ADD, OP_WAIT,
 OP_PUTNBI_SRC, OP_PUTNBI_DST, OP_GETNBI_SRC, OP_GETNBI_DST, OP_PUTSIG_SRC, OP_PUTSIG_DST,
 OP_HOST_READ, OP_HOST_WRITE) = range(len(OPS))

# what an access was, as a noun: "after that <noun>"
NOUNS = ["load", "store", "atomic update", "put", "put", "get", "get", "signal SET", "signal ADD", "wait",
         "putmem_nbi", "putmem_nbi", "getmem_nbi", "getmem_nbi", "putmem_signal", "putmem_signal",
         "host read", "host write"]

REL_SET, REL_ADD = 0, 1
MASK64 = (1 << 64) - 1
