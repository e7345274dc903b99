"""What the lab's command lines share: running one command, so that every failure a user
can meet ends as one line on stderr and a non-zero exit code (LAB_DEBUG=1 shows the
traceback of an unexpected error).

engine/commands/cli.py (`python -m engine ...`) and engine/commands/logs_cli.py
(`python -m engine.commands.logs_cli ...`) both run their commands through `run_command`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from engine.base import settings
from engine.base.errors import LabError


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; every failure ends as one line on stderr and a non-zero exit code."""
    try:
        return func(args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if settings.DEBUG.get():
            raise
        print(
            f"error: unexpected {type(exc).__name__}: {exc}. Rerun with LAB_DEBUG=1 for details.",
            file=sys.stderr,
        )
        return 1
