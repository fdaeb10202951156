"""Network conditions between a client and a server on loopback: a TCP proxy that can be partitioned, and
slowed to a given bandwidth per connection.

partition() black-holes traffic both ways (connections stay open, nothing passes: clients see timeouts, as
in a real partition); heal() drops the black-holed connections, so clients reconnect, and forwards again.
ApiProxy is one for the API server (with a kubeconfig through it).

Only the conditions live here: a new one is a TcpProxy method like partition(), and the fault that uses it a
step of ftspark_dev.scenarios.tour (as ProcessFaultTour.partition_leader uses worlds.process_nodes.World's
proxies).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import yaml

from ftspark_dev.cluster.processes import free_port


class TcpProxy:
    def __init__(
        self, target_port: int, host: str = "127.0.0.1", bytes_per_second: float | None = None
    ) -> None:
        """bytes_per_second: each direction of each connection at most this fast (None: loopback speed)."""
        self.port = free_port(host)
        self._rate = bytes_per_second
        self._target = (host, target_port)
        self._listener = socket.create_server((host, self.port))
        self._open = threading.Event()
        self._open.set()
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    def partition(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        with self._lock:
            stale, self._connections = self._connections, set()
        for connection in stale:
            with contextlib.suppress(OSError):
                connection.close()
        self._open.set()

    def close(self) -> None:
        self._closed = True
        self.heal()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)  # the timeout is for connecting only: a quiet watch stays open
            with self._lock:
                self._connections |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        next_free = 0.0  # when the link is free again at the configured rate
        try:
            while data := source.recv(65536):
                if self._rate is not None:
                    next_free = max(next_free, time.monotonic()) + len(data) / self._rate
                    time.sleep(max(0.0, next_free - time.monotonic()))
                if self._open.is_set():
                    sink.sendall(data)
                # partitioned: the bytes are lost, as on a cut link
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.close()


class ApiProxy(TcpProxy):
    def kubeconfig(self, source: Path, target: Path) -> Path:
        """A copy of source whose server is this proxy (the serving certificate is for 127.0.0.1)."""
        document = yaml.safe_load(source.read_text())
        document["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        target.write_text(yaml.safe_dump(document))
        target.chmod(0o600)
        return target
