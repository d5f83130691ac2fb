"""QoS profiles shared by several nodes (one place for each rule)."""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

#: latched topics (truth, estimates, ``~/done``...): the newest message, delivered to late joiners
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)

#: ``~/progress`` (``builtin_interfaces/Time``, the newest data time a consumer has processed),
#: published by the estimator and the recorder and awaited by a lockstep ``mujoco_sim``: only the
#: newest value matters, and it is latched so that a simulator whose subscription matches after
#: the last progress was published (DDS discovery under load) still gets it instead of waiting
#: forever. Publishers and subscribers of progress use this profile (a volatile publisher does
#: not match its transient-local subscription).
PROGRESS = LATCHED
