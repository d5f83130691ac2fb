"""The lockstep start handshake: when a simulator may take its first step (one rule, both sides).

DDS matches each side of a publisher–subscription pair on its own: the simulator's ``joint_states``
publisher may already count a consumer's subscription while that subscription has not matched the
publisher yet, or the publisher may count other subscriptions (a test's, a viewer's) and not yet
the consumer's. A RELIABLE, VOLATILE subscription does not receive what was published before both
sides had matched. A lockstep simulator publishes its first state once and then waits for the
answers to it, so a consumer that missed it held the run at t = 0 until ``start_timeout``. Hence,
before the first step:

* an endpoint (publisher or subscription) is **connected** when it has matched as many peer
  endpoints as its node's graph shows on its topic, at least one, and the graph shows among them
  an endpoint of each node it must reach (:func:`unconnected`: the one rule);
* each consumer, once its own endpoints toward the simulator are connected, says so once on the
  latched topic ``lockstep/ready`` (relative: in its namespace; ``diagnostic_msgs/KeyValue``:
  ``key`` = the fully qualified topic through which it answers the simulator, ``value`` = its
  node's fully qualified name; :class:`ReadySignal`). The estimator, the recorder and the collision
  monitor answer on their ``~/progress`` and check their ``joint_states`` subscription; the
  trajectory publisher answers on its command topic and checks its ``joint_states`` subscription
  and its command publisher (which must reach the node publishing the joint states);
* the simulator (:class:`StartGate`) takes its first step once every topic it waits on (its command
  topic, each ``lockstep_wait_for`` topic) has been named ready, its subscription on each is
  connected to the node(s) that named it, and its ``joint_states`` publisher is connected to every
  one of those nodes.

Both sides of every pair the first samples travel on (state out, command and progress back) have
then matched, so the first state and the first command arrive, on a busy host as on an idle one.
A consumer of one's own that a lockstep simulator should wait for publishes the same message
(:class:`ReadySignal` does it). Graph views lag a little behind discovery: an endpoint whose node
is not known yet (``_NODE_NAME_UNKNOWN_``) is waited for; a peer whose QoS cannot match (e.g. a
TRANSIENT_LOCAL subscription of ``joint_states``) is never matched, and the simulator's
``start_timeout`` then ends the run naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from diagnostic_msgs.msg import KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.subscription import Subscription

__all__ = ["READY", "READY_TOPIC", "ReadySignal", "StartGate", "unconnected"]

#: relative: the graph's namespace
READY_TOPIC = "lockstep/ready"
#: latched: a simulator started after a consumer said it is ready still hears it; a depth for the
#: several consumers whose messages may arrive together
READY = QoSProfile(depth=32, reliability=ReliabilityPolicy.RELIABLE,
                   durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: [s] how often a consumer checks its endpoints until they are connected (steady clock): often
#: while it starts, then seldom (a node never in a lockstep graph keeps checking at little cost:
#: ~0.1 ms of CPU per check)
CHECK_PERIOD, SLOW_CHECK_PERIOD, SLOW_AFTER = 0.05, 1.0, 10.0
#: what a graph view says of an endpoint whose node it does not know yet (rmw's placeholder name)
UNKNOWN = "_NODE_NAME_UNKNOWN_"


def _node_name(info) -> str:
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


def unconnected(node: Node, endpoint: Publisher | Subscription, reach: Iterable[str] = ()) -> str | None:
    """The rule: ``None`` when ``node``'s graph shows at least one peer on ``endpoint``'s topic,
    ``endpoint`` has matched as many peers as the graph shows, and the graph shows a peer of each
    node named in ``reach`` (fully qualified names); else what it waits for, in words. (A match
    count with no peer in the graph yet is not enough: the nodes to reach are read from the graph.)"""
    topic = endpoint.topic_name
    if isinstance(endpoint, Publisher):
        matched, peers = endpoint.get_subscription_count(), node.get_subscriptions_info_by_topic(topic)
        kind, own = "subscription", "publisher"
    else:
        matched, peers = endpoint.get_publisher_count(), node.get_publishers_info_by_topic(topic)
        kind, own = "publisher", "subscription"
    known = {_node_name(p) for p in peers}
    unknown = sorted(n for n in known | set(reach) if UNKNOWN in n)
    if unknown:  # discovered, but not yet whose: it could be any node (and match any reach)
        return f"the node of a {kind} on {topic} (the graph does not name it yet)"
    missing = sorted(set(reach) - known)
    if missing:
        return f"a {kind} of {', '.join(missing)} on {topic}"
    if not peers:  # the match counts can run ahead of the graph: nothing is known about the peer yet
        return f"a {kind} on {topic} in the graph"
    if matched < len(peers):
        return f"{topic}: {own} matched with {matched} of the {len(peers)} {kind}(s) in the graph"
    return None


class ReadySignal:
    """Consumer side: once ``states`` (the node's ``joint_states`` subscription, or a callable giving
    it, ``None`` while there is none) and ``command`` (a controller's command publisher, which must
    reach the node publishing the joint states) are connected, publish ``serves`` (the fully
    qualified topic this node answers the simulator on) on ``lockstep/ready``, once."""

    def __init__(self, node: Node, *, serves: str,
                 states: Subscription | Callable[[], Subscription | None],
                 command: Publisher | None = None) -> None:
        self._node = node
        self._serves = serves
        self._states = states if callable(states) else (lambda: states)
        self._command = command
        self.ready = False
        self._pub = node.create_publisher(KeyValue, READY_TOPIC, READY)
        self._clock = Clock(clock_type=ClockType.STEADY_TIME)
        self._since = self._clock.now()
        self._timer = node.create_timer(CHECK_PERIOD, self._check, clock=self._clock)

    def waits(self) -> list[str]:
        """What this node's side of the handshake still waits for (empty: ready)."""
        states = self._states()
        if states is None:
            return ["a joint_states subscription"]
        why = [unconnected(self._node, states)]
        if self._command is not None:
            simulators = {_node_name(p) for p in self._node.get_publishers_info_by_topic(states.topic_name)}
            why.append(unconnected(self._node, self._command, simulators))
        return [w for w in why if w]

    def _check(self) -> None:
        if self.ready:
            return
        if self.waits():
            if self._timer.timer_period_ns < SLOW_CHECK_PERIOD * 1e9 and \
                    (self._clock.now() - self._since).nanoseconds > SLOW_AFTER * 1e9:
                self._timer.timer_period_ns = round(SLOW_CHECK_PERIOD * 1e9)
            return
        self.ready = True
        self._timer.cancel()  # (a timer is not destroyed from its own callback)
        self._pub.publish(KeyValue(key=self._serves, value=self._node.get_fully_qualified_name()))
        command = f" and {self._command.topic_name}'s subscriber" if self._command is not None else ""
        self._node.get_logger().info(f"connected to {self._states().topic_name}'s publisher{command}: "
                                     f"ready for a lockstep start ({self._pub.topic_name})")


