"""Warnings that reach the user once.

Library code logs (``logging``); a command line or node also passes a ``progress`` callback that
prints lines as the work goes. A warning given to both would print twice (issue 22: every
identification warning appeared as ``WARNING sysid_ros...`` and as ``[sysid identify] warning:``).
:func:`warn` sends it to ``progress`` when there is one and logs it marked as shown; a front end
that prints ``progress`` drops the marked records from its log handler (:func:`not_shown`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

#: attribute of a log record whose message already reached the user through ``progress``
SHOWN = "sysid_shown"


def warn(logger: logging.Logger, progress: Callable[[str], None] | None, line: str) -> None:
    """``line`` as a warning: to ``progress`` (prefixed ``warning:``) when given, and to
    ``logger`` (marked :data:`SHOWN` when ``progress`` printed it)."""
    if progress is not None:
        progress(f"warning: {line}")
    logger.warning("%s", line, extra={SHOWN: progress is not None})


def not_shown(record: logging.LogRecord) -> bool:
    """A log filter: False for records whose message :func:`warn` already gave to ``progress``."""
    return not getattr(record, SHOWN, False)
