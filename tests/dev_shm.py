"""What a launch could leave in /dev/shm, for the tests that check it leaves nothing.

Heap segments (sim/heap.py names them tdist-*, and unlinks each at once) and the semaphores of
multiprocess's locks (sem.mp-*: multiprocess/synchronize.py names them '/mp-...').  Other names
belong to other processes (xdist workers, torch), which come and go on a shared machine; the
planted segments of tests/test_faults.py carry PLANTED_TAG and are not a launch's either."""
import os

PLANTED_TAG = "0123456789ab"


def ours() -> set:
    return {n for n in os.listdir("/dev/shm") if n.startswith(("tdist-", "sem.mp-")) and PLANTED_TAG not in n}
