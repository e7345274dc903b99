"""The PySpark metrics: a recorded run's counts and latencies, computed by Spark.

- `session`: the one long-lived SparkSession (`get_spark`, `start_spark_in_background`)
  and the Kafka connector's jars (`spark-deps/pom.xml`, cached under .cache/spark-kafka);
- `spark_job`: reads a run's topics from Kafka and judges every message with the
  checker's definitions (`run_metrics`, `judge`); also a `spark-submit` script;
- `compute`: what the dashboard calls: Kafka first, the run's saved records otherwise, and
  the result kept as runs/RUN_ID/metrics.json;
- `cli`: `python -m engine metrics RUN_ID [--json]`;
- `queues`: a share group's run counted record by record, by the queue checker's rules
  (not yet part of a scenario run).

Nothing here imports pyspark until it is used, so `import engine` stays fast.
"""
