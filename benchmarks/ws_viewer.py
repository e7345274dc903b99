"""A viewer that speaks Streamlit's own websocket protocol instead of running a browser.

Thirty Chromium pages do not fit on two cores beside the dashboard and the run they watch:
their rendering takes the CPU the run needs, and the benchmark would measure the browsers.
This client does what a viewer's browser asks of the server and nothing more: it opens a
session on a page (a `rerun_script` BackMsg), reruns each fragment at the interval the server
asks for (`auto_rerun`, dropped when a full script run no longer registers it), and reads the
deltas the server sends back. The server's work per viewer is therefore the same as for a
browser; the drawing is left out.

A page is asked for by its URL path (`page_name` in the rerun request, e.g. "metrics"), as a
browser opening http://host/metrics does; Streamlit's st.navigation matches it against each
page's `url_pathname` and the `navigation` message it sends back gives the page's script hash,
which later requests carry.

Used by benchmarks/room_load.py (`--client ws`, and `--metrics-viewers`).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

RUN_CAPTION = re.compile(r"[Rr]un `([^`]+)`")  # pages._run_view.render_run: "· run `ID`"
FULL_DONE = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_SUCCESSFULLY")


def page_request(
    page_name: str, page_hash: str = "", *, fragment_id: str = "", auto: bool = False
) -> BackMsg:
    """The BackMsg a browser sends to run `page_name` (a URL path), or one of its fragments."""
    msg = BackMsg()
    state = msg.rerun_script
    state.page_name, state.page_script_hash = page_name, page_hash
    if fragment_id:
        state.fragment_id, state.is_auto_rerun = fragment_id, auto
    return msg


def element_text(element) -> str:
    """The text of a markdown (caption, write) or alert (st.info, st.warning...) element."""
    kind = element.WhichOneof("type")
    if kind == "markdown":
        return element.markdown.body
    if kind == "alert":
        return element.alert.body
    return ""


@dataclass
class WsViewer:
    """One viewer's session on `page` (its URL path, e.g. "failure_lab")."""

    url: str
    page: str
    watch: tuple[str, ...] = ()  # texts whose first appearance is noted in `found`
    seen: dict[str, float] = field(default_factory=dict)  # run id -> when its result showed
    found: dict[str, float] = field(default_factory=dict)  # watched text -> when it showed
    loaded_at: float | None = None  # when the first full script run finished (epoch s)
    page_not_found: bool = False
    messages: int = 0
    page_hash: str = ""
    timers: dict[str, float] = field(default_factory=dict)  # fragment id -> interval (s)
    _registering: dict[str, float] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)
    _running: bool = True  # a script run is under way (the first starts on connect)
    # The Lesson page's vote, as the page drew it: the radio's widget id and its options.
    ballot: tuple[str, tuple[str, ...]] | None = None
    voted_at: float | None = None  # when this viewer's vote was sent (epoch s)
    _outbox: list[BackMsg] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        stream = self.url.replace("http://", "ws://") + "/_stcore/stream"
        # No keepalive pings: a browser sends none, and a server busy drawing sixty pages
        # answers them late, which would close a connection a browser keeps.
        async with websockets.connect(
            stream, subprotocols=["streamlit"], max_size=None, ping_interval=None
        ) as ws:
            await ws.send(self._rerun(page_name=self.page).SerializeToString())
            while not stop.is_set():
                while self._outbox:
                    await ws.send(self._outbox.pop(0).SerializeToString())
                    self.voted_at = time.time()
                await self._rerun_due_fragments(ws)
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.05)
                except TimeoutError:
                    continue
                self._read(raw if isinstance(raw, bytes) else raw.encode())

    def vote(self, option: str) -> None:
        """Vote as a browser does: a rerun carrying the radio's new value (the option's text:
        Streamlit 1.67's radio is a string_value widget), which runs the radio's callback on
        the server. Sent by the viewer's own loop."""
        assert self.ballot is not None, "the page has drawn no vote"
        widget, options = self.ballot
        msg = self._rerun()
        state = msg.rerun_script.widget_states.widgets.add()
        assert option in options
        state.id, state.string_value = widget, option
        self._outbox.append(msg)

    def _rerun(self, *, page_name: str = "", fragment_id: str = "", auto: bool = False) -> BackMsg:
        return page_request(page_name, self.page_hash, fragment_id=fragment_id, auto=auto)

    async def _rerun_due_fragments(self, ws) -> None:
        # As the browser does: a fragment's timer does not interrupt a script run under way.
        if self._running:
            return
        now = time.monotonic()
        for fragment, interval in self.timers.items():
            due = self._due.setdefault(fragment, now + interval)
            if now >= due:
                self._due[fragment] = now + interval
                rerun = self._rerun(fragment_id=fragment, auto=True)
                self._running = True
                await ws.send(rerun.SerializeToString())

    def _read(self, raw: bytes) -> None:
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        self.messages += 1
        kind = msg.WhichOneof("type")
        if kind == "navigation":
            for page in msg.navigation.app_pages:
                if page.url_pathname == self.page:
                    self.page_hash = page.page_script_hash
        elif kind == "auto_rerun":
            self._registering[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
        elif kind == "new_session":
            self._running = True
        elif kind == "script_finished":
            self._running = msg.script_finished == ForwardMsg.ScriptFinishedStatus.Value(
                "FINISHED_EARLY_FOR_RERUN"
            )
            if msg.script_finished == FULL_DONE:  # the fragments of this full run, only
                if self.loaded_at is None:
                    self.loaded_at = time.time()
                self.timers = dict(self._registering)
                self._due = {f: t for f, t in self._due.items() if f in self.timers}
            self._registering = {}
        elif kind == "page_not_found":
            self.page_not_found = True
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            if element.WhichOneof("type") == "radio" and element.radio.label == "Your vote":
                self.ballot = (element.radio.id, tuple(element.radio.options))
            body = element_text(element)
            if match := RUN_CAPTION.search(body):
                self.seen.setdefault(match.group(1), time.time())
            for text in self.watch:
                if text in body:
                    self.found.setdefault(text, time.time())
