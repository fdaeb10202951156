"""The driver's executors on a lost node, given up at once (docs/driver-runtime.md, "Executors on a lost
node").

Spark notices an executor gone when its pod ends or disappears, or when it has sent no heartbeat for
`spark.network.timeout` (120 s by default). A node that dies ends nothing: the node controller only marks its
pods not Ready once the node's grace period is over, and their objects stay, Running, until someone removes
them. So Spark waits out its 120 s with the executor's tasks queued on it: measured on real nodes, a warm
standby promoted after a node loss, its warm executor on that node, ran its first batch only after Spark's
"Removing executor 1 with no recent heartbeats: 122506 ms exceeds timeout 120000 ms".

This thread watches the driver's own executor pods. One that reads as on a lost node (the node controller's
mark: Ready=False while its containers still say ready, `ftspark.reconcile.driver_pods.on_lost_node`) is
deleted at once, without a grace period: no kubelet would ever confirm a graceful deletion. Spark then sees
its executor's pod gone, removes the executor, reruns its tasks elsewhere and asks for a new one, as it does
after the heartbeat timeout, only a grace period after the node's death instead of two minutes. An executor
that still runs behind a partition is given up on the same evidence Spark's timeout gives it up on, sooner;
the rest of its work, as then, is a task attempt Spark no longer counts.

It uses the driver's own rights (list, watch and delete of pods in its namespace, which Spark needs) on its
own executors only (their `spark-app-selector`, the application's id).
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ftspark.adapters.k8s import request_timeout
from ftspark.adapters.k8s.watching import ListWatch
from ftspark.protocol import executor_selector
from ftspark.reconcile.driver_pods import on_lost_node

log = logging.getLogger(__name__)
_TIMEOUT = request_timeout(10.0)
WATCHING = "watching the executor pods for a lost node"  # logged once the first listing answered


class LostNodeExecutors:
    def __init__(self, api: client.ApiClient, namespace: str, app_id: str) -> None:
        self._core = client.CoreV1Api(api)
        self._namespace, selector = namespace, executor_selector(app_id)
        self._watching = False  # said so in the log
        self._pods = ListWatch(
            api,
            f"the executor pods ({selector})",
            self._core.list_namespaced_pod,
            namespace,
            label_selector=selector,
            on_seen=self._look_at,
            on_listed=lambda count: self._listed(selector, count),
        )

    def start(self) -> None:
        self._pods.start()

    def stop(self) -> None:
        self._pods.stop()

    def _listed(self, selector: str, count: int) -> None:
        if not self._watching:
            self._watching = True
            log.info("%s (%s): %d now", WATCHING, selector, count)

    def _look_at(self, pod: dict[str, Any]) -> None:
        if not on_lost_node(pod):
            return
        name, node = pod["metadata"]["name"], pod.get("spec", {}).get("nodeName", "")
        try:
            self._core.delete_namespaced_pod(
                name, self._namespace, grace_period_seconds=0, _request_timeout=_TIMEOUT
            )
        except ApiException as error:
            if error.status != 404:
                raise
            return
        log.warning(
            "executor pod %s: its node %s was found lost; deleted at once, so that Spark replaces it now "
            "instead of after its heartbeat timeout",
            name,
            node,
        )
