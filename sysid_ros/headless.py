"""Imported first by the command line and the nodes: MuJoCo without an OpenGL context.

``import mujoco`` loads its GLFW renderer unless ``MUJOCO_GL`` says otherwise, and the ``glfw``
package looks for its library by starting a Python subprocess per candidate file (about 50 ms per
command, more on a loaded machine). Nothing in sysid_ros renders, so the command line and the nodes set
``MUJOCO_GL=disable`` unless the user chose a backend.
"""

import os

os.environ.setdefault("MUJOCO_GL", "disable")
