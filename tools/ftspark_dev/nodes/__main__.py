"""python -m ftspark_dev.nodes: run process-backed nodes, or inject faults into running ones.

    python -m ftspark_dev.nodes run --kubeconfig admin.kubeconfig --nodes 3      # foreground, Ctrl-C stops
    python -m ftspark_dev.nodes status
    python -m ftspark_dev.nodes kill-pod NAMESPACE/POD                          # SIGKILL: exit code 137
    python -m ftspark_dev.nodes kill-pods NAMESPACE spark-role=executor         # by label selector
    python -m ftspark_dev.nodes kill-node node-1                                # heartbeats stop too
    python -m ftspark_dev.nodes restart-node node-1
    python -m ftspark_dev.nodes log NAMESPACE/POD [CONTAINER]

The commands find the running agent through <root>/control.sock (--root, default /tmp/ftspark-nodes).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from pathlib import Path

from ftspark_dev.nodes.agent import NodeAgent
from ftspark_dev.nodes.control import SOCKET_NAME, ControlServer, request

DEFAULT_ROOT = Path("/tmp/ftspark-nodes")


def _run(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
    args.root.mkdir(parents=True, exist_ok=True)
    agent = NodeAgent(
        args.kubeconfig,
        args.nodes,
        prefix=args.prefix,
        root=args.root,
        first_ip=args.first_ip,
        zones=args.zones,
    )
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    agent.start()
    server = ControlServer(agent, args.root / SOCKET_NAME).start()
    try:
        for node in agent.nodes:
            print(f"{node.name}\t{node.ip}\t{node.root}", flush=True)
        stopping.wait()
    finally:
        server.stop()
        agent.stop(delete_nodes=not args.keep_nodes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ftspark_dev.nodes", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the nodes' directories and socket")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="register nodes and run their pods until SIGINT/SIGTERM")
    run.add_argument("--kubeconfig", type=Path, required=True)
    run.add_argument("--nodes", type=int, default=2)
    run.add_argument("--prefix", default="node")
    run.add_argument("--first-ip", type=int, default=2, help="node i has IP 127.0.0.<first-ip + i>")
    run.add_argument("--zones", type=int, default=2)
    run.add_argument("--keep-nodes", action="store_true", help="leave the Node objects behind on exit")
    commands.add_parser("status")
    kill_pod = commands.add_parser("kill-pod")
    kill_pod.add_argument("pod", help="NAMESPACE/NAME")
    kill_pods = commands.add_parser("kill-pods")
    kill_pods.add_argument("namespace")
    kill_pods.add_argument("selector", help="label selector, e.g. spark-role=driver")
    for name in ("kill-node", "restart-node"):
        commands.add_parser(name).add_argument("node")
    log = commands.add_parser("log")
    log.add_argument("pod", help="NAMESPACE/NAME")
    log.add_argument("container", nargs="?")
    args = parser.parse_args(argv)

    if args.command == "run":
        return _run(args)
    body = {k: v for k, v in vars(args).items() if k not in {"root", "command"}}
    answer = request(args.root / SOCKET_NAME, op=args.command, **body)
    print(answer if isinstance(answer, str) else json.dumps(answer, indent=2))
    return None


if __name__ == "__main__":
    main()
