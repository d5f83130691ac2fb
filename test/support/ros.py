"""A test's own ROS side (rclpy imported only when one is made)."""

from __future__ import annotations

from collections.abc import Callable


def spin_in_background(executor) -> Callable[[], None]:
    """Spin ``executor`` in a daemon thread of its own; returns ``stop()``: the executor shut down
    and the thread joined (bounded), to call before the nodes and the context go. A thread still
    spinning when its context shuts down raises ``RCLError: ... the given context is not valid`` in
    that thread, which pytest then pins on whichever test runs next."""
    import threading

    thread = threading.Thread(target=executor.spin, name="test_spin", daemon=True)
    thread.start()

    def stop() -> None:
        executor.shutdown()
        thread.join(timeout=30.0)
        if thread.is_alive():
            raise RuntimeError("the executor's spin thread still runs 30 s after its shutdown")

    return stop


class SpinningNode:
    """A test's own ROS side: a context in ``domain_id``, one node spun by a background thread
    until :meth:`close`; :meth:`publish` waits out a reliable writer's back-pressure."""

    def __init__(self, name: str, domain_id: int) -> None:
        import threading

        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.backpressure = 0  # writes refused while a reader caught up (each retried)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.context.ok() and not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def publish(self, pub, msg, timeout: float = 60.0) -> None:
        """Publish ``msg`` on ``pub``: a reliable KEEP_ALL writer whose history is full (its
        reader has not acknowledged yet) refuses a write after its blocking time; the same
        sample is then written again, never skipped."""
        import threading
        import time

        from rclpy.impl.implementation_singleton import rclpy_implementation

        deadline = time.monotonic() + timeout
        while True:
            try:
                pub.publish(msg)
                return
            except rclpy_implementation.RCLError:
                if time.monotonic() > deadline:
                    raise
                self.backpressure += 1
                threading.Event().wait(0.005)

    def stop_spinning(self) -> None:
        """Stop the spin thread and wait for it (bounded by one ``spin_once``); idempotent. For
        entities to destroy before :meth:`close` (an action client) with no spin under way."""
        self._stop.set()
        self._thread.join(timeout=30.0)
        if self._thread.is_alive():
            raise RuntimeError(f"{self.node.get_name()}: spin thread still running 30 s after close()")

    def close(self) -> None:
        """Stop the spin thread and wait for it (bounded by one ``spin_once``), then shut down
        the executor, node and context: shutting the executor down under a spinning thread
        destroys the guard condition that thread is waiting on."""
        import rclpy

        self.stop_spinning()
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
