"""A small 3-joint arm (a vertical-axis base joint and two pitch joints) for tests that need
a robot cheap to simulate: masses and inertias are plausible round figures for a 0.5 m arm, not
any product's. ``three_link_arm(custom)`` adds an MJCF ``<custom>`` block (e.g. Stribeck
numerics)."""

from __future__ import annotations

_ARM = """
<mujoco model="three_link_arm">
  <compiler angle="radian"/>
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <default><joint damping="0.3" frictionloss="0.4" armature="0.01" range="-2.5 2.5"/></default>
  <worldbody>
    <body name="link1" pos="0 0 0.1">
      <joint name="j1" axis="0 0 1"/>
      <inertial pos="0 0 0.05" mass="2.0" diaginertia="0.01 0.01 0.008"/>
      <body name="link2" pos="0 0 0.1">
        <joint name="j2" axis="0 1 0"/>
        <inertial pos="0.15 0 0" mass="1.5" diaginertia="0.004 0.015 0.015"/>
        <body name="link3" pos="0.3 0 0">
          <joint name="j3" axis="0 1 0"/>
          <inertial pos="0.12 0.01 0" mass="0.8" diaginertia="0.002 0.006 0.006"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def three_link_arm(custom: str = "") -> str:
    """The arm's MJCF text, with ``custom`` (a ``<custom>`` element) before ``</mujoco>``."""
    return _ARM.replace("</mujoco>", f"{custom}</mujoco>") if custom else _ARM
