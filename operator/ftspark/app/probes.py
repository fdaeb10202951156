"""One small HTTP server: /metrics for Prometheus, /healthz (liveness) and /readyz (readiness).

Liveness is tied to the Lease: a leader that has not renewed within its renew deadline is unhealthy (it is
about to exit anyway; the probe catches a process wedged before it could). A follower is healthy while it
campaigns. Readiness says whether the replica is in touch with the API server (it leads, or could).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


def serve(
    port: int, healthy: Callable[[], tuple[bool, str]], ready: Callable[[], bool]
) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._answer(200, generate_latest(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                ok, why = healthy()
                self._answer(200 if ok else 503, why.encode())
            elif self.path == "/readyz":
                self._answer(200 if ready() else 503, b"ready" if ready() else b"starting")
            else:
                self._answer(404, b"not found")

        def _answer(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Probes every few seconds would drown the log."""

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)  # probes come from the kubelet
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server
