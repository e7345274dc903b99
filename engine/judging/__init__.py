"""The judge: from a level's history and what was read back, a verdict per message (`checker`),
the counts, the evidence and the why (`explain`, `client_evidence`), all in `judge`. Knows
no Kafka client, cluster or process (pyproject.toml's import-linter contracts).
"""
