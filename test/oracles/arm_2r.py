"""A planar two-joint arm (MJCF text): masses, inertias, armature and damping written here."""

ARM_2R = """
<mujoco model="arm_2r">
  <compiler angle="radian"/>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 0.1">
      <joint name="shoulder" axis="0 1 0" range="-2 2" armature="0.01" damping="0.1"/>
      <inertial pos="0.15 0 0" mass="1.2" diaginertia="0.002 0.01 0.011"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="elbow" axis="0 1 0" range="-2 2" armature="0.005" damping="0.05"/>
        <inertial pos="0.12 0.01 0" mass="0.7" diaginertia="0.001 0.004 0.0045"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
