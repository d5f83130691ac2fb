"""The application layer: the use cases the command line and the nodes share.

Each use case is one request type, one function and one outcome type; the CLI (``sysid_ros.cli``)
and the nodes (``sysid_ros.nodes``) are adapters that fill the request from their options or
parameters, call the function and format its outcome. Nothing here imports rclpy.

* :mod:`.identify` — ``IdentifyRequest -> run_identify -> IdentifyOutcome``: identification from
  recordings (``sysid identify``, the ``batch_solver`` node's ``BatchSolve`` service and action).

A new option that both offer goes here (a request field), then into each adapter's table
(``FROM_ARGS`` in ``cli/identify.py``, ``FROM_NODE`` in ``nodes/batch_solver.py``); a test checks
that the two adapters offer the same options (docs/design/application-layer.md).
"""

from sysid_ros.app.identify import IdentifyOutcome, IdentifyRequest, run_identify

__all__ = ["IdentifyOutcome", "IdentifyRequest", "run_identify"]
