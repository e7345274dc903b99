"""A viewer's hand-written websocket client sends every message type Streamlit accepts from a
browser, and nothing shared changes (issue 60).

The dashboard is served as a room (bound to 0.0.0.0, with a presenter key), with no cluster
(LAB_AUTOSTART=0): no message here needs Kafka. A presenter and a viewer talk to it as
benchmarks/ws_viewer.py does, in Streamlit's own protocol. The viewer sends one of each BackMsg
type but `rerun_script` (its page loads are reruns; a rerun aimed at the presenter's controls
is refused by the actions themselves, tests/ui/test_room_roles.py), each backend operation's
payload among them, twice. Then the server still answers, the presenter's session is still the
presenter's, both pages say what they said before, the state and runs folders hold what they
held, and the log says once, for each refused kind, that a viewer's message was refused.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from benchmarks.ws_viewer import element_text, page_request
from engine.base import paths
from engine.commands.dashboard import serve_dashboard, stop_group
from engine.teach.room import KEY_ENV, KEY_PARAM

KEY = "viewer-messages-key-0123456789"
PAGE = "failure_lab"
WATCHING = "You are watching the presenter"
RUN_BUTTON = "▶ Run"
FULL_RUN = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_SUCCESSFULLY")
# What pages/_roles.py refuses for a viewer, as its log line names each kind.
REFUSED = (
    "clear_cache",
    "load_git_info",
    "file_urls_request",
    "backend_operation_request (deferred_file)",
    "backend_operation_request (install_skills)",
    "backend_operation_request (dismiss_skills_nudge)",
)
# Streamlit's websocket drops these itself outside its development modes, with its own warning.
STREAMLIT_DROPS = {
    "debug_disconnect_websocket": "Client tried to disconnect websocket when not in",
    "debug_shutdown_runtime": "Client tried to shut down runtime when not in",
}


@dataclass
class Room:
    url: str
    log: Path
    state: Path  # the lab's state and runs folders


@pytest.fixture(scope="module")
def room(tmp_path_factory) -> Iterator[Room]:
    folder = tmp_path_factory.mktemp("viewer-messages")
    env = {
        **os.environ,
        "LAB_STATE_DIR": str(folder / "lab" / "state"),
        "LAB_RUNS_DIR": str(folder / "lab" / "runs"),
        "LAB_AUTOSTART": "0",  # no cluster: nothing here needs one
        "LAB_SPARK_AUTOSTART": "0",
        KEY_ENV: KEY,
        # Both modes would let debug_shutdown_runtime stop the server; the lab's command turns
        # them off whatever the environment says.
        "STREAMLIT_GLOBAL_E2E_TEST": "true",
        "STREAMLIT_GLOBAL_DEVELOPMENT_MODE": "true",
    }
    run = folder / "lab" / "runs" / "20261202-000000-ack-loss-abcd"  # a presenter's past run
    run.mkdir(parents=True)
    meta = {"run_id": run.name, "scenario": "ack-loss", "status": "complete"}
    (run / "run.json").write_text(json.dumps({**meta, "started_at": time.time()}))
    (run / "result.json").write_text(json.dumps({"results": {}}))
    log = folder / "dashboard.log"
    server, url = serve_dashboard(env, address="0.0.0.0", log=log)
    try:
        yield Room(url, log, folder / "lab")
    finally:
        stop_group(server)


@dataclass
class Page:
    texts: list[str]
    buttons: list[str]


class Browser:
    """One session's websocket, as a browser's: it asks for pages and reads the answers."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.session_id = ""
        self.kinds: list[str] = []  # every ForwardMsg type received, in order
        self.responses: list[ForwardMsg] = []  # backend operation responses
        self.run_on_save: bool | None = None  # as the session's latest status says
        self.elements: list = []  # every element drawn, in order (cleared by the test)

    @classmethod
    async def open(cls, url: str, *, resume: str = "", source: str = "127.0.0.1") -> Browser:
        """A websocket from the address `source` (any of 127/8 reaches the dashboard as
        another machine would); `resume` names a session to reconnect to, as a browser's
        reconnect (or a copied id) does in the subprotocol header's third entry."""
        stream = url.replace("http://", "ws://") + "/_stcore/stream"
        ws = await websockets.connect(
            stream,
            subprotocols=["streamlit", "no-xsrf", resume] if resume else ["streamlit"],
            max_size=None,
            ping_interval=None,
            local_addr=(source, 0),
        )
        return cls(ws)

    async def load(self, page: str, query: str = "") -> Page:
        request = page_request(page)
        request.rerun_script.query_string = query
        await self.send(request)
        drawn = Page([], [])
        while True:
            msg = await self._receive(30)
            if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                if text := element_text(element):
                    drawn.texts.append(text)
                if element.WhichOneof("type") == "button":
                    drawn.buttons.append(element.button.label)
            if msg.WhichOneof("type") == "script_finished" and msg.script_finished == FULL_RUN:
                return drawn

    async def send(self, msg: BackMsg) -> None:
        await self.ws.send(msg.SerializeToString())

    async def settle(self, timeout: float = 30) -> None:
        """Read until the script run under way ends (a rerun the last message asked for)."""
        while True:
            msg = await self._receive(timeout)
            if msg.WhichOneof("type") == "script_finished" and msg.script_finished == FULL_RUN:
                return

    async def listen(self, seconds: float) -> None:
        """Read what comes for `seconds`."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                await self._receive(left)
            except TimeoutError:
                return

    async def _receive(self, timeout: float) -> ForwardMsg:
        msg = ForwardMsg()
        msg.ParseFromString(await asyncio.wait_for(self.ws.recv(), timeout))
        kind = msg.WhichOneof("type")
        self.kinds.append(kind)
        if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            self.elements.append(msg.delta.new_element)
        if kind == "new_session":
            self.session_id = msg.new_session.initialize.session_id
        elif kind == "backend_operation_response":
            self.responses.append(msg)
        elif kind == "session_status_changed":
            self.run_on_save = msg.session_status_changed.run_on_save
        return msg


def every_message_but_rerun(session_id: str) -> list[BackMsg]:
    """One BackMsg of each type Streamlit accepts but rerun_script, with plausible contents:
    one for each backend operation payload, each naming the sender's own session (as
    Streamlit requires, so that only the lab's guard stands in the way)."""
    messages = []
    for field in BackMsg.DESCRIPTOR.oneofs_by_name["type"].fields:
        if field.name == "rerun_script":
            continue
        if field.name == "backend_operation_request":
            for payload in field.message_type.oneofs_by_name["payload"].fields:
                msg = BackMsg()
                request = msg.backend_operation_request
                request.request_id, request.session_id = payload.name, session_id
                if payload.name == "deferred_file":
                    request.deferred_file.file_id = "0" * 56  # a media file id's shape
                elif payload.name == "dataframe_chunk":
                    request.dataframe_chunk.source_id = "no-such-source"
                    request.dataframe_chunk.limit = 10
                else:
                    getattr(request, payload.name).SetInParent()
                messages.append(msg)
            continue
        msg = BackMsg()
        if field.name == "file_urls_request":
            msg.file_urls_request.request_id = "upload-1"
            msg.file_urls_request.file_names.append("notes.txt")
            msg.file_urls_request.session_id = session_id
        else:
            setattr(msg, field.name, True)
        messages.append(msg)
    return messages


