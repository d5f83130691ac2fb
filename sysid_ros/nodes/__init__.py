"""Thin rclpy nodes: parameters, topics and services around :mod:`sysid_ros.core`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def parameter_value(node, name: str):
    """A declared parameter's value, ``None`` for a typed parameter left unset."""
    from rclpy.exceptions import ParameterUninitializedException

    try:
        return node.get_parameter(name).value
    except ParameterUninitializedException:
        return None


def spin(make_node: Callable, executor_factory: Callable, args=None) -> None:
    """Run one node until shutdown, the same way on Jazzy and Kilted: Ctrl-C and external
    shutdown end it quietly; the executor is shut down and the node destroyed on every path.
    A node that cannot start for a reason the user can fix (a :class:`SysIdError`: bad model,
    bad parameter) says why in one line and the process exits with status 1."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    from sysid_ros.core.errors import SysIdError

    rclpy.init(args=args)
    node = None
    executor = executor_factory()
    failed = False
    try:
        node = make_node()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except SysIdError as exc:
        print(f"[{getattr(make_node, '__name__', 'node')}] cannot start: {exc}", file=sys.stderr)
        failed = True
    except RuntimeError:
        # SIGINT arriving while the executor takes a message surfaces from rclpy's C++ take as a
        # RuntimeError (pybind11 "unable to convert call argument"); rclpy's signal handler shuts
        # the context down at the same moment. That is the normal end, not a failure.
        deadline = time.monotonic() + 1.0
        while rclpy.ok() and time.monotonic() < deadline:
            time.sleep(0.01)
        if rclpy.ok():
            raise
    finally:
        executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    if failed:
        sys.exit(1)
