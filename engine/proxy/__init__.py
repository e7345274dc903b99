"""A Kafka-aware TCP proxy that injects faults between clients and brokers.

Run it with `python -m engine.proxy`; drive it with `ProxyControl`; read what it did with
`read_events`.
"""

from engine.proxy.control import ProxyControl, ProxyControlError, read_events
from engine.proxy.server import Proxy, Route

__all__ = ["Proxy", "ProxyControl", "ProxyControlError", "Route", "read_events"]
