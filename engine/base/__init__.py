"""The floor every other part stands on: the lab's errors, its settings registry (every LAB_*
variable), its paths, the external tools it finds, Kafka's error codes and the message
value. Imports nothing of the engine above it.
"""
