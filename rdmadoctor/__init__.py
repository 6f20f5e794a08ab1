"""rdmadoctor: names the root cause of RDMA failures, with the evidence and the fix."""

__version__ = "0.1.0"
