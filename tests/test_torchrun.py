"""The same script runs as simulated ranks under torchrun: named heaps, unlinked at once."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_example_under_torchrun_leaves_nothing_in_dev_shm():
    before = {n for n in os.listdir("/dev/shm") if n.startswith("tdist-")}
    env = dict(os.environ, TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
                        str(ROOT / "examples" / "hello_allgather.py")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "allgather on 2 ranks: OK" in p.stdout
    after = {n for n in os.listdir("/dev/shm") if n.startswith("tdist-")}
    assert after <= before


def test_init_without_ranks_says_what_to_do():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    code = "import triton_dist\ntry:\n    triton_dist.init()\nexcept triton_dist.TritonDistError as e:\n    print(e)\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert "torchrun" in p.stdout and "launch" in p.stdout
