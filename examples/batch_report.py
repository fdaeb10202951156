"""A batch PySpark job for examples/batch-report.yaml: one report per date, then it ends."""

import argparse

from pyspark.sql import SparkSession, functions

parser = argparse.ArgumentParser()
parser.add_argument("--date", required=True)
args = parser.parse_args()

spark = SparkSession.builder.appName("nightly-report").getOrCreate()
orders = spark.range(1_000_000).withColumn("region", functions.col("id") % 7)
report = orders.groupBy("region").agg(functions.count("*").alias("orders")).orderBy("region")
for row in report.collect():
    print(f"{args.date} region {row['region']}: {row['orders']} orders")
spark.stop()
