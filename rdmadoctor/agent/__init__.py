"""The peer agent (`rdmadoctor serve`) and its protocol; see protocol.py and server.py."""
from rdmadoctor.probe.protocol import DEFAULT_PORT, PROTOCOL

__all__ = ["DEFAULT_PORT", "PROTOCOL"]
