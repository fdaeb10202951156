"""ftspark: a Kubernetes operator that runs PySpark applications with Flink-grade fault tolerance."""

API_GROUP = "ftspark.io"
API_VERSION = "v1alpha1"
KIND = "FaultTolerantSparkJob"
PLURAL = "faulttolerantsparkjobs"