class StartGate:
    """Simulator side: hears ``lockstep/ready`` and says what the first step still waits for.

    ``awaited``: the simulator's subscriptions on the topics its consumers answer on (command,
    progress); ``states``: its ``joint_states`` publisher; ``notify`` is called (from the executor)
    after each ready message."""

    def __init__(self, node: Node, states: Publisher, awaited: Iterable[Subscription],
                 notify: Callable[[], None]) -> None:
        self._node = node
        self._states = states
        self._awaited = list(awaited)
        self._notify = notify
        self._ready: dict[str, frozenset[str]] = {}  # topic -> the nodes that said they answer on it
        self._sub = node.create_subscription(KeyValue, READY_TOPIC, self._on_ready, READY)

    def _on_ready(self, msg: KeyValue) -> None:
        # a new dict, never changed: the stepping thread reads it without a lock
        self._ready = {**self._ready, msg.key: self._ready.get(msg.key, frozenset()) | {msg.value}}
        self._notify()

    def waits(self) -> list[str]:
        """What the first step waits for (empty: it may go)."""
        if not self._awaited:
            return []  # nothing to wait for: no consumer to miss the first state
        ready = self._ready
        waits, nodes = [], set()
        for sub in self._awaited:
            who = ready.get(sub.topic_name)
            if not who:
                waits.append(f"the node answering on {sub.topic_name} to say so on {self._sub.topic_name}")
                continue
            nodes |= who
            why = unconnected(self._node, sub, who)
            if why:
                waits.append(why)
        why = unconnected(self._node, self._states, nodes)
        if why:
            waits.append(why)
        return waits
