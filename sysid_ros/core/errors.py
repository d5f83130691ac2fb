"""One exception root for the whole package; messages say what was expected and what came."""

from __future__ import annotations


class SysIdError(Exception):
    """Root of every error raised on purpose by sysid_ros."""


class ModelError(SysIdError):
    """A robot model cannot be loaded or does not support what was asked of it."""


class DataError(SysIdError):
    """Measured or given data has the wrong shape, names, ordering or values (NaN, gaps...)."""


class IdentificationError(SysIdError):
    """An estimation problem cannot be solved (rank deficiency, solver failure...)."""


class InterruptError(SysIdError):
    """The user stopped the work (Ctrl-C, SIGINT, SIGTERM); the message says what was kept."""
