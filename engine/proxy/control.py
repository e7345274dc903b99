"""The proxy's control channel: newline-delimited JSON over TCP, plus a synchronous client.

Request:  {"cmd": "drop_produce_responses", "nth": 3, "after": "hold"}
Answer:   {"ok": true, "rule_id": 1, ...}  or  {"ok": false, "error": "..."}
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.proxy.rules import RuleError, coerce
from engine.proxy.server import Proxy, log

MAX_LINE = 1024 * 1024


class ProxyControlError(RuntimeError):
    """The proxy answered {"ok": false, ...}."""


# -- server side -------------------------------------------------------------------------------


def _args(params: dict[str, Any], spec: dict[str, tuple[type, Any]]) -> dict[str, Any]:
    """Check and convert command parameters against {name: (type, default)}; ... = required."""
    unknown = set(params) - set(spec)
    if unknown:
        raise RuleError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    for name, (kind, default) in spec.items():
        if name in params and params[name] is not None:
            out[name] = coerce(name, params[name], kind)
        elif default is ...:
            raise RuleError(f"missing parameter: {name}")
        else:
            out[name] = default
    return out


def _ping(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    _args(params, {})
    return {"pong": True, "pid": os.getpid(), "ts": time.time()}


def _status(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    _args(params, {})
    return proxy.status()


def _drop(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    rule = proxy.add_drop_rule(**params)
    return {"rule_id": rule.rule_id, "rule": rule.to_dict()}


def _remove_rule(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    a = _args(params, {"rule_id": (int, ...)})
    return {"removed": proxy.remove_rule(a["rule_id"])}


def _clear(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    _args(params, {})
    return proxy.clear()


def _set_latency(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    a = _args(params, {"ms": (float, ...), "jitter_ms": (float, 0.0), "node": (int, None)})
    proxy.set_latency(a["ms"], a["jitter_ms"], a["node"])
    return {}


def _blackhole(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    a = _args(params, {"duration_s": (float, ...), "node": (int, None), "then": (str, "flush")})
    proxy.blackhole(a["duration_s"], a["node"], a["then"])
    return {}


def _heal(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    a = _args(params, {"node": (int, None)})
    return {"healed": proxy.heal(a["node"])}


def _reset_connections(proxy: Proxy, params: dict[str, Any]) -> dict[str, Any]:
    a = _args(params, {"node": (int, None)})
    return {"reset": proxy.reset_connections(a["node"])}


COMMANDS: dict[str, Callable[[Proxy, dict[str, Any]], dict[str, Any]]] = {
    "ping": _ping,
    "status": _status,
    "drop_produce_responses": _drop,
    "remove_rule": _remove_rule,
    "clear": _clear,
    "set_latency": _set_latency,
    "blackhole": _blackhole,
    "heal": _heal,
    "reset_connections": _reset_connections,
}


def handle_command(proxy: Proxy, line: bytes | str) -> dict[str, Any]:
    """Execute one JSON request line; always returns an answer, never raises."""
    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise RuleError("request must be a JSON object")
        cmd = request.pop("cmd", None)
        handler = COMMANDS.get(cmd) if isinstance(cmd, str) else None
        if handler is None:
            raise RuleError(f"unknown cmd {cmd!r}; known: {', '.join(COMMANDS)}")
        return {"ok": True, **handler(proxy, request)}
    except (ValueError, TypeError) as e:  # JSONDecodeError and RuleError are ValueErrors
        return {"ok": False, "error": str(e)}
    except Exception as e:  # a bug in a command must not take the proxy down
        log(f"control command failed: {e!r}")
        return {"ok": False, "error": f"internal error: {e!r}"}


async def start_control_server(proxy: Proxy, host: str, port: int) -> asyncio.Server:
    """Serve the control channel on host:port (port 0 picks a free one)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # line over the limit
                    answer = {"ok": False, "error": f"request line longer than {MAX_LINE} bytes"}
                    writer.write(json.dumps(answer).encode() + b"\n")
                    await writer.drain()
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                answer = handle_command(proxy, line)
                writer.write(json.dumps(answer, default=str).encode() + b"\n")
                await writer.drain()
        except OSError:
            pass  # client went away mid-answer
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, port, limit=MAX_LINE)


