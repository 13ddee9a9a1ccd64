#!/usr/bin/env bash
# Make .venv-triton-ascend-double: stock triton 3.5.1 (hard links to .venv-triton-3.5.1's files)
# with the test doubles of triton-ascend's main line laid over it
# (tests/doubles/triton_ascend_main/README.md says what they are and what stays unverified).
# Cheap when already done (a stamp of the doubles' contents).  Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/triton_venv.sh 3.5.1 >/dev/null
src=.venv-triton-3.5.1
venv=.venv-triton-ascend-double
doubles=tests/doubles/triton_ascend_main
want=$(cat "$src/.stamp" $(find "$doubles" -type f -name '*.py' | sort) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  echo "[triton_ascend_double] creating $venv" >&2
  rm -rf "$venv"
  .venv/bin/python -m venv --without-pip "$venv"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  ssite=$("$src/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  cp -al "$ssite/triton" "$ssite"/triton-*.dist-info "$site/"
  cp "$ssite"/zz_triton_dist_main_venv.pth "$site/"
  # the files the doubles change are new files, never writes through the hard links
  rm -rf "$site/triton/runtime/__pycache__" "$site/triton/runtime/interpreter.py"
  cp "$ssite/triton/runtime/interpreter.py" "$site/triton/runtime/interpreter.py"
  "$venv/bin/python" "$doubles/patch_interpreter.py" "$site/triton/runtime/interpreter.py"
  cp "$doubles/runtime/ascend_interpreter.py" "$site/triton/runtime/"
  mkdir -p "$site/triton/language/extra/cann/extension" "$site/triton/backends/ascend"
  rm -rf "$site/triton/language/extra/__pycache__"
  cp "$doubles/language/extra/cann/__init__.py" "$site/triton/language/extra/cann/"
  cp "$doubles"/language/extra/cann/extension/*.py "$site/triton/language/extra/cann/extension/"
  echo "$want" > "$venv/.stamp"
fi
echo "$venv/bin/python"
