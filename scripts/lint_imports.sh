#!/usr/bin/env bash
# The import contracts of pyproject.toml ([tool.importlinter], docs/index.md "Layers") checked
# by import-linter.  sim/, backend_ascend/ and backend_cuda/ sit at the top of the repository
# but install as triton_dist.sim, ... (package-dir): import-linter reads packages from the file
# tree, where triton_dist/ holds no sim/, so the installed layout is laid out here with
# symbolic links (nothing is copied or imported; grimp parses the files, function-level
# imports included).
set -euo pipefail
root="${TRITON_DIST_LINT_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"   # another tree: tests/test_layers.py
py="${PYTHON:-$root/.venv/bin/python}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/triton_dist"
for entry in "$root"/triton_dist/*; do
  case "$(basename "$entry")" in __pycache__) ;; *) ln -s "$entry" "$stage/triton_dist/" ;; esac
done
for folder in sim backend_ascend backend_cuda; do ln -s "$root/$folder" "$stage/triton_dist/$folder"; done
cd "$stage"
PYTHONPATH="$stage" "$py" -c 'import sys; from importlinter.cli import lint_imports_command as c; sys.argv[0] = "lint-imports"; c()' \
  --no-cache "$root/pyproject.toml" "$@"
