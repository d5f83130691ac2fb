"""pip install of sysid_ros as a plain Python library (core + `sysid` command), no ROS needed.

ROS users build the package with colcon (package.xml, CMakeLists.txt), which also generates the
msg/srv interfaces; this file is not used by colcon.
"""

from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).parent
requirements = [
    line.strip()
    for line in (here / "requirements.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
tests = [
    line.strip()
    for line in (here / "requirements-test.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]

setup(
    packages=find_packages(include=["sysid_ros", "sysid_ros.*"]),
    install_requires=requirements,
    extras_require={"test": tests},
    data_files=[
        ("share/sysid_ros", ["package.xml"]),
        ("share/sysid_ros/msg", [str(p) for p in sorted(Path("msg").glob("*.msg"))]),
        ("share/sysid_ros/srv", [str(p) for p in sorted(Path("srv").glob("*.srv"))]),
        ("share/sysid_ros/config/robots", [str(p) for p in sorted(Path("config/robots").glob("*.xml"))]),
        ("share/ament_index/resource_index/packages", ["resource/sysid_ros"]),
    ],
    entry_points={"console_scripts": ["sysid = sysid_ros.cli:main"]},
)
