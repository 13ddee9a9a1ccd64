# launch() without a backend named runs on the simulator in the test suite, also on a GPU or
# NPU machine (where TRITON_DIST_BACKEND=auto would pick the device): the tests that do not take
# the `backend` fixture assert what the simulator does.  The kernel mode itself is chosen per
# launch (sim/interp.py), so `--backend sim,cuda` runs both variants in this one session.
import os

os.environ.setdefault("TRITON_DIST_BACKEND", "sim")
import triton_dist  # noqa: E402,F401

pytest_plugins = ["pytester"]
