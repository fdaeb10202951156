"""ScheduledSparkJobs and their runs (FaultTolerantSparkJobs labelled with the schedule's name, owned by it)
on the API server: read, a run created from the template as the user wrote it, a finished run deleted on the
version read, the status written on the version read."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Literal, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ftspark import API_GROUP, API_VERSION, KIND, PLURAL, SCHEDULE_KIND, SCHEDULE_PLURAL
from ftspark.adapters.k8s.cluster import job_resource, read_custom_object, write_status
from ftspark.domain.ha import JobKey
from ftspark.domain.scheduling import Run
from ftspark.ports.cluster import JobResource
from ftspark.protocol import MANAGED

SCHEDULE_LABEL = "ftspark.io/schedule"
DUE_ANNOTATION = "ftspark.io/due"  # when the run was due (the schedule's time it was made for)


def schedule_resource(key: JobKey, body: dict[str, Any]) -> JobResource:
    created = datetime.datetime.fromisoformat(body["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return dataclasses.replace(job_resource(key, body), kind=SCHEDULE_KIND, created=created)


class KubeSchedules:
    def __init__(self, api: client.ApiClient) -> None:
        self._objects = client.CustomObjectsApi(api)

    def get(self, key: JobKey) -> JobResource | None:
        body = read_custom_object(self._objects, SCHEDULE_PLURAL, key)
        return None if body is None else schedule_resource(key, body)

    def runs(self, schedule: JobResource) -> list[Run]:
        """The schedule's runs: labelled with its name and owned by its uid (a user's job of that label is
        none of its runs)."""
        listed = self._objects.list_namespaced_custom_object(
            API_GROUP,
            API_VERSION,
            schedule.key.namespace,
            PLURAL,
            label_selector=f"{SCHEDULE_LABEL}={schedule.key.name}",
        )
        runs = []
        for item in listed["items"]:
            metadata = item["metadata"]
            owners = metadata.get("ownerReferences") or ()
            due = (metadata.get("annotations") or {}).get(DUE_ANNOTATION, "")
            if not any(o.get("uid") == schedule.uid for o in owners) or not due:
                continue
            result = ((item.get("status") or {}).get("result") or {}).get("state")
            ended = cast(Literal["Succeeded", "Failed", "Cancelled"] | None, result)
            runs.append(Run(metadata["name"], metadata["uid"], datetime.datetime.fromisoformat(due), ended))
        return runs

    def create_run(self, schedule: JobResource, name: str, due: datetime.datetime) -> None:
        """The run, its spec the schedule's template as written (defaults are the run's to apply); one that
        exists already (made by another leader for the same time) is left as it is."""
        body = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": KIND,
            "metadata": {
                "name": name,
                "labels": {SCHEDULE_LABEL: schedule.key.name, **MANAGED},
                "annotations": {DUE_ANNOTATION: due.isoformat()},
                "ownerReferences": [
                    {
                        "apiVersion": f"{API_GROUP}/{API_VERSION}",
                        "kind": SCHEDULE_KIND,
                        "name": schedule.key.name,
                        "uid": schedule.uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": schedule.spec["template"],
        }
        try:
            self._objects.create_namespaced_custom_object(
                API_GROUP, API_VERSION, schedule.key.namespace, PLURAL, body
            )
        except ApiException as error:
            if error.status != 409:
                raise

    def delete_run(self, namespace: str, run: Run) -> None:
        """Only the run of that uid: a job re-created under its name is not the run."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=run.uid))
        try:
            self._objects.delete_namespaced_custom_object(
                API_GROUP, API_VERSION, namespace, PLURAL, run.name, body=options
            )
        except ApiException as error:
            if error.status not in {404, 409}:
                raise

    def write_status(self, schedule: JobResource, status: dict[str, Any]) -> None:
        write_status(self._objects, SCHEDULE_PLURAL, schedule, status)
