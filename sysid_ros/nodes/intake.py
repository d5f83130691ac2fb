"""Taking what a subscription holds in one go, without a trip through the executor per message.

An rclpy executor takes one message per subscription per wake-up: at 500 Hz beside a busy timer
each message costs a whole wait cycle (building the wait set, ~0.3-0.6 ms of Python), and a
consumer that batches its work (the estimator) gets batches of one. :func:`take_pending` takes,
from inside that subscription's own callback (or a callback of the same mutually exclusive group),
the messages already delivered to the subscription, as the executor would take them
(``subscription.handle.take_message``, the call rclpy's executors make on Jazzy and Kilted).

A consumer that keeps up still pays one wake-up per message that way (they arrive one at a time).
A subscription in a :class:`PolledGroup` is never waited on by the executor at all: the consumer's
own timer (or thread: the trajectory publisher's command thread) takes what it holds
(``take_pending``) at its own rate.
"""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import EventHandler
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.subscription import Subscription

__all__ = ["PolledGroup", "take_pending"]


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


class PolledGroup(MutuallyExclusiveCallbackGroup):
    """A callback group whose subscriptions the executor never waits on or runs (rclpy's executors
    put in the wait set only the entities whose group ``can_execute`` them); a timer of the node
    takes their messages with :func:`take_pending`. Their QoS event handlers (message lost) run as
    usual, unless ``events`` is False: then the executor does not wait on them either (a waited QoS
    event of a subscription wakes rmw's wait for every message that subscription receives: seen,
    0.56-0.78 of a core for 600 states/s in the trajectory publisher's executor). Each arriving
    message would otherwise wake a ``SingleThreadedExecutor`` (~0.5 ms of Python per wake-up, per
    message when the consumer keeps up). :meth:`supported`: whether this rclpy can take messages
    outside the executor (else use an ordinary group)."""

    def __init__(self, *, events: bool = True) -> None:
        super().__init__()
        self._events = events

    def can_execute(self, entity) -> bool:
        if isinstance(entity, Subscription) or (not self._events and isinstance(entity, EventHandler)):
            return False
        return super().can_execute(entity)

    @staticmethod
    def supported() -> bool:
        return hasattr(getattr(_rclpy, "Subscription", None), "take_message")
