"""The room's long-lived objects, kept where no browser message can clear them.

`st.cache_resource` is a cache: Streamlit empties it for every session when any browser sends
a `clear_cache` message (the "Clear cache" menu entry, or a hand-written websocket client).
The role table, the cluster service, Spark, the room's feed and results are the room's state,
not a cache, so they are kept here instead: one of each per server process, made on first use.
Streamlit offers no such store, hence these few lines.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

_lock = threading.RLock()  # a factory may itself ask for another kept object
_kept: dict[str, Any] = {}


class Kept(Protocol[T_co]):
    def __call__(self) -> T_co: ...
    def clear(self) -> None: ...


def kept(factory: Callable[[], T]) -> Kept[T]:
    """`factory()` once per server process; every later call returns the same object.

    `.clear()` forgets it (as `st.cache_resource`'s did), for tests and deliberate resets only:
    no browser message reaches it."""
    name = f"{factory.__module__}.{factory.__qualname__}"

    @functools.wraps(factory)
    def get() -> T:
        with _lock:
            if name not in _kept:
                _kept[name] = factory()
            return _kept[name]

    def clear() -> None:
        with _lock:
            _kept.pop(name, None)

    get.clear = clear  # type: ignore[attr-defined]
    return get  # type: ignore[return-value]
