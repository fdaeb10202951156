"""The running agent's fault injection over a Unix socket, for the CLI: one JSON request, one answer."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from pathlib import Path
from typing import Any

from ftspark_dev.nodes.agent import NodeAgent

SOCKET_NAME = "control.sock"


def _split(pod: str) -> tuple[str, str]:
    namespace, _, name = pod.partition("/")
    if not name:
        raise ValueError(f"pods are named NAMESPACE/NAME, not {pod!r}")
    return namespace, name


def handle(agent: NodeAgent, request: dict[str, Any]) -> Any:
    op = request["op"]
    if op == "status":
        return [
            {
                "node": node.name,
                "ip": node.ip,
                "running": node.running,
                "root": str(node.root),
                "pods": sorted("/".join(r.key.split("_")[:2]) for r in list(node.runners.values())),
            }
            for node in agent.nodes
        ]
    if op == "kill-pod":
        agent.kill_pod(*_split(request["pod"]))
        return [request["pod"]]
    if op == "kill-pods":
        return agent.kill_pods(request["namespace"], request["selector"])
    if op == "kill-node":
        agent.kill_node(request["node"])
        return [request["node"]]
    if op == "restart-node":
        agent.restart_node(request["node"])
        return [request["node"]]
    if op == "log":
        return agent.log(*_split(request["pod"]), request.get("container"))
    raise ValueError(f"unknown op {op!r}")


class ControlServer:
    def __init__(self, agent: NodeAgent, path: Path):
        self.path = path

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    answer = {"ok": handle(agent, json.loads(self.rfile.readline()))}
                except (KeyError, ValueError) as error:
                    answer = {"error": str(error)}
                self.wfile.write(json.dumps(answer).encode() + b"\n")

        path.unlink(missing_ok=True)
        self._server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="nodes-control", daemon=True)

    def start(self) -> ControlServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.path.unlink(missing_ok=True)


def request(path: Path, **body: Any) -> Any:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(path))
        connection.sendall(json.dumps(body).encode() + b"\n")
        answer = json.loads(connection.makefile().readline())
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer["ok"]
