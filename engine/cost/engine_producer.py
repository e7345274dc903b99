"""Run the engine's producer role as its own process, with values padded to a given size.

    python -m engine.cost.engine_producer SPEC.json

The role (`engine.roles.producer.run`) runs unchanged: same client settings, same delivery
callback, same history lines per message. The one difference is the value: the role's values
are ~100-byte JSON documents, so for a 1 KB benchmark each is padded with a "pad" field up to
`value_bytes` (a spec key only this wrapper reads). Readers of the lab's values ignore
unknown fields.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.roles import producer
from engine.roles.common import load_spec

PAD_OVERHEAD = len(b',"pad":""')


def padded(make_value: Callable[..., bytes], size: int) -> Callable[..., bytes]:
    """`make_value`, with a "pad" field added so that each value is `size` bytes long."""

    pads: dict[int, bytes] = {}  # pad field by length: values differ by a few bytes only

    def make(message_id: int, run_id: str, level: str, by: str) -> bytes:
        value = make_value(message_id, run_id, level, by)
        missing = size - len(value) - PAD_OVERHEAD
        if missing <= 0:
            return value
        pad = pads.get(missing)
        if pad is None:
            pad = pads[missing] = b',"pad":"' + b"x" * missing + b'"}'
        return value[:-1] + pad

    return make


def main() -> int:
    spec = load_spec()
    size = int(spec.pop("value_bytes", 0))
    if size:
        # The role looks make_value up in its module at each send, so this is what it calls.
        producer.make_value = padded(producer.make_value, size)
    return producer.run(spec)


if __name__ == "__main__":
    raise SystemExit(main())
