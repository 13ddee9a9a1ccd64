# Import triton_dist before any test module so that kernels defined at module level are
# interpreted by the simulator (the default backend on a machine without an NPU).
import os

os.environ.setdefault("TRITON_DIST_BACKEND", "sim")
import triton_dist  # noqa: E402,F401

pytest_plugins = ["pytester"]
