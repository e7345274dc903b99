"""What each delivery guarantee costs on the cluster in the room, measured next to the claims.

- `throughput`: producer throughput per guarantee level, message size and transaction length,
  in alternating rounds so that drift on a busy machine falls on every setup alike.
- `latency`: end-to-end latency of one transactional stream read at read_committed and at
  read_uncommitted.
- `yardsticks`: the engine's producer role against a bare confluent_kafka loop and Kafka's own
  ProducerPerformance, and the fault proxy against the direct listener.
- `startup`, `memory`: start times and the peak memory of the whole stack.
- `stats`, `published`, `report`: medians and spreads, the published figures, and tables.
- `suite`: the quick run of the "Cost of guarantees" page.

`benchmarks/cost.py` runs all of it; see benchmarks/README.md for the method and results.
"""
