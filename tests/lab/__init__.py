"""The Soft-RoCE lab: two QEMU VMs running real rdma_rxe, used to record and test real faults."""
