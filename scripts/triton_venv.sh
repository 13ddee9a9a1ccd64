#!/usr/bin/env bash
# Make .venv-triton-VERSION: stock triton==VERSION over everything else of .venv (torch, numpy,
# pytest, triton_dist itself), for running the tests on another supported triton.
#
# The extra venv holds only triton; a .pth file adds .venv's site-packages behind it, so its
# triton is found first and nothing else is installed twice.  Cheap when already done (a stamp),
# and pip's wheel cache makes a re-creation cheap too.  Prints the venv's python.
#   bash scripts/triton_venv.sh 3.5.1 && .venv-triton-3.5.1/bin/python -m pytest tests/test_canary.py
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/triton_venv.sh TRITON_VERSION}
[ -x .venv/bin/python ] || bash scripts/setup.sh >&2
venv=.venv-triton-$version
main_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "triton==$version $main_site" ]; then
  echo "[triton_venv] creating $venv (triton==$version)" >&2
  rm -rf "$venv"
  .venv/bin/python -m venv --without-pip "$venv"
  # triton has no requirements of its own that .venv lacks; --no-deps keeps torch out
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
      --target "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
      "triton==$version" >&2
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # the .pth's import line runs site.addsitedir, which also runs .venv's own .pth files (the
  # editable install of triton_dist)
  echo "import site; site.addsitedir('$main_site')" > "$site/zz_triton_dist_main_venv.pth"
  echo "triton==$version $main_site" > "$venv/.stamp"
fi
echo "$venv/bin/python"
