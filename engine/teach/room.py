"""Serving a room: the presenter acts, everyone else watches.

A dashboard bound to loopback (127.0.0.1, localhost, ::1) serves one person, who may do
everything. Bound to anything else (`LAB_ADDRESS=0.0.0.0`), it serves a room: a browser
becomes the presenter by opening the presenter link, which carries the presenter key, and
every other browser is a viewer who watches and looks around but cannot act (several
browsers may open the link: each is a presenter). The key comes
from `LAB_PRESENTER_KEY`, or is made when the dashboard starts and printed once in its
terminal, as Jupyter prints its token. Keys are compared in constant time (hmac).

What a session is allowed to do is decided on the server (pages/_roles.py keeps each
session's role by Streamlit's own session id: a random id the server makes and sends only to
that browser; Streamlit lets a browser resume a session whose id it knows, so the id is kept
out of every address, page and log); this module holds the rules, with no Streamlit in it.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Mapping

from engine.base import settings
from engine.base.errors import LabError

KEY_ENV = settings.PRESENTER_KEY.name
KEY_PARAM = "key"  # the presenter link's query parameter
PRESENTER, VIEWER = "presenter", "viewer"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

log = logging.getLogger("lab.room")


class PresenterKeyError(LabError):
    """The dashboard would serve a room with no usable presenter key."""


class UnsafeRoomError(PresenterKeyError):
    """The dashboard would serve a room in a mode where any browser can stop it."""


class NotPresenterError(LabError):
    """A viewer's session asked for an action only the presenter may take."""


def serves_a_room(address: str | None) -> bool:
    """Whether a dashboard bound to `address` is reachable beyond this machine.

    An empty address is Streamlit's default, every interface, so it serves a room too.
    """
    return (address or "").strip().lower() not in LOOPBACK


def configured_key(address: str | None, env: Mapping[str, str]) -> str | None:
    """The key set in the environment for a room; None when none is set or none is needed.

    A key set but empty is refused: it would make every link the presenter's.
    """
    if not serves_a_room(address) or KEY_ENV not in env:
        return None
    key = env[KEY_ENV]
    if not key.strip():
        raise PresenterKeyError(
            f"{KEY_ENV} is empty, and the dashboard listens on {address or 'every interface'}: "
            f"set it to a secret, or unset it and one is made and printed at start."
        )
    if len(key) < MIN_KEY_LENGTH:
        raise PresenterKeyError(
            f"{KEY_ENV} has {len(key)} characters; a room's presenter key needs at least "
            f"{MIN_KEY_LENGTH} (a short one is guessed): unset it and one is made and printed."
        )
    return key


# A key given to a room: guessing 16 characters at the one guess a second that a wrong key
# costs (pages._roles) is out of reach; make_key's has 24.
MIN_KEY_LENGTH = 16


def make_key() -> str:
    return secrets.token_urlsafe(18)


def key_matches(given: str, key: str) -> bool:
    """Constant-time comparison, so response times do not leak how much of a guess is right."""
    return hmac.compare_digest(given.encode(), key.encode())


def presenter_links(address: str | None, port: int, key: str, hostname: str) -> list[str]:
    """The links to print: the host's name for the room, and loopback for this machine."""
    hosts = [hostname] if not (address or "").strip() or address == "0.0.0.0" else [address]
    return [f"http://{h}:{port}/?{KEY_PARAM}={key}" for h in [*hosts, "127.0.0.1"]]


def refuse(action: str, session: str) -> NotPresenterError:
    """Log a viewer's refused action (without any key) and the error its page shows."""
    log.warning("refused: a viewer's session %s asked to %s", session[:8], action)
    return NotPresenterError(
        f"Only the presenter can {action}: this browser is watching. The presenter link was "
        "printed in the terminal where the dashboard started."
    )
