"""What an RDMA device's name says about its link layer, where a log names the device and nothing else.

The kernel names a device after its driver (mlx5_0, irdma0, bnxt_re1, rxe0), or rdma-core's udev rules after its
link layer and bus place (ibp..., rocep..., iwp...). Some drivers only ever run iWARP or RoCE: their ports have an
Ethernet link layer, never InfiniBand's (drivers/infiniband/hw/*/ and sw/*/ of the kernel, each driver's
query_port() or get_link_layer()). A Mellanox or Intel Omni-Path name (mlx4, mlx5, mthca, qib, hfi1) says nothing
of the link layer: the same driver runs InfiniBand and RoCE ports.
"""
from __future__ import annotations

import re

# what follows a driver's name in a device's: a number (mlx5_0, irdma1), or a name given by `rdma link add`
# (rxe_eth0, siw_ens1)
_INSTANCE = r"(?:_?\d+|_[\w.-]+)"
# rdma-core's udev names (rdma_rename): the link layer's prefix, then o/s/p/x and the onboard index, slot, PCI path
# or MAC address
_UDEV = r"[opsx][0-9a-f]+[\w-]*"
# iWARP only (i40iw, cxgb3/cxgb4, siw, nes), iWARP by default or by choice (irdma on E810 and X722, qedr), and the
# udev name of any iWARP device ("iwp...")
IWARP_CAPABLE_NAME = rf"(?:(?:irdma|i40iw|i?w?_?cxgb[34]|siw|nes|qedr){_INSTANCE}|iw{_UDEV})"
# the above, and the drivers that run RoCE and nothing else: rxe (Soft-RoCE), bnxt_re, hns_roce, ocrdma, erdma,
# mana_ib, ionic, vmw_pvrdma, and the udev name of any RoCE device ("rocep...")
_NO_INFINIBAND = re.compile(
    rf"(?:{IWARP_CAPABLE_NAME}|(?:rxe|rdma_rxe|bnxt_re|hns|ocrdma|erdma|mana|ionic|vmw_pvrdma|pvrdma){_INSTANCE}"
    rf"|roce{_UDEV})", re.IGNORECASE)


def has_no_infiniband_port(device: str) -> bool:
    """The device's name is one whose driver never runs an InfiniBand link layer (iWARP or RoCE only)."""
    return _NO_INFINIBAND.fullmatch(device.strip()) is not None
