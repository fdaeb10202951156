"""`make docs`: docs/troubleshooting.md, what each reason ftspark shows means and what to do, generated from
ftspark.domain.remedies (which `ftspark status` prints from), so that every remedy is written once."""

from __future__ import annotations

from pathlib import Path

from ftspark.domain.remedies import REMEDIES
from ftspark_dev.cluster.processes import REPO_ROOT

TARGET = REPO_ROOT / "docs" / "troubleshooting.md"
# `ftspark describe` of a real run, as printed (kept as captured: the scheduler's words are long).
EXAMPLE = Path(__file__).with_name("describe_example.txt")

HEAD = """# Troubleshooting

Generated from `operator/ftspark/domain/remedies.py` by `make docs`; `ftspark status JOB` prints the row that
applies to the job now (`what to do:`). Where to look first:

```sh
ftspark status counts                    # phase, conditions, the last failures, what to do
ftspark describe counts                  # the same, and the job's own latest Events
kubectl get ftsj counts -o wide          # Failure: the last failure's reason
ftspark logs counts --attempt 2          # a driver's log, its pod there or not (the end of it, kept)
```

What `ftspark describe` showed for a job asking for a 64-core driver on three 2-core nodes (a real run on the
test installation; `tests/realnodes/test_installation.py` proves it on real kubelets, and 9 other causes):

```text
{example}
```

A reason shows in one of four places. **Reconciled=False**: the operator keeps failing to act on the job
(its own storage, its rights); the condition is there only while that lasts, with a Warning Event when its
message is news. **Degraded (waiting)**: the driver waits for something that will not pass by itself; the
job stays in `Submitting`, a Warning Event says it each time the message changes, and nothing is restarted
until `spec.liveness.startTimeoutSeconds` (default 600 s) has passed since the attempt was submitted: then
the attempt fails with that reason (lastFailure) and the restart strategy decides. **Ready=False**: the job
cannot go on until something changes (the spec, a quota, storage).
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
    return HEAD.format(example=EXAMPLE.read_text().rstrip("\n")) + "\n".join(rows) + "\n"


def main() -> None:
    TARGET.write_text(render())


if __name__ == "__main__":
    main()
