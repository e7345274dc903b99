#!/usr/bin/env bash
# kafka-server-start.sh server.properties: the broker, logging to stdout (config/log4j2.yaml).
base_dir=$(cd "$(dirname "$0")/.." && pwd)
export KAFKA_LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$base_dir/config/log4j2.yaml}"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
exec "$base_dir/bin/kafka-run-class.sh" kafka.Kafka "$@"
