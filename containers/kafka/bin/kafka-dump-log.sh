#!/usr/bin/env bash
# kafka-dump-log.sh: Kafka's tool of that name. Kafka 4.3 moved its class from core
# (kafka.tools.DumpLogSegments, Scala) to kafka-tools (org.apache.kafka.tools.DumpLogSegments,
# KAFKA-14579); the image holds one release's jars, so the script runs the class they have.
libs="$(dirname "$0")/../libs"
if compgen -G "$libs/kafka_2.13-4.[0-2].*.jar" > /dev/null; then
  class=kafka.tools.DumpLogSegments
else
  class=org.apache.kafka.tools.DumpLogSegments
fi
exec "$(dirname "$0")/kafka-run-class.sh" "$class" "$@"
