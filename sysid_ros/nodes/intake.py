"""Taking what a subscription holds in one go, without a trip through the executor per message.

An rclpy executor takes one message per subscription per wake-up: at 500 Hz beside a busy timer
each message costs a whole wait cycle (building the wait set, ~0.3-0.6 ms of Python), and a
consumer that batches its work (the estimator) gets batches of one. :func:`take_pending` takes,
from inside that subscription's own callback (or a callback of the same mutually exclusive group),
the messages already delivered to the subscription, as the executor would take them
(``subscription.handle.take_message``, the call rclpy's executors make on Jazzy and Kilted).
"""

from __future__ import annotations

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

__all__ = ["take_pending"]


def take_pending(subscription, limit: int, *, info: bool = False) -> list:
    """Up to ``limit`` messages ``subscription`` holds now, oldest first (empty when none, or
    when this rclpy lacks the call: the executor then delivers them one by one, as before);
    ``info``: ``(message, MessageInfo)`` pairs, as a two-argument callback gets them."""
    taken: list = []
    try:
        with subscription.handle:
            while len(taken) < limit:
                got = subscription.handle.take_message(subscription.msg_type, subscription.raw)
                if got is None:
                    break
                taken.append(tuple(got) if info else got[0])
    except (AttributeError, TypeError):  # another rclpy: the executor's own path still works
        pass
    except _rclpy.InvalidHandle:  # destroyed meanwhile (shutting down): nothing more to take
        pass
    return taken
