#!/usr/bin/env bash
# docs/versions.md's table of supported triton releases, measured: for each venv (the default .venv
# and .venv-triton-VERSION made by scripts/triton_venv.sh), whether `import triton_dist`
# works, whether every example runs (4 ranks), and the conformance + kernel-library tests
# (tests/test_canary.py, test_primitives.py, test_kernels.py, all of them).  Prints markdown
# rows; logs go to $LOGS (default /tmp/triton_versions).
#   bash scripts/triton_versions_table.sh 3.5.1 3.6.0 3.7.1 3.8.0 3.9.0
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${LOGS:-/tmp/triton_versions}
mkdir -p "$LOGS"
default=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("triton"))')
for version in "$@"; do
  if [ "$version" = "$default" ]; then py=.venv/bin/python; else py=$(bash scripts/triton_venv.sh "$version"); fi
  log=$LOGS/$version
  mkdir -p "$log"
  if "$py" -c "import triton_dist" >"$log/import.log" 2>&1; then imp=ok; else imp="FAIL: $(tail -1 "$log/import.log")"; fi
  ex_ok=0; ex_n=0
  for ex in examples/*.py; do
    ex_n=$((ex_n + 1))
    if timeout 600 "$py" "$ex" >"$log/$(basename "$ex" .py).log" 2>&1; then ex_ok=$((ex_ok + 1)); fi
  done
  timeout 1800 "$py" -m pytest -n 2 -q -p no:cacheprovider tests/test_canary.py tests/test_primitives.py \
      tests/test_kernels.py >"$log/tests.log" 2>&1
  tests=$(grep -E "^[0-9]+ (passed|failed)|[0-9]+ passed" "$log/tests.log" | tail -1)
  echo "| $version | $imp | $ex_ok/$ex_n | $tests |"
done