# -- client side -------------------------------------------------------------------------------


class ProxyControl:
    """Synchronous client; one short TCP connection per command."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout

    def request(self, cmd: str, **params: Any) -> dict[str, Any]:
        """Send one command (None-valued params are left out); raise ProxyControlError if not ok."""
        body = {"cmd": cmd, **{k: v for k, v in params.items() if v is not None}}
        with socket.create_connection((self.host, self.port), timeout=self.timeout) as sock:
            sock.sendall(json.dumps(body).encode() + b"\n")
            with sock.makefile("rb") as f:
                line = f.readline(MAX_LINE)
        if not line:
            raise ConnectionError("proxy closed the control connection without answering")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise ProxyControlError(answer.get("error", "unknown error"))
        return answer

    def ping(self) -> bool:
        return bool(self.request("ping").get("pong"))

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Retry ping until the proxy answers; TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.ping():
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() >= deadline:
                raise TimeoutError(f"proxy control {self.host}:{self.port} not ready")
            time.sleep(0.05)

    def status(self) -> dict[str, Any]:
        """Per-node counters ("nodes" is keyed by str(node id)), rules, blackholes, latency."""
        answer = self.request("status")
        answer.pop("ok", None)
        return answer

    def bootstrap_address(self) -> str | None:
        """Rewrite mode: the HOST:PORT clients should bootstrap from; None in route mode."""
        boot = self.status().get("bootstrap")
        return boot.get("advertised") if isinstance(boot, dict) else None

    def drop_produce_responses(
        self,
        *,
        nth: int | None = None,
        count: int = 1,
        window_start: float | None = None,
        window_end: float | None = None,
        probability: float | None = None,
        seed: int | None = None,
        max_drops: int | None = None,
        node: int | None = None,
        client_id_prefix: str | None = None,
        after: str = "reset",
        drop: str = "response",
        api: str = "produce",
    ) -> int:
        """Add a drop rule; returns its rule_id. No targeting at all means nth=1.

        api="offset_commit" or "end_txn" targets a consumer's OffsetCommit or a transactional
        producer's EndTxn instead of Produce.

        drop="request" loses the Produce request itself instead of its response, and the
        connection stays silent from it on, as a path that stays down would (nothing behind
        it is forwarded) until the client gives up on the connection.
        """
        answer = self.request(
            "drop_produce_responses",
            api=api,
            drop=drop,
            nth=nth,
            count=count,
            window_start=window_start,
            window_end=window_end,
            probability=probability,
            seed=seed,
            max_drops=max_drops,
            node=node,
            client_id_prefix=client_id_prefix,
            after=after,
        )
        return int(answer["rule_id"])

    def remove_rule(self, rule_id: int) -> bool:
        return bool(self.request("remove_rule", rule_id=rule_id)["removed"])

    def clear(self) -> None:
        self.request("clear")

    def set_latency(self, ms: float, *, jitter_ms: float = 0.0, node: int | None = None) -> None:
        self.request("set_latency", ms=ms, jitter_ms=jitter_ms, node=node)

    def blackhole(self, duration_s: float, *, node: int | None = None, then: str = "flush") -> None:
        self.request("blackhole", duration_s=duration_s, node=node, then=then)

    def heal(self, node: int | None = None) -> int:
        return int(self.request("heal", node=node)["healed"])

    def reset_connections(self, node: int | None = None) -> int:
        return int(self.request("reset_connections", node=node)["reset"])


def read_events(
    path: str | os.PathLike[str], since_ts: float | None = None
) -> list[dict[str, Any]]:
    """Events from the proxy's JSONL file, oldest first; a half-written last line is skipped."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    events: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    for raw in lines[:-1]:  # the part after the last newline is incomplete (or empty)
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if since_ts is None or event.get("ts", 0.0) >= since_ts:
            events.append(event)
    return events
