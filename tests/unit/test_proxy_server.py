"""The fault proxy end to end against a tiny fake broker that speaks Kafka framing (no Kafka)."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.kafka.wire import FrameSplitter, encode_frame
from engine.proxy.control import ProxyControl, ProxyControlError, read_events, start_control_server
from engine.proxy.framing import parse_produce_acks, parse_request_header
from engine.proxy.rules import RuleError, RuleSet
from engine.proxy.server import Proxy, Route

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]

# -- wire helpers ------------------------------------------------------------------------------


def request(
    api_key: int, version: int, corr: int, client_id: str | None, body: bytes, v2: bool = False
) -> bytes:
    """A request payload with header v1, or v2 (an empty tagged-field section) if `v2`."""
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id))
    h = struct.pack(">hhi", api_key, version, corr) + cid + (client_id or "").encode()
    return h + (b"\x00" if v2 else b"") + body


def produce(
    corr: int, acks: int = -1, client_id: str = "producer", txn: str | None = None
) -> bytes:
    """Produce v7: transactional_id STRING, acks, timeout, then a stand-in for topic data."""
    t = struct.pack(">h", -1) if txn is None else struct.pack(">h", len(txn)) + txn.encode()
    return request(0, 7, corr, client_id, t + struct.pack(">hi", acks, 30000) + b"batch" * 20)


def response_for(req: bytes) -> bytes:
    """What the fake broker answers: the request's correlation id, then an echo."""
    return req[4:8] + b"\x00response:" + req


