"""The operator's pod and ConfigMap watches carry label selectors: the API server sends it its driver pods and
the checkpoint records drivers wrote only, never the executors, job graphs, its own fence advances or anything
else of the namespaces it manages."""

from __future__ import annotations

import kopf

from ftspark.handlers.watch import watch_settings

PODS = kopf.Resource(group="", version="v1", plural="pods", kind="Pod", namespaced=True)
CONFIG_MAPS = kopf.Resource(group="", version="v1", plural="configmaps", kind="ConfigMap", namespaced=True)
JOBS = kopf.Resource(
    group="ftspark.io", version="v1alpha1", plural="faulttolerantsparkjobs", kind="FaultTolerantSparkJob"
)


def test_the_api_server_filters_what_the_watches_receive() -> None:
    selectors = watch_settings().watching.label_selectors
    # What kopf joins into the labelSelector parameter of each watch request.
    assert selectors.collect(PODS) == ["ftspark.io/role=driver,ftspark.io/job"]
    assert selectors.collect(CONFIG_MAPS) == [
        "ftspark.io/store=checkpoints,ftspark.io/job,ftspark.io/writer!=operator"
    ]
    assert selectors.collect(JOBS) == [], "every job is the operator's business"
