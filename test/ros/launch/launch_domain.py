"""The DDS domain of a launch test process (one rule for every file in test/ros/launch).

``SYSID_TEST_DOMAINS=LO-HI`` (parallel checkouts on one host): a domain in that range, picked by
process id; else ``ROS_DOMAIN_ID`` when set (the caller's private domain); else 1 + pid % 101 so
launch tests side by side, or a user's graph on domain 0, never see each other. DDS stays on this
machine either way (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``)."""

from __future__ import annotations

import os


def use_private_domain() -> str:
    """Set and return this process's ``ROS_DOMAIN_ID`` (before any ROS context or launch starts)."""
    span = os.environ.get("SYSID_TEST_DOMAINS", "").strip()
    if span:
        lo, hi = (int(v) for v in span.split("-"))
        domain = str(lo + os.getpid() % (hi - lo + 1))
    else:
        domain = os.environ.get("ROS_DOMAIN_ID", "").strip() or str(1 + os.getpid() % 101)
    os.environ["ROS_DOMAIN_ID"] = domain
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return domain
