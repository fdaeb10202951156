"""What task-local recovery (docs/local-recovery.md) buys and costs, measured with real PySpark, RocksDB
state on the loopback S3 server through S3A, and the wrapper jar.

1. Load: the same stateful job builds the same state twice, with node-local copies and without (the wrapper
   as a pass-through), and the per-checkpoint cost is compared: RocksDB's file sync time per commit, the
   wrapper's local write time, the local disk used.
2. Restart (a new JVM, one small batch): from the same node (local copies), from a new node (empty local
   dir), and without the wrapper's copies. For each: state bytes read from S3 and from local disk, all bytes
   S3A read, and the time from query start to the first committed batch.

    python -m ftspark_dev.benches.local_recovery --keys 2000000 --payload 200 --files 8
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ftspark_dev.cluster.s3server import S3Server
from ftspark_dev.subjects.localrecovery import JobSpec, new_key, run_job, state_size_parser, write_ranges

REPO = Path(__file__).resolve().parents[3]
MiB = 1 << 20


def _script(name: str) -> str:
    done = subprocess.run([str(REPO / "tools" / name)], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "_stats" not in p.parts)


def _state_bytes(s3: S3Server, bucket: str, prefix: str) -> int:
    total = 0
    for page in (
        s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/state/")
    ):
        total += sum(item["Size"] for item in page.get("Contents", []))
    return total


def _commit_sync_ms(result: dict[str, Any]) -> list[int]:
    return [sum(op.get("rocksdbCommitFileSyncLatencyMs", 0) for op in b["state"]) for b in result["batches"]]


def main() -> None:
    parser = state_size_parser(__doc__, keys=1_000_000, files=5)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="ftspark-lr-bench-"))
    s3a_jars, jar = _script("spark_jars.sh"), _script("local_recovery_jar.sh")
    with S3Server() as s3:
        bucket = "lr-bench"
        s3.client().create_bucket(Bucket=bucket)
        per_file = args.keys // args.files
        for n in range(args.files):
            write_ranges(work / "input", f"part-{n:04d}.csv", [(n * per_file, per_file)])
        base = JobSpec(
            endpoint=s3.endpoint,
            checkpoint="",
            input=str(work / "input"),
            result="",
            s3a_jars=s3a_jars,
            jar=jar,
            local_dir=None,
            key_file=new_key(work / "key"),
            keys=1 << 62,  # every id its own key
            payload_bytes=args.payload,
            driver_memory="3g",
        )

        def run(name: str, checkpoint: str, local_dir: Path | None) -> dict[str, Any]:
            spec = replace(
                base,
                checkpoint=f"s3a://{bucket}/{checkpoint}",
                local_dir=None if local_dir is None else str(local_dir),
                result=str(work / f"{name}.json"),
            )
            started = time.monotonic()
            result = run_job(spec, work / f"{name}.log", timeout=3600)
            result["wallSeconds"] = time.monotonic() - started
            return result

        node = work / "node-a"
        print(f"work dir {work}; {args.keys} keys x {args.payload} B payload in {args.files} batches")
        loads = {
            "with local copies": run("load-local", "ck", node),
            "without": run("load-plain", "ck-plain", None),
        }
        state = _state_bytes(s3, bucket, "ck")
        print(f"\nRocksDB state on S3 after the load: {state / MiB:.1f} MiB (all retained versions)")
        header = f"{'load':<20}{'wall s':>9}{'commit sync ms/batch':>22}{'local write s':>15}"
        print(f"{header}{'local disk MiB':>16}")
        for name, result in loads.items():
            sync = _commit_sync_ms(result)
            local_write = result["stats"]["localWriteNanos"] / 1e9
            disk = _du(node) / MiB if name == "with local copies" else 0.0
            row = f"{name:<20}{result['wallSeconds']:>9.1f}{sum(sync) / len(sync):>22.0f}{local_write:>15.2f}"
            print(f"{row}{disk:>16.1f}")

        restarts = []
        for n, (name, local_dir) in enumerate(
            [("same node", node), ("new node", work / "node-b"), ("without copies", None)]
        ):
            write_ranges(work / "input", f"restart-{n}.csv", [(args.keys + n * 1000, 1000)])
            restarts.append((name, run(f"restart-{n}", "ck", local_dir)))
        print(
            f"\n{'restart':<16}{'state from S3 MiB':>19}{'state local MiB':>17}{'S3A read MiB':>14}"
            f"{'first commit s':>16}{'hits/misses/corrupt':>21}"
        )
        for name, result in restarts:
            stats = result["stats"]
            print(
                f"{name:<16}{stats['bytesReadPrimary'] / MiB:>19.1f}{stats['bytesReadLocal'] / MiB:>17.1f}"
                f"{result['s3aBytesRead'] / MiB:>14.1f}{result['firstCommitSeconds']:>16.1f}"
                f"{stats['localHits']:>9}/{stats['localMisses']}/{stats['localCorrupt']}"
            )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
