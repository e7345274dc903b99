#!/usr/bin/env bash
# kafka-topics.sh: Kafka's tool of that name (org.apache.kafka.tools.TopicCommand).
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
