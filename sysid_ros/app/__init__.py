"""The application layer: the use cases the command line and the nodes share.

Each use case is one request type, one function and one outcome type; the CLI (``sysid_ros.cli``)
and the nodes (``sysid_ros.nodes``) are adapters that fill the request from their options or
parameters, call the function and format its outcome. Nothing here imports rclpy.

* :mod:`.identify` — ``IdentifyRequest -> run_identify -> IdentifyOutcome``: identification from
  recordings (``sysid identify``, the ``batch_solver`` node's ``BatchSolve``).

New features that a node and the CLI both offer go here (a request field, set by both adapters;
:data:`~sysid_ros.app.identify.REQUEST_SOURCES` lists where each field comes from), not into
either adapter.
"""

from sysid_ros.app.identify import REQUEST_SOURCES, IdentifyOutcome, IdentifyRequest, run_identify

__all__ = ["REQUEST_SOURCES", "IdentifyOutcome", "IdentifyRequest", "run_identify"]
