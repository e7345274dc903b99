"""What a run is made of, in words every part shares: the guarantee levels, the clients
(librdkafka, Java), the events a history line carries, the history files themselves, and the
words the pages and explanations use for them.
"""
