"""`make docs`: docs/troubleshooting.md, what each reason ftspark shows means and what to do, generated from
ftspark.domain.remedies (which `ftspark status` prints from), so that every remedy is written once."""

from __future__ import annotations

from ftspark.domain.remedies import REMEDIES
from ftspark_dev.cluster.processes import REPO_ROOT

TARGET = REPO_ROOT / "docs" / "troubleshooting.md"

HEAD = """# Troubleshooting

Generated from `operator/ftspark/domain/remedies.py` by `make docs`; `ftspark status JOB` prints the row that
applies to the job now (`what to do:`). Where to look first:

```sh
ftspark status counts                    # phase, conditions, the last failures, what to do
ftspark describe counts                  # the same, and the job's own latest Events
kubectl get ftsj counts -o wide          # Failure: the last failure's reason
kubectl logs counts-3-driver             # the attempt's driver, while its pod is there
```

A reason shows in one of three places. **Degraded (waiting)**: the driver waits for something that will not
pass by itself; the job stays in `Submitting`, nothing is restarted, a Warning Event says it each time the
message changes. **Ready=False**: the job cannot go on until something changes (the spec, a quota, storage).
**lastFailure**: why an attempt ended (`status.lastFailure`, `status.failures`, and `Degraded` while it is
restarted); the restart strategy decides what comes next.

| reason | shown in | what it means | what to do |
|---|---|---|---|
"""


def render() -> str:
    rows = (
        f"| `{reason}` | {remedy.where} | {remedy.meaning} | {remedy.fix} |"
        for reason, remedy in REMEDIES.items()
    )
    return HEAD + "\n".join(rows) + "\n"


def main() -> None:
    TARGET.write_text(render())


if __name__ == "__main__":
    main()
