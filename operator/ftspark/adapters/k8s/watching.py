"""A list, then a watch from the listing's resourceVersion, in a thread of its own: what an informer does,
for the few objects the operator and the driver runtime follow outside kopf (kopf watches a resource in every
namespace it serves, or none)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from ftspark.adapters.k8s import request_timeout

log = logging.getLogger(__name__)
WATCH_SECONDS = 300  # a watch ends after this, and the loop lists again (a missed event is met there)
RETRY_SECONDS = 5.0  # after a failed list or watch
_TIMEOUT = request_timeout(10.0)

Seen = Callable[[dict[str, Any]], None]  # an object, as the API server serves it (JSON)


class ListWatch:
    """Calls on_seen with each object listed, added or modified, on_gone with each deleted, and on_listed
    with each listing's count. Lists again when the watch ends (every WATCH_SECONDS) or its version expired
    (410); after a failure, again in RETRY_SECONDS, logged once per kind of failure. list_call and its
    arguments: a namespaced list method of the client, as `watch.Watch().stream` takes it."""

    def __init__(
        self,
        api: client.ApiClient,
        what: str,
        list_call: Callable[..., Any],
        *args: Any,
        on_seen: Seen,
        on_gone: Seen | None = None,
        on_listed: Callable[[int], None] | None = None,
        **options: Any,
    ) -> None:
        self._api, self._what = api, what
        self._list, self._args, self._options = list_call, args, options
        self._on_seen, self._on_gone, self._on_listed = on_seen, on_gone, on_listed
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch {what}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()

    def _run(self) -> None:
        failure = ""
        while not self._stop.is_set():
            try:
                self._list_and_watch()
                failure = ""
            except (ApiException, urllib3.exceptions.HTTPError) as error:
                if isinstance(error, ApiException) and error.status == 410:
                    continue  # the watch's resourceVersion expired: list again
                if str(error) != failure:  # once per kind of failure, not every retry
                    failure = str(error)
                    log.warning("cannot watch %s: %s", self._what, failure)
                self._stop.wait(RETRY_SECONDS)

    def _list_and_watch(self) -> None:
        listed = self._list(*self._args, **self._options, _request_timeout=_TIMEOUT)
        if self._on_listed is not None:
            self._on_listed(len(listed.items))
        for item in listed.items:
            self._on_seen(self._api.sanitize_for_serialization(item))
        self._watch = watch.Watch()
        stream = self._watch.stream(
            self._list,
            *self._args,
            **self._options,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=WATCH_SECONDS,
            _request_timeout=(10.0, WATCH_SECONDS + 30),
        )
        for event in stream:
            if self._stop.is_set():
                return
            seen = self._api.sanitize_for_serialization(event["object"])
            if event["type"] in {"ADDED", "MODIFIED"}:
                self._on_seen(seen)
            elif event["type"] == "DELETED" and self._on_gone is not None:
                self._on_gone(seen)
