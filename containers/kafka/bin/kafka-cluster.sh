#!/usr/bin/env bash
# kafka-cluster.sh: Kafka's tool of that name (org.apache.kafka.tools.ClusterTool).
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.ClusterTool "$@"
