"""Opens the dashboard's home page the way a browser does, without one: fresh_root.sh's check.

    python open_page.py PORT [TIMEOUT_S]

Connects to Streamlit's websocket (/_stcore/stream), asks for a run of the page as a new
browser tab does, and reads what the server sends until the run finishes. Prints one line:
`PASS` or `FAIL`, then the run's end, the elements drawn, and any exception the page showed.
Exit code 0 only when the run finished successfully and showed no exception. It runs with the
lab's own .venv (streamlit and websockets are among its dependencies), so it needs nothing else.
"""

from __future__ import annotations

import sys
import time

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import connect


def main() -> int:
    port = int(sys.argv[1])
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    origin = f"http://127.0.0.1:{port}"
    elements, exceptions, finished = 0, [], None
    with connect(
        f"ws://127.0.0.1:{port}/_stcore/stream",
        subprotocols=["streamlit"],
        origin=origin,
        open_timeout=30,
        max_size=None,
    ) as websocket:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        rerun.rerun_script.page_script_hash = ""
        websocket.send(rerun.SerializeToString())
        deadline = time.monotonic() + timeout
        while finished is None and time.monotonic() < deadline:
            try:
                data = websocket.recv(timeout=max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                break
            message = ForwardMsg()
            message.ParseFromString(data)
            kind = message.WhichOneof("type")
            if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                elements += 1
                element = message.delta.new_element
                if element.WhichOneof("type") == "exception":
                    exceptions.append(f"{element.exception.type}: {element.exception.message}")
            elif kind == "script_finished":
                finished = ForwardMsg.ScriptFinishedStatus.Name(message.script_finished)
    ok = finished == "FINISHED_SUCCESSFULLY" and not exceptions
    print(
        ("PASS" if ok else "FAIL")
        + f" run: {finished or f'not finished within {timeout:.0f} s'}, {elements} elements"
        + (f", exceptions: {' | '.join(exceptions)[:400]}" if exceptions else "")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
