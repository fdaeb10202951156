"""Real nodes for the test suite and `make demo`: kubelets, containerd and runc on this machine (nodes.py), on
a network of their own (network.py), leaving the machine as they found it (host.py checks it)."""

from ftspark_dev.realnodes.host import HostState
from ftspark_dev.realnodes.nodes import PAUSE_IMAGE, RealNode, RealNodes

__all__ = ["PAUSE_IMAGE", "HostState", "RealNode", "RealNodes"]
