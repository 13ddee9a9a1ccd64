#!/usr/bin/env bash
# Set up, then run the main example: AllGather+GEMM from the kernel library, overlapped
# tile by tile, on 4 simulated ranks, checked against torch.distributed + torch.matmul.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/ag_gemm.py "$@"
