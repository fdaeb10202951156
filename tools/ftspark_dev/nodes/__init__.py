"""Nodes whose pods are local processes: a node agent for tests and `make dev-cluster`, never shipped.

`NodeAgent(kubeconfig, nodes=N).start()` registers N Nodes, keeps their heartbeats and runs the containers of
the pods bound to them as local processes (pods.py; the image table is in images.py); kill_pod, kill_pods,
kill_node and restart_node inject faults. `python -m ftspark_dev.nodes --help` offers the same from a shell.
"""

from ftspark_dev.nodes.agent import Node, NodeAgent, Resources

__all__ = ["Node", "NodeAgent", "Resources"]
