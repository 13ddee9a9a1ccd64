#!/usr/bin/env bash
# Set up, then run the whole test suite in parallel (pytest-xdist) on the default triton
# (.venv, scripts/setup.sh), and the conformance + kernel-library subset on the oldest and the
# newest supported stock triton and on the test doubles of triton-ascend's main line, each in
# its own venv (scripts/triton_venv.sh, scripts/triton_ascend_double.sh: only triton is
# installed there, over .venv's packages; cached, so a second run only checks stamps).
# TRITON_DIST_EXTRA_TRITONS="" skips the extra venvs.
#
# The whole suite also compiles every kernel of the kernel library, the examples and the upstream
# scenarios it launches with the real NPU compilers (--npu-compile, docs/ascend.md "The real
# compilers on every kernel"): a kernel they refuse fails the test that launched it; where the
# compilers cannot be had this says so and compiles nothing.  TRITON_DIST_NPU_COMPILE=0 leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NPU_COMPILE=()
if [ "${TRITON_DIST_NPU_COMPILE-1}" != 0 ]; then
  NPU_COMPILE=(--npu-compile --npu-compile-sources triton_dist/kernels,examples,tests/upstream_scenarios)
fi
bash scripts/lint_imports.sh      # the layers (pyproject.toml [tool.importlinter])
.venv/bin/python -m pytest -n auto -q "${NPU_COMPILE[@]}" "$@"
# the hivm backend (each kernel as the Ascend compilers made it, run on the CPU; docs/ascend.md
# "Running the compiled kernel on the CPU"): the tests that take the `backend` fixture on a subset
# (a vector, a cube and a mix kernel with distributed ops on 2 ranks, the conformance cases, the
# kernel corpus), each against its oracle (torch, Triton's plain interpreter); declared compiler
# findings are expected failures.  The whole suite above ran them on the simulator.  About 1 min.
# TRITON_DIST_HIVM=0 leaves it out (it needs the NPU compilers, as --npu-compile does).
if [ "${TRITON_DIST_HIVM-1}" != 0 ] && [ "${#NPU_COMPILE[@]}" != 0 ]; then
  echo "[test] the hivm backend: pytest --backend hivm on its CI subset"
  .venv/bin/python -m pytest -n auto -q --backend hivm \
    tests/test_hivm_backend.py::test_the_ci_subset_on_each_backend \
    tests/test_hivm_mix_order.py::test_the_ci_subset_mix_kernels_on_each_backend \
    tests/test_conformance.py::test_case_matches_the_plain_interpreter \
    tests/test_ascend_corpus.py::test_matches_torch
fi
# the tests that exercise the interpreter adapters (sim/tritonapi/): conformance of the device
# primitives and the kernel library against torch; the schedule sweeps and torchrun runs
# test the scheduler and the launcher, which do not depend on the triton release
# (tests/test_low_precision.py is left out here: on 3.5.1, after the other files in the same xdist
# worker, one of its launches hangs in host code 1 run in 2, a different test each time, not yet
# explained; it passes alone on 3.5.1 and 3.9.0 and in the whole suite above)
SUBSET=(tests/test_canary.py tests/test_primitives.py tests/test_kernels.py
        -k "not torchrun and not deterministic_schedules and not many_times_in_a_row")
for version in ${TRITON_DIST_EXTRA_TRITONS-3.5.1 3.9.0}; do
  py=$(bash scripts/triton_venv.sh "$version")
  echo "[test] triton $version: ${SUBSET[*]}"
  "$py" -m pytest -n auto -q "${SUBSET[@]}"
done
if [ -n "${TRITON_DIST_EXTRA_TRITONS-3.5.1 3.9.0}" ]; then
  py=$(bash scripts/triton_ascend_double.sh)
  echo "[test] triton-ascend main line (test doubles over 3.5.1)"
  "$py" -m pytest -n auto -q tests/test_canary.py tests/test_triton_ascend_main.py tests/test_core_split.py
fi
