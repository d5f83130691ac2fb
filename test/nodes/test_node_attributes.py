"""No node of this package assigns an attribute that rclpy's ``Node`` (or ``LifecycleNode``) uses.

A subclass that sets e.g. ``self._clock`` replaces the node's ROS clock: rclpy then stamps the
parameter event of every successful ``set_parameters`` with ``self._clock.now()``, and the node's
parameter service raised ``TypeError`` in the executor, which ended the node (the trajectory
publisher's command thread of 30b77c2 kept its ``StateClock`` there: the parameter-service "hang"
of test_graph_lifecycle, docs/damiao-bridge.md). ``get_clock()`` and timers without a clock use
it too. Read from the sources (no DDS): the names rclpy's classes assign on ``self`` or define,
against the names this package's node classes assign on ``self``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap

import pytest

rclpy_node = pytest.importorskip("rclpy.node")


def _assigned(cls: type) -> set[str]:
    """The attribute names ``cls``'s own source assigns on ``self`` (``self.x = ``, ``self.x: T =``,
    ``self.x += ``, tuple targets)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for sub in ast.walk(target):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                        and sub.value.id == "self"):
                    names.add(sub.attr)
    return names


def _rclpy_names() -> set[str]:
    """What rclpy's node classes assign or define (private names mangled as Python does)."""
    from rclpy.lifecycle import LifecycleNode

    names: set[str] = set()
    for cls in LifecycleNode.__mro__:
        if not cls.__module__.startswith("rclpy"):
            continue
        names |= {f"_{cls.__name__}{n}" if n.startswith("__") and not n.endswith("__") else n
                  for n in _assigned(cls)}
        names |= set(vars(cls))
    return names


def _node_classes() -> list[type]:
    import sysid_ros.nodes as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"sysid_ros.nodes.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, rclpy_node.Node) and cls.__module__.startswith("sysid_ros"):
                found[cls.__qualname__] = cls
    return [found[k] for k in sorted(found)]


def test_the_package_has_node_classes_to_check():
    names = {cls.__name__ for cls in _node_classes()}
    assert {"TrajectoryPublisherNode", "MujocoSimNode", "EstimatorNode"} <= names, names
    assert {"_clock", "_parameters", "get_clock", "_Node__node"} <= _rclpy_names()


@pytest.mark.parametrize("cls", _node_classes(), ids=lambda c: c.__name__)
def test_no_node_attribute_shadows_rclpy(cls):
    ours = set()
    for base in cls.__mro__:
        if base.__module__.startswith("sysid_ros"):
            ours |= _assigned(base)
    clash = sorted(ours & _rclpy_names())
    assert not clash, (f"{cls.__name__} assigns {clash}, which rclpy's Node uses: rename them "
                       "(a shadowed _clock broke the parameter service)")
