"""ftspark: a Kubernetes operator that runs PySpark applications with Flink-grade fault tolerance."""

API_GROUP = "ftspark.io"
API_VERSION = "v1alpha1"
KIND = "FaultTolerantSparkJob"
PLURAL = "faulttolerantsparkjobs"
# Runs of a FaultTolerantSparkJob on a cron schedule (ftspark.domain.scheduling).
SCHEDULE_KIND = "ScheduledSparkJob"
SCHEDULE_PLURAL = "scheduledsparkjobs"
