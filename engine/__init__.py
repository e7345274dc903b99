"""The Kafka failure lab's engine: clusters, faults, clients, scenarios and checkers."""
