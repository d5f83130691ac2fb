"""URDF in and out: what MuJoCo is given to read a URDF, and the identified model written as URDF.

Reading (:func:`urdf_for_mujoco`): mesh URIs ``package://PKG/...`` are resolved against
``AMENT_PREFIX_PATH`` (``<prefix>/share/PKG``) and ``ROS_PACKAGE_PATH`` (``<dir>/PKG``, or a folder
below ``<dir>`` whose ``package.xml`` names PKG), ``file://`` and relative paths against the file
system. ``<visual>`` elements whose mesh is found and readable by MuJoCo (STL, OBJ, MSH) or that
are primitives are kept as massless, non-colliding geoms (for viewing the identified MJCF); the
others, and every ``<collision>``, are dropped (meshes carry no dynamics), with one info line.
The base is fixed or floating on request (:data:`BASES`): MuJoCo's URDF import welds the root
link to the world, so a floating base is a ``floating`` joint from an added ``world`` link.

Writing (:func:`write_urdf`): for a URDF source, the source with the identified inertials and
joint ``<dynamics>`` (names, kinematics, fixed frames and visuals kept); otherwise a URDF built
from the MuJoCo model's kinematics (one link per body, the link frame at the body's joint).
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from sysid_ros.core.errors import ModelError

log = logging.getLogger(__name__)

#: values of the base option: None keeps what the file says
BASES = ("fixed", "floating")
#: mesh files MuJoCo reads
MESH_SUFFIXES = (".stl", ".obj", ".msh")
#: name of the link and joint added to float a URDF whose root is a real link
WORLD_LINK, FLOATING_JOINT = "world", "floating_base"


def is_urdf(root: ET.Element) -> bool:
    return root.tag == "robot"


def check_base(base: str | None) -> str | None:
    """``base`` if it is None, "", "fixed" or "floating" ("" read as None); :class:`ModelError` else."""
    if base in (None, ""):
        return None
    if base not in BASES:
        raise ModelError(f"base must be 'fixed' or 'floating' (or empty: as the model says), got {base!r}")
    return base


# ------------------------------------------------------------------------------- mesh lookup
def package_dirs(package: str, env: Mapping[str, str] | None = None) -> list[Path]:
    """Folders of ROS package ``package``: ``<prefix>/share/<package>`` for each prefix of
    ``AMENT_PREFIX_PATH``, then ``<dir>/<package>`` or a folder below ``<dir>`` with a
    ``package.xml`` naming it, for each ``<dir>`` of ``ROS_PACKAGE_PATH``. Existing ones only."""
    env = os.environ if env is None else env
    out = []
    for prefix in filter(None, env.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        candidate = Path(prefix) / "share" / package
        if candidate.is_dir():
            out.append(candidate)
    for root in filter(None, env.get("ROS_PACKAGE_PATH", "").split(os.pathsep)):
        if (Path(root) / package).is_dir():
            out.append(Path(root) / package)
            continue
        for folder, subdirs, files in os.walk(root):
            if "package.xml" in files:
                subdirs[:] = []  # a package does not hold packages
                if _package_name(Path(folder) / "package.xml") == package:
                    out.append(Path(folder))
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
    return out


def _package_name(manifest: Path) -> str | None:
    try:
        name = ET.parse(manifest).getroot().find("name")
    except (ET.ParseError, OSError):
        return None
    return None if name is None or name.text is None else name.text.strip()


def resolve_uri(uri: str, base_dir: Path | None, env: Mapping[str, str] | None = None) -> Path | None:
    """The existing file a URDF mesh ``filename`` names (``package://``, ``file://``, absolute, or
    relative to ``base_dir``), or None."""
    if uri.startswith("package://"):
        package, _, rest = uri[len("package://"):].partition("/")
        for folder in package_dirs(package, env):
            if (folder / rest).is_file():
                return (folder / rest).resolve()
        return None
    path = Path(uri[len("file://"):] if uri.startswith("file://") else uri)
    if not path.is_absolute():
        if base_dir is None:
            return None
        path = base_dir / path
    return path.resolve() if path.is_file() else None


# ----------------------------------------------------------------------------------- reading
def set_base(root: ET.Element, base: str | None) -> None:
    """Make the URDF's base fixed or floating in place (None: leave it).

    Floating: a ``floating`` joint from the root already there is kept; a root link named
    ``world`` with one fixed joint gets that joint made floating; else a ``world`` link and a
    ``floating_base`` joint to the root are added. Fixed: floating joints from the root become
    fixed."""
    base = check_base(base)
    if base is None:
        return
    children = {j.find("child").get("link") for j in root.iter("joint") if j.find("child") is not None}
    roots = [link.get("name") for link in root.findall("link") if link.get("name") not in children]
    if len(roots) != 1:
        raise ModelError(f"a URDF needs exactly one root link (a link that is no joint's child), got {roots}")
    top = roots[0]
    from_root = [j for j in root.findall("joint") if j.find("parent") is not None
                 and j.find("parent").get("link") == top]
    if base == "fixed":
        for joint in from_root:
            if joint.get("type") == "floating":
                joint.set("type", "fixed")
        return
    if any(j.get("type") == "floating" for j in from_root):
        return
    if top == WORLD_LINK:
        if len(from_root) != 1 or from_root[0].get("type") != "fixed":
            raise ModelError("cannot float this URDF: its root link 'world' should have one fixed "
                             f"joint to the robot, got {[(j.get('name'), j.get('type')) for j in from_root]}")
        from_root[0].set("type", "floating")
        return
    if WORLD_LINK in {link.get("name") for link in root.findall("link")}:
        raise ModelError("cannot float this URDF: it has a link named 'world' that is not its root")
    ET.SubElement(root, "link", name=WORLD_LINK)
    joint = ET.SubElement(root, "joint", name=FLOATING_JOINT, type="floating")
    ET.SubElement(joint, "parent", link=WORLD_LINK)
    ET.SubElement(joint, "child", link=top)


def urdf_for_mujoco(root: ET.Element, *, base_dir: Path | None, geometry: bool = True,
                    env: Mapping[str, str] | None = None) -> str:
    """The URDF text MuJoCo is given (``root`` is not changed): collisions dropped, visuals kept
    when ``geometry`` and their meshes resolve (see the module docstring), MuJoCo told to keep
    visuals and full file paths."""
    root = ET.fromstring(ET.tostring(root))
    unresolved = []
    for link in root.iter("link"):
        for child in [c for c in link if c.tag in ("visual", "collision")]:
            mesh = child.find("geometry/mesh")
            if child.tag == "collision" or not geometry:
                link.remove(child)
                continue
            if mesh is None:
                continue
            uri = mesh.get("filename", "")
            path = resolve_uri(uri, base_dir, env)
            if path is None or path.suffix.lower() not in MESH_SUFFIXES:
                unresolved.append(uri)
                link.remove(child)
            else:
                mesh.set("filename", str(path))
    if unresolved:
        log.info("%d visual mesh(es) not found or not readable by MuJoCo (e.g. %s): their geometry "
                 "is dropped (meshes carry no dynamics)", len(unresolved), unresolved[0])
    extension = root.find("mujoco")
    if extension is None:
        extension = ET.SubElement(root, "mujoco")
    compiler = extension.find("compiler")
    if compiler is None:
        compiler = ET.SubElement(extension, "compiler")
    compiler.set("discardvisual", "false")
    compiler.set("strippath", "false")
    return ET.tostring(root, encoding="unicode")
