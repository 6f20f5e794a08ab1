"""The peer agent (`rdmadoctor serve`) and its protocol; see protocol.py and server.py."""
from rdmadoctor.agent.protocol import DEFAULT_PORT, PROTOCOL

__all__ = ["DEFAULT_PORT", "PROTOCOL"]
