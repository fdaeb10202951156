"""ftspark: a Kubernetes operator that runs PySpark applications with Flink-grade fault tolerance."""

API_GROUP = "ftspark.io"
API_VERSION = "v1alpha1"
KIND = "FaultTolerantSparkJob"
PLURAL = "faulttolerantsparkjobs"

# Every object that belongs to a job (driver pods, services, HA ConfigMaps) carries this label with its name.
JOB_LABEL = "ftspark.io/job"
