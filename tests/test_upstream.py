"""Upstream Ascend scenarios (our own versions, tests/upstream_scenarios/, evidence F) run as
upstream writes its host code -- `import shmem`, hccl, torch_npu, .npu() -- through the
compatibility layer: `triton-dist run -n N --shmem-compat script.py` (issue 15 §1).  Each
script asserts its results against torch or hand-derived values and exits non-zero otherwise.
Also: the layer never shadows a real package, and teams follow the device library's rules."""
import os
import sys
import types

import pytest

from triton_dist.cli import main

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_scenarios")

SCENARIOS = [("my_pe", 2), ("symm_at", 2), ("signal_op", 2), ("put_get", 2),
             ("barrier_ops", 2), ("barrier_ops", 4), ("ag_gemm", 2), ("gemm_rs", 2), ("gemm_allreduce", 2)]


@pytest.mark.parametrize("name,n", SCENARIOS, ids=[f"{s}-{n}" for s, n in SCENARIOS])
def test_upstream_scenario_runs_through_the_compat_layer(name, n, capfd):
    rc = main(["run", "-n", str(n), "--shmem-compat", "--timeout", "120", os.path.join(HERE, f"{name}.py")])
    err = capfd.readouterr().err
    assert rc == 0, err
    assert f"{n} ranks finished" in err


def test_wait_notify_as_upstream_writes_it_is_flagged(capfd):
    """Upstream's producer stores the data and notifies with no fence in between (evidence D:
    unordered on the NPU by the code read).  The simulator says so, in one of three words for the
    one bug, whichever the run meets first: the consumer reads data that has not landed (as a stale
    value, or, the data never written before, as the init check's read of memory nothing wrote:
    aclshmem_malloc does not zero), or the race check names the store and the notify."""
    rc = main(["run", "-n", "2", "--shmem-compat", "--race-check", os.path.join(HERE, "wait_notify.py")])
    err = capfd.readouterr().err
    assert rc == 1, err
    assert ("rank 0 read" in err
            or ("UninitializedReadError" in err and "wait_notify.py:37 (consumer)" in err)
            or ("wait_notify.py:25 (producer)" in err and "fence()" in err)), err


def test_wait_notify_with_a_fence_is_clean(capfd):
    rc = main(["run", "-n", "2", "--shmem-compat", "--race-check", os.path.join(HERE, "wait_notify.py"), "--fence"])
    assert rc == 0, capfd.readouterr().err


def test_a_scenario_that_is_wrong_fails(tmp_path, capfd):
    """The scenarios' checks can fail: ag_gemm with B changed after the golden is taken."""
    src = open(os.path.join(HERE, "ag_gemm.py")).read()
    bad = src.replace("    golden = (torch.cat(gathered).float() @ b.float()).half()",
                      "    golden = (torch.cat(gathered).float() @ (b.float() + 0.5)).half()")
    assert bad != src
    p = tmp_path / "ag_gemm_bad.py"
    p.write_text(bad)
    for f in ("common.py",):
        (tmp_path / f).write_text(open(os.path.join(HERE, f)).read())
    assert main(["run", "-n", "2", "--shmem-compat", str(p)]) == 1
    assert "Mismatched elements" in capfd.readouterr().err


def test_shmem_compat_refuses_to_shadow_a_real_shmem(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "shmem"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    script = tmp_path / "s.py"
    script.write_text("import shmem\nassert not hasattr(shmem, 'REAL')\n")
    with pytest.raises(SystemExit) as e:
        main(["run", "-n", "1", "--shmem-compat", str(script)])
    assert e.value.code == 2
    assert "a real 'shmem' is installed here" in capsys.readouterr().err


def test_cann_extension_never_shadows_triton_ascend(monkeypatch):
    from triton_dist.sim.compat import cann
    real_parent = types.ModuleType(cann.PARENT)
    real_ext = types.ModuleType(cann.MODULE)
    monkeypatch.setitem(sys.modules, cann.PARENT, real_parent)
    monkeypatch.setitem(sys.modules, cann.MODULE, real_ext)
    assert cann.install() is False
    assert sys.modules[cann.MODULE] is real_ext


def test_cann_extension_is_importable_on_the_simulator():
    from triton.language.extra.cann.extension import sub_vec_id, sub_vec_num, sync_block_all  # noqa: F401
    import triton.language.extra.cann.extension as ext
    assert ext.sub_vec_num() == 2


def test_teams_follow_the_device_library():
    """Hand-derived from hicann/shmem's team code (evidence E): the odd ranks of 4."""
    from triton_dist.sim import teams
    rts = [types.SimpleNamespace(rank=r, world_size=4) for r in range(4)]
    odd = [teams.split_strided(rt, 0, 1, 2, 2) for rt in rts]
    assert odd[0] == odd[2] == -1 and odd[1] == odd[3] == 1       # slot 1: the first free after the world
    rt3 = rts[3]
    assert (teams.my_pe(rt3, 1), teams.n_pes(rt3, 1)) == (1, 2)
    assert (teams.my_pe(rts[0], -1), teams.n_pes(rts[0], -1)) == (-1, -1)
    assert teams.translate_pe(rt3, 1, 0, 0) == 1 and teams.translate_pe(rt3, 1, 1, 0) == 3
    assert teams.translate_pe(rt3, 0, 3, 1) == 1 and teams.translate_pe(rt3, 0, 2, 1) == -1
    assert teams.translate_pe(rt3, 1, 2, 0) == -1                  # pe beyond the team's size
    assert teams.translate_pe(rt3, -1, 0, 0) == -1
    # nested: every second member of the odd team = world PE 1 only
    assert teams.split_strided(rts[1], 1, 0, 2, 1) == 2 and teams.split_strided(rt3, 1, 0, 2, 1) == -1
    assert teams.translate_pe(rts[1], 2, 0, 0) == 1
    with pytest.raises(Exception, match="need 0 <= start"):
        teams.split_strided(rt3, 0, 4, 1, 1)
    teams.destroy(rt3, 1)
    assert teams.n_pes(rt3, 1) == -1
