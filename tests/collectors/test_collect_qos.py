"""collectors/qos.py: PFC, pause and trust of the RDMA netdevs, read-only, with what could not be read listed."""
import stat
from pathlib import Path

import pytest

from rdmadoctor.collectors import qos
from rdmadoctor.collectors.base import CollectContext, Unavailable


def _tool(bindir: Path, name: str, script: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _host(tmp_path: Path):
    ndevs = tmp_path / "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs"
    ndevs.mkdir(parents=True)
    (ndevs / "0").write_text("ens1f0\n")
    (ndevs / "1").write_text("ens1f0\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    return CollectContext(root=tmp_path, live=True, env={"PATH": str(bindir)}), bindir


def test_pfc_pause_and_trust_are_read_per_rdma_netdev(tmp_path):
    ctx, bindir = _host(tmp_path)
    _tool(bindir, "dcb", 'echo \'{"mbc":0,"delay":0,"prio_pfc":[{"prio":0,"enabled":false},'
                         '{"prio":3,"enabled":true}]}\'\n')
    _tool(bindir, "ethtool",
          'printf "Pause parameters for $2:\\nAutonegotiate:\\toff\\nRX:\\t\\toff\\nTX:\\t\\toff\\n"\n')
    _tool(bindir, "mlnx_qos", 'echo "DCBX mode: OS controlled"; echo "Priority trust state: dscp"\n')
    data = qos.collect(ctx)
    assert data["links"] == [{"netdev": "ens1f0", "pfc": {"enabled": [3], "raw": {"mbc": 0, "delay": 0}},
                              "pause": {"autoneg": False, "rx": False, "tx": False}, "trust": "dscp"}]


def test_a_netdev_that_does_not_support_dcb_is_unreadable_not_off(tmp_path):
    ctx, bindir = _host(tmp_path)
    _tool(bindir, "dcb", 'echo "Attribute failed policy validation" >&2; exit 2\n')
    data = qos.collect(ctx)
    assert data["links"][0]["pfc"] is None and data["links"][0]["pause"] is None
    assert {u["what"] for u in ctx.unreadable_list} == {"PFC of ens1f0", "pause of ens1f0"}


def test_no_rdma_netdev_and_saved_trees_are_unavailable(tmp_path):
    with pytest.raises(Unavailable, match="no netdev under an RDMA port"):
        qos.collect(CollectContext(root=tmp_path, live=True, env={"PATH": str(tmp_path)}))
    with pytest.raises(Unavailable, match="saved tree"):
        qos.collect(CollectContext(root=tmp_path, live=False))
