"""Real nodes for the test suite and `make demo`: kubelets, containerd and runc on this machine (nodes.py), on
a network of their own (network.py), leaving the machine as they found it (host.py checks it).

One of two node kinds (nodes, process-backed, is the other): a new fault of this kind goes beside kill_node
in RealNodes, and a new kind is a package beside these two with a world that implements
ftspark_dev.scenarios.tour.TourWorld (as worlds.real_nodes.RealWorld does for this one) so that the fault
tour runs on it.
"""

from ftspark_dev.realnodes.host import HostState
from ftspark_dev.realnodes.nodes import PAUSE_IMAGE, RealNode, RealNodes

__all__ = ["PAUSE_IMAGE", "HostState", "RealNode", "RealNodes"]
