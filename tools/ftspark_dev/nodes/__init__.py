"""Nodes whose pods are local processes: a node agent for tests and `make dev-cluster`, never shipped.

`NodeAgent(kubeconfig, nodes=N).start()` registers N Nodes, keeps their heartbeats and runs the containers of
the pods bound to them as local processes (pods.py; the image table is in images.py); kill_pod, kill_pods,
kill_node and restart_node inject faults. `python -m ftspark_dev.nodes --help` offers the same from a shell.

One of two node kinds (realnodes is the other): a new fault of this kind goes beside kill_node in agent.py,
and a new kind is a package beside these two that registers Nodes and runs their pods, with a world that
implements ftspark_dev.scenarios.tour.TourWorld (as worlds.process_nodes.World does for this one) so that the
fault tour runs on it.
"""

from ftspark_dev.nodes.agent import Node, NodeAgent, Resources

__all__ = ["Node", "NodeAgent", "Resources"]