def health(url: str) -> bytes:
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as answer:
        return answer.read()


def files(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its size (the lab's state and runs)."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def test_every_message_a_viewer_can_send_leaves_the_room_as_it_was(room):
    asyncio.run(every_message_a_viewer_can_send(room))


async def every_message_a_viewer_can_send(room: Room) -> None:
    presenter = await Browser.open(room.url)
    viewer = await Browser.open(room.url)
    try:
        presenting = await presenter.load(PAGE, f"{KEY_PARAM}={KEY}")
        watching = await viewer.load(PAGE)
        assert RUN_BUTTON in presenting.buttons and not any(WATCHING in t for t in presenting.texts)
        assert RUN_BUTTON not in watching.buttons and any(WATCHING in t for t in watching.texts)
        assert viewer.session_id and viewer.session_id != presenter.session_id
        shared_files = files(room.state)
        assert shared_files
        repo_names = sorted(p.name for p in paths.REPO_ROOT.iterdir())

        messages = every_message_but_rerun(viewer.session_id)
        sent = {m.WhichOneof("type") for m in messages}
        assert sent == {f.name for f in BackMsg.DESCRIPTOR.fields} - {"rerun_script"}
        viewer.kinds.clear()
        for _ in range(2):  # the second time logs nothing new
            for msg in messages:
                await viewer.send(msg)
        await viewer.listen(2.0)

        # What reached the viewer's own session answered it; what the lab refused did not.
        assert viewer.kinds.count("heartbeat_ack") == 2  # app_heartbeat
        assert viewer.run_on_save is True  # set_run_on_save, for its own session
        assert "file_urls_response" not in viewer.kinds
        assert "git_info_changed" not in viewer.kinds
        answered = {r.backend_operation_response.request_id for r in viewer.responses}
        assert answered == {"dataframe_chunk"}  # its own (missing) source: an error, to it

        # The server answers; the viewer's websocket is still open, and it is still a viewer.
        assert health(room.url) == b"ok"
        again = await viewer.load(PAGE)
        assert again.texts == watching.texts and again.buttons == watching.buttons
        # The presenter's session, with no key now, is still the presenter's, page unchanged.
        still = await presenter.load(PAGE)
        assert still.texts == presenting.texts and still.buttons == presenting.buttons
        assert files(room.state) == shared_files
        assert sorted(p.name for p in paths.REPO_ROOT.iterdir()) == repo_names

        # The presenter's own clear_cache is not refused.
        clear = BackMsg()
        clear.clear_cache = True
        await presenter.send(clear)
        await presenter.listen(0.5)
        assert RUN_BUTTON in (await presenter.load(PAGE)).buttons
    finally:
        await presenter.ws.close()
        await viewer.ws.close()

    log = room.log.read_text()
    for kind in REFUSED:
        line = f"A viewer's {kind} message was refused"
        assert log.count(line) == 1, (kind, log)
    assert log.count("message was refused") == len(REFUSED), log
    for warning in STREAMLIT_DROPS.values():
        assert log.count(warning) == 2, log  # Streamlit's own, each time
    for session in (viewer.session_id, presenter.session_id):
        assert session[:8] not in log, log


def test_a_copied_session_id_does_not_carry_the_presenter_role(room):
    asyncio.run(a_copied_session_id(room))


async def a_copied_session_id(room: Room) -> None:
    """On plain HTTP a session id can be read off the wire. Another laptop (here 127.0.0.2)
    that resumes the presenter's session with it is a viewer there; the presenter's own
    browser, reconnecting from its address, presents again; the log names neither id whole."""
    presenter = await Browser.open(room.url)
    presenting = await presenter.load(PAGE, f"{KEY_PARAM}={KEY}")
    assert RUN_BUTTON in presenting.buttons
    taken = presenter.session_id

    # While the presenter's tab is open: Streamlit hands the session to the newcomer.
    thief = await Browser.open(room.url, resume=taken, source="127.0.0.2")
    try:
        stolen = await thief.load(PAGE)
        assert "new_session" in thief.kinds and thief.session_id == taken  # resumed, not new
        assert RUN_BUTTON not in stolen.buttons
        assert any(WATCHING in text for text in stolen.texts), stolen.texts
        # A rerun naming the presenter's Run button from there is refused by the action itself
        # (tests/ui/test_room_roles.py); a presenter's message type is refused by the guard.
        clear = BackMsg()
        clear.clear_cache = True
        await thief.send(clear)
        await thief.listen(0.5)
    finally:
        await thief.ws.close()
        await presenter.ws.close()

    back = await Browser.open(room.url, resume=taken)  # the presenter's tab reconnects
    try:
        again = await back.load(PAGE)
        assert back.session_id == taken and RUN_BUTTON in again.buttons
    finally:
        await back.ws.close()

    log = room.log.read_text()
    assert "A viewer's clear_cache message was refused" in log
    assert taken not in log and taken[:8] in log, log  # Streamlit's reconnect line, shortened


def test_a_viewer_cannot_upload_a_file_into_the_servers_memory(room):
    asyncio.run(a_viewer_uploads(room))


async def a_viewer_uploads(room: Room) -> None:
    """Streamlit's upload route (an HTTP PUT beside the websocket, which the message guard
    does not see) stores a file for the session its address names, with no file uploader on
    the page. A viewer's 10 KB file, with a valid XSRF cookie and header, is refused (413):
    the dashboard starts Streamlit with server.maxUploadSize 0 (engine/commands/dashboard.py)."""
    viewer = await Browser.open(room.url)
    try:
        await viewer.load(PAGE)
        cookies = http.cookiejar.CookieJar()
        web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
        web.open(f"{room.url}/_stcore/health", timeout=10).read()  # sets the XSRF cookie
        token = next(c.value for c in cookies if c.name == "_streamlit_xsrf")
        body = (
            '--b\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\n'
            "Content-Type: text/plain\r\n\r\n" + "x" * 10_000 + "\r\n--b--\r\n"
        ).encode()
        upload = urllib.request.Request(
            f"{room.url}/_stcore/upload_file/{viewer.session_id}/{uuid.uuid4()}",
            data=body,
            method="PUT",
            headers={"Content-Type": "multipart/form-data; boundary=b", "X-Xsrftoken": token},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            web.open(upload, timeout=10)
        assert refused.value.code == 413, refused.value.read()
    finally:
        await viewer.ws.close()


def test_a_viewer_votes_its_own_vote_and_nothing_else(room):
    asyncio.run(a_viewer_votes(room))


def vote_message(widget: str, **value: object) -> BackMsg:
    msg = page_request("lesson")
    state = msg.rerun_script.widget_states.widgets.add()
    state.id = widget
    for field, given in value.items():
        setattr(state, field, given)
    return msg


async def a_viewer_votes(room: Room) -> None:
    """On the Lesson page a viewer's radio casts its own vote (issue 62): the presenter's
    tally counts it; an option the ballot lacks is refused on the viewer's page; a value of
    the wrong type (a crafted message) shows no stack trace, only the error's type."""
    presenter = await Browser.open(room.url)
    viewer = await Browser.open(room.url)
    try:
        presenting = await presenter.load("lesson", f"{KEY_PARAM}={KEY}")
        assert "**The room's vote: 0 votes**" in presenting.texts, presenting.texts
        await viewer.load("lesson")
        radio = next(e.radio for e in viewer.elements if e.WhichOneof("type") == "radio")
        assert radio.label == "Your vote" and list(radio.options) == ["one", "two", "none"]

        await viewer.send(vote_message(radio.id, string_value="two"))
        await viewer.settle()
        assert "**The room's vote: 1 vote**" in (await presenter.load("lesson")).texts

        viewer.elements.clear()
        await viewer.send(vote_message(radio.id, string_value="three"))
        await viewer.settle()
        texts = [element_text(e) for e in viewer.elements]
        assert "“three” is not one of this step's options." in texts, texts

        viewer.elements.clear()
        await viewer.send(vote_message(radio.id, int_value=1))  # a radio sends strings
        await viewer.settle()
        errors = [e.exception for e in viewer.elements if e.WhichOneof("type") == "exception"]
        assert errors and all(not e.stack_trace for e in errors), errors
        assert "**The room's vote: 1 vote**" in (await presenter.load("lesson")).texts
    finally:
        await presenter.ws.close()
        await viewer.ws.close()
