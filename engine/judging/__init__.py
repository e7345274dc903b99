"""The judge: from a level's history and what was read back, a verdict per message (`checker`),
the counts, the evidence and the why (`explain`, `client_evidence`), all in `judge`; and a
share group's run judged record by record (`queues`: deliveries, archived records, repeated
outputs). Knows no Kafka client, cluster or process (pyproject.toml's import-linter
contracts).
"""
