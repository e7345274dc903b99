"""A scenario file parsed and validated (`scenario`), and what the Kafka Streams scenarios
count (`streams`): the payments, the store, the truth.
"""
