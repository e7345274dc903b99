#!/usr/bin/env bash
# kafka-run-class.sh CLASS [ARGS...]: run a class from /opt/kafka/libs with the same
# environment variables and defaults as Kafka's own script.
base_dir=$(cd "$(dirname "$0")/.." && pwd)
: "${KAFKA_HEAP_OPTS:=-Xmx256M}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.yaml}"
# shellcheck disable=SC2086 # the *_OPTS variables are lists of JVM options
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_LOG4J_OPTS ${KAFKA_OPTS-} \
  -cp "$base_dir/libs/*" "$@"
