#!/usr/bin/env bash
# Set up, then run the main example: a distributed kernel on 4 simulated ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/hello_allgather.py "$@"
