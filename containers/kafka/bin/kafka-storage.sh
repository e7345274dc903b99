#!/usr/bin/env bash
# kafka-storage.sh: Kafka's tool of that name (kafka.tools.StorageTool).
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
