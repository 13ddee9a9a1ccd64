"""The oracle of the conformance tests: a cases module run by Triton's plain interpreter in a
subprocess without triton_dist (TRITON_INTERPRET=1, every TRITON_DIST* variable removed); the
module prints its outcomes as JSON on its last line."""
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def outcomes(cases_module: str, timeout: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_DIST")}
    env["TRITON_INTERPRET"] = "1"
    p = subprocess.run([sys.executable, str(HERE / cases_module)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=HERE)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
