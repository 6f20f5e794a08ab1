"""views/ucxompi.py's reading of UCX_* names: which UCX reads, and the real name a misspelt one stands for."""
from __future__ import annotations

import pytest

from rdmadoctor.logparse.streams import parse_text
from rdmadoctor.views.ucxompi import closest_ucx_setting, ucx_setting_known


@pytest.mark.parametrize("name,known", [
    ("UCX_NET_DEVICES", True), ("UCX_IB_GID_INDEX", True), ("UCX_RC_MLX5_TIMEOUT", True),
    # a program's own prefix (ucp_config_read("MPI"/"OSHMEM", ...) in Open MPI): UCX reads UCX_<prefix>_<name>
    ("UCX_MPI_TLS", True), ("UCX_OSHMEM_NET_DEVICES", True),
    ("UCX_OSHMEM_LALALA", False), ("UCX_NET_DEVICE", False), ("UCX_LOG", False), ("UCX_FOO_TLS", False),
])
def test_which_names_ucx_reads(name, known):
    assert ucx_setting_known(name) is known


@pytest.mark.parametrize("name,closest", [
    ("UCX_NET_DEVICE", "UCX_NET_DEVICES"), ("UCX_IB_GID_INDX", "UCX_IB_GID_INDEX"),
    # a name cut short: the names it begins, not the nearest spelling (UCX_LOG is not UCX_TLS)
    ("UCX_LOG", "UCX_LOG_BUFFER or UCX_LOG_FILE or UCX_LOG_LEVEL"),
])
def test_the_real_name_a_misspelt_one_stands_for(name, closest):
    assert closest_ucx_setting(name) == closest


def test_a_device_list_ucx_cut_short_does_not_show_that_no_rdma_device_is_there():
    """openucx/ucx#4911: "please use one or more of: 'eno1'(tcp), 'ib0'(tcp) ..." may hold mlx5_0:1 past its end."""
    line = ("[1584627303.330596] [node1:147732:0]    ucp_context.c:690  UCX  WARN  network device 'dev' is not "
            "available, please use one or more of: 'eno1'(tcp), 'ib0'(tcp){}\n")
    from rdmadoctor.engine import diagnose
    for tail, fires in ((" ...", False), ("", True)):
        found = {f.rule for f in diagnose.explain(parse_text(line.format(tail))).findings}
        assert ("UCX-NO-RDMA-DEVICE-VISIBLE" in found) is fires, (tail, found)
