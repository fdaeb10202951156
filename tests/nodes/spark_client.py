"""A PySpark driver in client mode whose executors are pods: prints what the test checks.

Usage: spark_client.py <API server URL> <CA file> <token file> <namespace> <executor pod template> <image>
(a service-account token: the fabric8 client Spark uses cannot read the control plane's EC client keys).
"""

from __future__ import annotations

import socket
import sys
import time

from pyspark.sql import SparkSession


def main() -> None:
    server, ca_file, token_file, namespace, template, image = sys.argv[1:7]
    started = time.monotonic()
    spark = (
        SparkSession.builder.master(f"k8s://{server}")
        .appName("nodes-test")
        .config("spark.kubernetes.container.image", image)
        .config("spark.kubernetes.namespace", namespace)
        .config("spark.kubernetes.authenticate.caCertFile", ca_file)
        .config("spark.kubernetes.authenticate.oauthTokenFile", token_file)
        .config("spark.kubernetes.executor.podTemplateFile", template)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.executor.instances", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.kubernetes.executor.request.cores", "500m")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        while status.size() < 3:  # the driver's block manager and two executors'
            time.sleep(0.1)
            status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        print(f"executors registered after {time.monotonic() - started:.1f} s", flush=True)
        # Python tasks: each row carries the hostname of the pod (its own UTS namespace) that computed it.
        rows = (
            spark.sparkContext.parallelize(range(100), 4).map(lambda x: (x, socket.gethostname())).collect()
        )
        print("sum", sum(row[0] for row in rows), flush=True)
        print("hosts", " ".join(sorted({row[1] for row in rows})), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