def corr_of(frame: bytes) -> int:
    return struct.unpack(">i", frame[:4])[0]


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def wait_for(cond: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class FakeBroker:
    """Reads request frames, answers each with response_for() (acks=0 Produce gets nothing)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        splitter = FrameSplitter()
        with conn:
            try:
                while data := conn.recv(65536):
                    for payload in splitter.feed(data):
                        with self._lock:
                            self.requests.append(payload)
                        h = parse_request_header(payload)
                        if h.api_key == 0 and parse_produce_acks(payload, h).acks == 0:
                            continue
                        conn.sendall(encode_frame(response_for(payload)))
            except OSError:
                pass
        with self._lock:
            self.closed += 1

    def corrs(self) -> list[int]:
        with self._lock:
            return [parse_request_header(r).correlation_id for r in self.requests]

    def close(self) -> None:
        self.sock.close()


class ProxyThread:
    """The proxy and its control server on an event loop in a background thread."""

    def __init__(self, routes: list[Route], events: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = Proxy(routes, events, connect_timeout=1.0)
        self.control_port = self._call(self._start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _start(self) -> int:
        await self.proxy.start()
        self.control = await start_control_server(self.proxy, "127.0.0.1", 0)
        return self.control.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self.control.close()
        await self.proxy.stop()

    def address(self, node: int) -> tuple[str, int]:
        return self.proxy.address(node)

    def stop(self) -> None:
        self._call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class Lab:
    def __init__(self, tmp_path: Path) -> None:
        self.broker = FakeBroker()
        self.events = tmp_path / "events" / "proxy-events.jsonl"
        routes = [Route(n, "127.0.0.1", 0, "127.0.0.1", self.broker.port) for n in (1, 2)]
        self.proxy = ProxyThread(routes, self.events)
        self.ctl = ProxyControl("127.0.0.1", self.proxy.control_port, timeout=5.0)
        self._socks: list[socket.socket] = []

    def connect(self, node: int = 1, timeout: float = 3.0) -> socket.socket:
        sock = socket.create_connection(self.proxy.address(node), timeout=timeout)
        self._socks.append(sock)
        return sock

    def roundtrip(self, payload: bytes, node: int = 1) -> bytes:
        sock = self.connect(node)
        sock.sendall(encode_frame(payload))
        return recv_frame(sock)

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in read_events(self.events) if e["kind"] == kind]

    def close(self) -> None:
        for s in self._socks:
            s.close()
        self.proxy.stop()
        self.broker.close()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    try:
        yield lab
    finally:
        lab.close()


def assert_reset(sock: socket.socket) -> None:
    """The proxy closed this client connection with an RST."""
    with pytest.raises(ConnectionResetError):
        recv_frame(sock)


def assert_silent(sock: socket.socket, seconds: float) -> None:
    """Nothing arrives, and the connection is not closed either."""
    sock.settimeout(seconds)
    with pytest.raises(TimeoutError):
        sock.recv(1)


# -- pass-through ------------------------------------------------------------------------------


def test_requests_and_responses_pass_byte_exact(lab: Lab) -> None:
    sent = [
        request(18, 3, 1, "rdkafka", b"\x08librdkafka\x041.0\x00", v2=True),  # ApiVersions v3
        request(3, 12, 2, "rdkafka", b"\x00" * 10, v2=True),  # Metadata, flexible
        produce(3, acks=-1, txn="tx-1"),
        request(1, 11, 4, None, bytes(range(256)) * 300),  # Fetch, null client id, 76 KB
    ]
    sock = lab.connect()
    stream = b"".join(encode_frame(p) for p in sent)
    for i in range(0, len(stream), 7000):  # frames cut at arbitrary points
        sock.sendall(stream[i : i + 7000])
    got = [recv_frame(sock) for _ in sent]
    assert got == [response_for(p) for p in sent]
    assert lab.broker.requests == sent
    status = lab.ctl.status()
    assert status["nodes"]["1"]["open_connections"] == 1
    assert status["nodes"]["1"]["produce_requests"] == 1
    assert status["nodes"]["2"]["open_connections"] == 0


def test_upstream_down_closes_client(tmp_path: Path) -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    proxy = ProxyThread([Route(1, "127.0.0.1", 0, "127.0.0.1", port)], tmp_path / "ev.jsonl")
    try:
        sock = socket.create_connection(proxy.address(1), timeout=3)
        with sock, pytest.raises((EOFError, ConnectionResetError)):
            recv_frame(sock)
        assert proxy.proxy.stats[1].upstream_connect_failures == 1
    finally:
        proxy.stop()


# -- dropping Produce responses ----------------------------------------------------------------


def test_nth_produce_response_dropped_then_reset(lab: Lab) -> None:
    t0 = time.time()
    rule_id = lab.ctl.drop_produce_responses(nth=3)
    sock = lab.connect()
    sock.sendall(encode_frame(request(3, 8, 1, "producer", b"")))  # not a Produce: not counted
    assert corr_of(recv_frame(sock)) == 1
    for corr in (2, 3):
        sock.sendall(encode_frame(produce(corr)))
        assert corr_of(recv_frame(sock)) == corr
    sock.sendall(encode_frame(produce(4, txn="tx-9")))
    assert_reset(sock)
    assert 4 in wait_for(lab.broker.corrs, what="request 4 at the broker")  # broker got it

    (dropped,) = lab.events_of("produce_response_dropped")
    assert dropped["node"] == 1 and dropped["rule_id"] == rule_id
    assert dropped["correlation_id"] == 4 and dropped["client_id"] == "producer"
    assert dropped["api_version"] == 7 and dropped["transactional_id"] == "tx-9"
    assert t0 <= dropped["ts"] <= time.time()
    (reset,) = lab.events_of("connection_reset")
    assert reset["reason"] == "produce_response_dropped" and reset["correlation_id"] == 4

    # The rule is spent: the next connection's Produce goes through.
    assert corr_of(lab.roundtrip(produce(5))) == 5
    status = lab.ctl.status()
    assert status["nodes"]["1"]["responses_dropped"] == 1
    assert status["nodes"]["1"]["connections_reset"] == 1
    assert status["active_rules"] == []


def test_count_drops_consecutive_requests(lab: Lab) -> None:
    lab.ctl.drop_produce_responses(nth=2, count=2)
    results = []
    for corr in range(1, 6):
        sock = lab.connect()
        sock.sendall(encode_frame(produce(corr)))
        try:
            results.append(corr_of(recv_frame(sock)) == corr)
        except ConnectionResetError:
            results.append(False)
    assert results == [True, False, False, True, True]


def test_hold_keeps_connection_open_and_silent(lab: Lab) -> None:
    lab.ctl.drop_produce_responses(nth=1, after="hold")
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1)))
    wait_for(lambda: 1 in lab.broker.corrs(), what="request at the broker")
    assert_silent(sock, 0.4)
    sock.sendall(encode_frame(request(3, 8, 2, "producer", b"")))  # still accepted ...
    assert_silent(sock, 0.4)  # ... but nothing comes back
    assert lab.broker.corrs() == [1]  # and nothing more reaches the broker
    (held,) = lab.events_of("connection_held")
    assert held["correlation_id"] == 1
    assert lab.ctl.status()["nodes"]["1"]["held_connections"] == 1

    closed_before = lab.broker.closed
    sock.close()  # the client gives up: the proxy lets go of the broker side too
    wait_for(lambda: lab.broker.closed > closed_before, what="upstream closed")


def test_a_lost_request_stalls_its_connection_as_tcp_does(lab: Lab) -> None:
    """Nothing behind a lost request reaches the broker on that connection."""
    lab.ctl.drop_produce_responses(nth=2, drop="request")
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1)))
    assert corr_of(recv_frame(sock)) == 1
    sock.sendall(encode_frame(produce(2)))  # lost
    sock.sendall(encode_frame(produce(3)))  # behind it: never delivered either
    assert_silent(sock, 0.4)
    assert lab.broker.corrs() == [1]
    (lost,) = lab.events_of("produce_request_dropped")
    (held,) = lab.events_of("connection_held")
    assert lost["correlation_id"] == held["correlation_id"] == 2
    sock.close()
    again = lab.connect()  # the client's retry, on a new connection, in order
    again.sendall(encode_frame(produce(2)))
    assert corr_of(recv_frame(again)) == 2


def test_acks0_requests_are_not_counted(lab: Lab) -> None:
    lab.ctl.drop_produce_responses(nth=2)
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1, acks=0)))  # fire and forget: no response, not counted
    sock.sendall(encode_frame(produce(2, acks=-1)))
    assert corr_of(recv_frame(sock)) == 2
    sock.sendall(encode_frame(produce(3, acks=0)))
    sock.sendall(encode_frame(produce(4, acks=1)))
    assert_reset(sock)
    assert lab.events_of("produce_response_dropped")[0]["correlation_id"] == 4
    status = lab.ctl.status()["nodes"]["1"]
    assert status["produce_requests"] == 2 and status["produce_requests_acks0"] == 2


def test_client_id_prefix_and_node_filters(lab: Lab) -> None:
    lab.ctl.drop_produce_responses(nth=1, client_id_prefix="victim", node=2)
    assert corr_of(lab.roundtrip(produce(1, client_id="bystander"), node=2)) == 1
    assert corr_of(lab.roundtrip(produce(2, client_id="victim-a"), node=1)) == 2  # other node
    sock = lab.connect(node=2)
    sock.sendall(encode_frame(produce(3, client_id="victim-a")))
    assert_reset(sock)
    (ev,) = lab.events_of("produce_response_dropped")
    assert ev["node"] == 2 and ev["client_id"] == "victim-a"


def test_window_targeting(lab: Lab) -> None:
    start = time.time() + 0.4
    lab.ctl.drop_produce_responses(window_start=start, window_end=start + 0.5)

    def delivered(corr: int) -> bool:
        sock = lab.connect()
        sock.sendall(encode_frame(produce(corr)))
        try:
            return corr_of(recv_frame(sock)) == corr
        except ConnectionResetError:
            return False

    assert delivered(1)  # before the window
    time.sleep(max(0.0, start + 0.05 - time.time()))
    assert not delivered(2)  # every one inside the window
    assert not delivered(3)
    time.sleep(max(0.0, start + 0.6 - time.time()))
    assert delivered(4)  # after it
    assert [e["correlation_id"] for e in lab.events_of("produce_response_dropped")] == [2, 3]
    assert lab.ctl.status()["active_rules"] == []


def test_probability_is_reproducible_with_seed(lab: Lab) -> None:
    lab.ctl.drop_produce_responses(probability=0.5, seed=42)
    rng = random.Random(42)
    expected = [rng.random() >= 0.5 for _ in range(20)]  # True = delivered
    got = []
    sock = lab.connect()
    for corr in range(20):
        sock.sendall(encode_frame(produce(corr)))
        try:
            got.append(corr_of(recv_frame(sock)) == corr)
        except ConnectionResetError:
            got.append(False)
            sock = lab.connect()
    assert got == expected
    assert 0 < sum(got) < 20


def test_probability_with_max_drops(lab: Lab) -> None:
    lab.ctl.drop_produce_responses(probability=1.0, max_drops=2, after="reset")
    outcomes = []
    for corr in range(4):
        sock = lab.connect()
        sock.sendall(encode_frame(produce(corr)))
        try:
            outcomes.append(corr_of(recv_frame(sock)))
        except ConnectionResetError:
            outcomes.append(None)
    assert outcomes == [None, None, 2, 3]


def test_remove_rule_and_bad_rules(lab: Lab) -> None:
    rule_id = lab.ctl.drop_produce_responses(nth=1)
    assert lab.ctl.remove_rule(rule_id) is True
    assert lab.ctl.remove_rule(rule_id) is False
    assert corr_of(lab.roundtrip(produce(1))) == 1
    with pytest.raises(ProxyControlError, match="probability"):
        lab.ctl.drop_produce_responses(probability=1.5)
    with pytest.raises(ProxyControlError, match="exactly one"):
        lab.ctl.drop_produce_responses(nth=1, probability=0.5)
    with pytest.raises(ProxyControlError, match="after"):
        lab.ctl.drop_produce_responses(nth=1, after="explode")
    with pytest.raises(ProxyControlError, match="unknown node"):
        lab.ctl.drop_produce_responses(nth=1, node=7)
    assert lab.ctl.status()["rules"] == []


def test_removing_a_rule_cancels_its_pending_drops(lab: Lab) -> None:
    lab.ctl.set_latency(300)  # keeps the request on its way long enough to change our mind
    rule_id = lab.ctl.drop_produce_responses(nth=1)
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1)))
    wait_for(lambda: lab.ctl.status()["nodes"]["1"]["produce_requests"] == 1, what="request")
    lab.ctl.remove_rule(rule_id)
    assert corr_of(recv_frame(sock)) == 1
    assert lab.events_of("produce_response_dropped") == []


def test_rule_logic_without_network() -> None:
    rules = RuleSet()
    nth = rules.add(nth=2, count=2, client_id_prefix="a")
    assert rules.evaluate(1, "b", 0.0) is None and nth.matched == 0  # filtered out: not counted
    assert [rules.evaluate(1, "a1", 0.0) is nth for _ in range(4)] == [False, True, True, False]
    assert nth.spent() and nth.matched == 3  # a spent rule stops counting
    assert rules.add().nth == 1  # no targeting: the next one
    with pytest.raises(RuleError):
        rules.add(window_start=10.0, window_end=5.0)
    with pytest.raises(RuleError):
        rules.add(nth="three")
    with pytest.raises(RuleError):
        rules.add(nth=1, colour="red")


# -- latency -----------------------------------------------------------------------------------


def test_latency_delays_both_directions_and_keeps_order(lab: Lab) -> None:
    sock = lab.connect()
    sock.sendall(encode_frame(produce(0)))
    recv_frame(sock)  # connection established upstream before timing

    lab.ctl.set_latency(150)
    t = time.monotonic()
    sock.sendall(encode_frame(produce(1)))
    recv_frame(sock)
    rtt = time.monotonic() - t
    assert 0.28 <= rtt < 0.8, rtt  # 150 ms each way

    lab.ctl.set_latency(40, jitter_ms=40)
    sock.sendall(b"".join(encode_frame(produce(c)) for c in range(10, 30)))
    assert [corr_of(recv_frame(sock)) for _ in range(20)] == list(range(10, 30))
    assert lab.broker.corrs()[-20:] == list(range(10, 30))

    lab.ctl.set_latency(0)
    t = time.monotonic()
    sock.sendall(encode_frame(produce(99)))
    recv_frame(sock)
    assert time.monotonic() - t < 0.1
    kinds = [(e["ms"], e["node"]) for e in lab.events_of("latency_set")]
    assert kinds == [(150.0, None), (40.0, None), (0.0, None)]
    assert lab.ctl.status()["latency"] == []


def test_latency_for_one_node_only(lab: Lab) -> None:
    lab.ctl.set_latency(200, node=2)
    t = time.monotonic()
    lab.roundtrip(produce(1), node=1)
    assert time.monotonic() - t < 0.15
    t = time.monotonic()
    lab.roundtrip(produce(2), node=2)
    assert time.monotonic() - t >= 0.38


# -- blackhole and resets ----------------------------------------------------------------------


def test_blackhole_holds_then_flushes(lab: Lab) -> None:
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1)))
    recv_frame(sock)
    before = len(lab.broker.requests)

    lab.ctl.blackhole(0.8)
    t = time.monotonic()
    sock.sendall(encode_frame(produce(2)))
    late = lab.connect()  # accepted, but not connected upstream until the partition ends
    late.sendall(encode_frame(produce(3)))
    time.sleep(0.4)
    assert len(lab.broker.requests) == before
    assert lab.broker.connections == 1
    assert lab.ctl.status()["nodes"]["1"]["blackholed"] is True

    sock.settimeout(3)
    assert corr_of(recv_frame(sock)) == 2  # delivered once the partition ends
    assert corr_of(recv_frame(late)) == 3
    assert time.monotonic() - t >= 0.7
    start, end = lab.events_of("blackhole_start")[0], lab.events_of("blackhole_end")[0]
    assert start["then"] == "flush" and start["connections"] == 1
    assert end["reason"] == "expired" and 0.7 <= end["ts"] - start["ts"] < 2.0


def test_blackhole_then_reset(lab: Lab) -> None:
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1)))
    recv_frame(sock)
    lab.ctl.blackhole(0.4, then="reset", node=1)
    other = lab.connect(node=2)
    other.sendall(encode_frame(produce(5)))
    assert corr_of(recv_frame(other)) == 5  # node 2 is not partitioned
    sock.sendall(encode_frame(produce(2)))
    assert_reset(sock)
    assert 2 not in lab.broker.corrs()  # buffered data was never delivered
    assert lab.events_of("blackhole_end")[0]["connections_reset"] == 1
    assert corr_of(lab.roundtrip(produce(3))) == 3  # new connections work again


def test_heal_ends_blackhole_early(lab: Lab) -> None:
    lab.ctl.blackhole(30)
    sock = lab.connect()
    sock.sendall(encode_frame(produce(1)))
    assert_silent(sock, 0.3)
    assert lab.ctl.heal() == 1
    sock.settimeout(3)
    assert corr_of(recv_frame(sock)) == 1
    assert lab.events_of("blackhole_end")[0]["reason"] == "healed"


def test_reset_connections_and_clear(lab: Lab) -> None:
    socks = [lab.connect(1), lab.connect(1), lab.connect(2)]
    for i, s in enumerate(socks):
        s.sendall(encode_frame(produce(i)))
        recv_frame(s)
    assert lab.ctl.reset_connections(node=1) == 2
    assert_reset(socks[0])
    assert_reset(socks[1])
    socks[2].sendall(encode_frame(produce(9)))
    assert corr_of(recv_frame(socks[2])) == 9
    assert lab.ctl.reset_connections() == 1
    assert_reset(socks[2])

    lab.ctl.drop_produce_responses(nth=1)
    lab.ctl.set_latency(500)
    lab.ctl.blackhole(30)
    lab.ctl.clear()
    t = time.monotonic()
    assert corr_of(lab.roundtrip(produce(1))) == 1
    assert time.monotonic() - t < 0.3
    status = lab.ctl.status()
    assert status["rules"] == [] and status["latency"] == [] and status["blackholes"] == []
    assert lab.events_of("rules_cleared")[0]["rules"] == 1


# -- events and control channel ----------------------------------------------------------------


def test_events_file(lab: Lab, tmp_path: Path) -> None:
    started = lab.events_of("proxy_started")
    assert sorted(e["node"] for e in started) == [1, 2]
    assert all(isinstance(e["ts"], float) for e in started)
    mid = time.time()
    lab.ctl.set_latency(5)
    events = read_events(lab.events, since_ts=mid)
    assert [e["kind"] for e in events] == ["latency_set"]
    ts = [e["ts"] for e in read_events(lab.events)]
    assert ts == sorted(ts)

    partial = tmp_path / "partial.jsonl"
    partial.write_text('{"ts": 1.0, "kind": "a", "node": 1}\nnot json\n{"ts": 2.0, "ki')
    assert read_events(partial) == [{"ts": 1.0, "kind": "a", "node": 1}]
    assert read_events(tmp_path / "missing.jsonl") == []


def test_malformed_control_commands_get_errors(lab: Lab) -> None:
    with socket.create_connection(("127.0.0.1", lab.proxy.control_port), timeout=3) as sock:
        f = sock.makefile("rwb")
        for line in (
            b"this is not json",
            b"[1, 2, 3]",
            b'{"cmd": "launch_missiles"}',
            b'{"no_cmd": true}',
            b'{"cmd": "drop_produce_responses", "nth": "third"}',
            b'{"cmd": "blackhole"}',
            b'{"cmd": "set_latency", "ms": 10, "bogus": 1}',
            b'{"cmd": "remove_rule", "rule_id": [1]}',
            b'{"cmd": "blackhole", "duration_s": -1}',
        ):
            f.write(line + b"\n")
            f.flush()
            answer = json.loads(f.readline())
            assert answer["ok"] is False and answer["error"], line
        f.write(b'{"cmd": "ping"}\n')
        f.flush()
        assert json.loads(f.readline())["ok"] is True
    assert lab.ctl.ping()
    assert corr_of(lab.roundtrip(produce(1))) == 1


# -- the real process --------------------------------------------------------------------------


def _start_cli(broker: FakeBroker, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.proxy",
            "--route",
            f"1:127.0.0.1:0:127.0.0.1:{broker.port}",
            "--control",
            "127.0.0.1:0",
            "--events",
            str(tmp_path / "cli-events.jsonl"),
            *extra,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def test_cli_process_serves_and_exits_on_sigterm(tmp_path: Path) -> None:
    broker = FakeBroker()
    proc, ready = _start_cli(broker, tmp_path)
    try:
        host, port = ready["control"].rsplit(":", 1)
        ctl = ProxyControl(host, int(port))
        ctl.wait_ready(5)
        ctl.drop_produce_responses(nth=2)
        lhost, lport = ready["nodes"]["1"].rsplit(":", 1)
        with socket.create_connection((lhost, int(lport)), timeout=3) as sock:
            sock.sendall(encode_frame(produce(1)))
            assert recv_frame(sock) == response_for(produce(1))
            sock.sendall(encode_frame(produce(2)))
            assert_reset(sock)
        proc.terminate()
        assert proc.wait(5) == 0
        kinds = [e["kind"] for e in read_events(tmp_path / "cli-events.jsonl")]
        assert kinds[0] == "proxy_started" and "produce_response_dropped" in kinds
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        broker.close()


def test_cli_exits_when_parent_pid_is_gone(tmp_path: Path) -> None:
    broker = FakeBroker()
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc, _ = _start_cli(broker, tmp_path, "--parent-pid", str(parent.pid))
    try:
        time.sleep(0.3)
        assert proc.poll() is None
        parent.kill()
        parent.wait()  # reaped, so the pid is really gone (a zombie still "exists")
        assert proc.wait(5) == 0
    finally:
        for p in (proc, parent):
            if p.poll() is None:
                p.kill()
                p.wait()
        broker.close()


def test_route_parsing() -> None:
    assert Route.parse("3:0.0.0.0:19093:broker-3:29092") == Route(
        3, "0.0.0.0", 19093, "broker-3", 29092
    )
    for bad in ("1:127.0.0.1:19092", "x:h:1:h:2", "1:h:port:h:2"):
        with pytest.raises(ValueError):
            Route.parse(bad)
