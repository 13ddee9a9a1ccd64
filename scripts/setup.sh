#!/usr/bin/env bash
# Set up .venv with triton_dist for the simulator (the `sim` extra: torch==2.13.0 CPU, stock
# triton 3.5 to 3.7, here TRITON_DIST_TRITON, default 3.6.0) and its test tools (the `test` extra, which includes AscendNPU-IR's
# bishengir-opt, a ~160 MB wheel, to verify the HIVM the Ascend lowering emits).  Cheap when
# already done: the install is skipped while pyproject.toml is unchanged since the last
# successful install.  On an NPU host install ".[npu]" instead (docs/ascend.md): the
# simulator's stock triton would replace triton-ascend.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.triton_dist-installed
triton_version=${TRITON_DIST_TRITON:-3.6.0}
case "$triton_version" in
  3.8.*|3.9.*)   # outside the sim extra (pyproject.toml): pip could not resolve it; say what to do instead
    echo "[setup] triton $triton_version is outside the sim extra's range (triton>=3.5,<3.8: the lines whose frontend" \
         "gives block pointers as triton-ascend's does, triton_dist/language/block_pointers.py); the simulator runs on" \
         "it in a venv of its own: bash scripts/triton_venv.sh $triton_version" >&2
    exit 1;;
esac
want="$(sha256sum pyproject.toml | cut -d' ' -f1) triton==$triton_version"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing triton_dist[sim,test] (torch==2.13.0 CPU, triton==$triton_version, ascendnpu-ir==1.2.0, pytest)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  # torch is pinned exactly, so pip takes the CPU wheel on this machine's disk.
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[sim,test]" "triton==$triton_version"
  echo "$want" > "$stamp"
else
  echo "[setup] .venv is up to date"
fi
# triton-ascend's ttadapter (triton-adapter-opt), for the NPU compile checks (docs/ascend.md): taken
# out of the triton-ascend==3.2.0 wheel with `pip download` (never installed: it would replace
# stock triton) into .venv/share/triton_dist, sha256-checked; a no-op when already there.  On a
# machine where it cannot be had (not x86_64 Linux, offline) this says so and the checks skip.
.venv/bin/python -m triton_dist.backend_ascend.toolchain fetch
