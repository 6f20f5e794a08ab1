"""knowledge/devices.py: which device names say that no port of theirs runs InfiniBand."""
from __future__ import annotations

import pytest

from rdmadoctor.knowledge import devices


@pytest.mark.parametrize("name", ["cxgb4_0", "iw_cxgb4_1", "i40iw0", "irdma1", "iwp24s0f0", "siw_eth0", "qedr0",
                                  "rxe0", "bnxt_re2", "hns_0", "rocep65s0f0", "erdma_0", "mana_0", " ocrdma0 "])
def test_iwarp_and_roce_only_drivers_have_no_infiniband_port(name):
    assert devices.has_no_infiniband_port(name)


# the same driver runs InfiniBand and RoCE (mlx4, mlx5), InfiniBand only (mthca, qib, hfi1), or the name is not a
# device's (an empty field, a host, a word that begins like one)
@pytest.mark.parametrize("name", ["mlx5_0", "mlx4_7", "mthca0", "qib0", "hfi1_0", "ibp59s0", "efa_0", "", "node1",
                                  "roce-bench.example", "nest"])
def test_other_names_say_nothing_of_the_link_layer(name):
    assert not devices.has_no_infiniband_port(name)
