"""Thin rclpy nodes: parameters, topics and services around :mod:`sysid_ros.core`."""

from __future__ import annotations

from collections.abc import Callable


def spin(make_node: Callable, executor_factory: Callable, args=None) -> None:
    """Run one node until shutdown, the same way on Jazzy and Kilted: Ctrl-C and external
    shutdown end it quietly; the executor is shut down and the node destroyed on every path."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init(args=args)
    node = None
    executor = executor_factory()
    try:
        node = make_node()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
