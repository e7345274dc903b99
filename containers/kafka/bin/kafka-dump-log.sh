#!/usr/bin/env bash
# kafka-dump-log.sh: Kafka's tool of that name (kafka.tools.DumpLogSegments).
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.DumpLogSegments "$@"
