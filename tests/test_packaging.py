"""The folders sim/, backend_ascend/, backend_cuda/ install under the triton_dist namespace
(issue 22 item 6): no user file or third-party package named `sim` can shadow them."""
import os
import pathlib
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = {"triton_dist": "triton_dist", "sim": "triton_dist.sim", "backend_ascend": "triton_dist.backend_ascend",
           "backend_cuda": "triton_dist.backend_cuda"}
PLUGIN = "triton_dist_pytest"


def _config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_under_its_namespaced_name():
    want = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            want.add(".".join((name,) + rel))
    # the one top-level name besides triton_dist: the pytest plugin's folder, installed again as
    # triton_dist_pytest so that pytest loads it without importing triton_dist (issue 22 item 5)
    want.add(PLUGIN)
    cfg = _config()
    assert set(cfg["packages"]) == want
    assert cfg["package-dir"] == {**{name: folder for folder, name in FOLDERS.items()}, PLUGIN: "triton_dist/pytest_plugin"}


def test_entry_points_name_only_namespaced_modules():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for group, entries in eps.items():
        for name, target in entries.items():
            assert target.split(".")[0] in ("triton_dist", PLUGIN), f"{group} {name} = {target}"


SCRIPT = """
import triton, triton.language as tl, torch
import triton_dist, triton_dist.language as dl

@triton.jit
def k(out):
    tl.store(out + dl.rank(), dl.rank() + 10)

def main():
    out = triton_dist.symm_tensor((2,), torch.int32)
    k[(1,)](out)
    triton_dist.barrier()
    return out.tolist()

if __name__ == "__main__":
    import triton_dist.sim.backend, triton_dist.backend_ascend, triton_dist.backend_cuda
    print("values", triton_dist.launch(main, world_size=2).values)
"""


def test_a_users_own_sim_py_beside_the_script_changes_nothing(tmp_path):
    for name in ("sim", "backend_ascend", "backend_cuda"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the user\\'s own {name}.py was imported')\n")
    (tmp_path / "script.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # rank r stores r + 10 into its own slot r
    assert "values [[10, 0], [0, 11]]" in r.stdout


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_the_wheel_holds_the_backends_under_triton_dist(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip(f"no build backend in this environment: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr
    wheel = next(tmp_path.glob("triton_dist-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for want in ("triton_dist/sim/backend.py", "triton_dist/sim/predict/profiles/atlas-a2.json",
                 "triton_dist/backend_ascend/hivm.py", "triton_dist/backend_cuda/devlib.py",
                 "triton_dist/language/extra/ascend/libshmem_device.py", f"{PLUGIN}/__init__.py"):
        assert want in names
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"triton_dist", PLUGIN}, tops
    # the build says nothing a user must read: setup printed ~45 lines of setuptools' warning that
    # triton_dist.sim.predict.profiles (the profiles' data folder) is absent from `packages`
    assert "absent from the `packages` configuration" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "Warning" not in r.stdout + r.stderr, r.stdout + r.stderr
