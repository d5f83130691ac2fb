"""Node parameters declared from ``(name, default, description)`` tables, forgiving about number types.

A launch argument, ``-p name:=value`` or a YAML file gives ``2`` as an integer and ``1`` for a
switch; rclpy would refuse either for a parameter declared as a float or a boolean
(``InvalidParameterTypeException``) and the node would die. Here such parameters are declared
with dynamic typing, every value (override or runtime ``set_parameters``) is checked against the
kind of its default — a float parameter takes an integer or a float, a boolean takes
``true``/``false`` or the integers 0 and 1, a float array takes integers — and
:func:`parameter_value` returns it converted. A value of another kind is refused with a message
that names the parameter, the expected kind and the value: at start the node exits with that
reason (:class:`~sysid_ros.core.errors.SysIdError`), at run time ``set_parameters`` fails with it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from sysid_ros.core.errors import SysIdError

__all__ = ["NODE_TABLES", "declare_config_parameters", "declare_parameters", "node_table", "parameter_value",
           "requested_value"]

#: every node executable -> its module and the attributes there holding its parameter table: the one
#: source of each node's parameters (names, defaults, descriptions). docs/reference/parameters.md is
#: generated from it (tools/gen_reference.py) and config/*.yaml are tested against it.
NODE_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "mujoco_sim": ("sysid_ros.nodes.mujoco_sim", ("PARAMETERS",)),
    "trajectory_publisher": ("sysid_ros.nodes.trajectory_publisher", ("PARAMETERS",)),
    "estimator": ("sysid_ros.nodes.estimator", ("PARAMETERS",)),
    "recorder": ("sysid_ros.nodes.recorder", ("PARAMETERS",)),
    "batch_solver": ("sysid_ros.nodes.batch_solver", ("PARAMETERS",)),
    "collision_monitor": ("sysid_ros.nodes.collision_monitor", ("PARAMETERS",)),
    "damiao_bridge": ("sysid_ros.nodes.damiao_bridge",
                      ("BUS_PARAMETERS", "EMULATOR_GROUP", "JOINT_PARAMETERS")),
    "damiao_emulator": ("sysid_ros.nodes.damiao_emulator", ("PARAMETERS", "WIRING_PARAMETERS")),
}

#: parameter name -> expected kind, per node (kinds: "float", "bool", "float_array", or None =
#: rclpy's own strict typing)
_KINDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_EXPECTED = {"float": "a number", "bool": "true/false (or 1/0)", "float_array": "a list of numbers"}


def node_table(node: str) -> list:
    """The rows of ``node``'s parameter table (:data:`NODE_TABLES`): ``(name, default,
    description)`` tuples and, for the Damiao nodes, per-joint arrays
    (:class:`~sysid_ros.hardware.wiring.JointParameter`, declared as ``joints.<key>``)."""
    import importlib

    module_name, attributes = NODE_TABLES[node]
    module = importlib.import_module(module_name)
    return [row for attribute in attributes for row in getattr(module, attribute)]


def _kind(default) -> str | None:
    from rclpy.parameter import Parameter

    if isinstance(default, bool):
        return "bool"
    if isinstance(default, float):
        return "float"
    if default is Parameter.Type.DOUBLE_ARRAY:
        return "float_array"
    return None


def _convert(kind: str | None, value):
    """``value`` as the kind expects it; :class:`ValueError` if it is of another kind."""
    if kind is None or value is None:
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        return float(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ValueError
    values = list(value) if not isinstance(value, str | bytes) and hasattr(value, "__iter__") else None
    if values is None or any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        raise ValueError
    return [float(v) for v in values]


def declare_parameters(node, table: Iterable[tuple[str, object, str]], *,
                       read_only: bool | Iterable[str] = ()) -> None:
    """Declare every ``(name, default, description)`` of ``table`` on ``node``; floats, booleans
    and float arrays accept the forms named in the module docstring. A default of
    ``Parameter.Type.DOUBLE_ARRAY`` declares an unset float array. Raises :class:`SysIdError`
    naming the parameter if an override is of the wrong kind.

    ``read_only``: the parameters (``True``: all of ``table``) that only take effect at start-up,
    declared ``read_only`` (their overrides apply at start; ``ros2 param set`` is refused with
    "parameter is read-only" instead of reporting a success that changes nothing)."""
    from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult

    kinds = _KINDS.get(node)
    if kinds is None:
        kinds = _KINDS[node] = {}

        def check(params) -> SetParametersResult:
            for prm in params:
                try:
                    _convert(kinds.get(prm.name), prm.value)
                except ValueError:
                    return SetParametersResult(successful=False, reason=_refusal(prm.name, kinds[prm.name],
                                                                                 prm.value))
            return SetParametersResult(successful=True)

        node.add_on_set_parameters_callback(check)
    rows = list(table)
    fixed = {row[0] for row in rows} if read_only is True else set(read_only or ())
    for name, default, description in rows:
        kind = _kind(default)
        kinds[name] = kind
        if kind is None:
            node.declare_parameter(name, default, ParameterDescriptor(description=description,
                                                                      read_only=name in fixed))
            continue
        value = None if kind == "float_array" else default
        try:
            node.declare_parameter(name, value, ParameterDescriptor(description=description,
                                                                    dynamic_typing=True,
                                                                    read_only=name in fixed))
        except Exception as exc:  # the set-parameters check refused an override
            if type(exc).__name__ != "InvalidParameterValueException":
                raise
            raise SysIdError(_refusal(name, kind, _override(node, name))) from None


def declare_config_parameters(node, table: Iterable[tuple[str, object, str]]) -> None:
    """Declare the ``(name, default, description)`` rows of a configuration that converts and
    checks its own numbers (the bridge's and emulator's ``from_parameters``): numbers (integer or
    float defaults) are dynamically typed and reach the configuration as given, switches take
    true/false or 1/0 as with :func:`declare_parameters`, the rest is strictly typed. Read the
    values with :func:`parameter_value`."""
    from rcl_interfaces.msg import ParameterDescriptor

    rows = list(table)
    declare_parameters(node, [row for row in rows if isinstance(row[1], bool)])
    for name, default, description in rows:
        if not isinstance(default, bool):
            node.declare_parameter(name, default, ParameterDescriptor(
                description=description, dynamic_typing=isinstance(default, int | float)))


def _override(node, name: str):
    given = getattr(node, "_parameter_overrides", {}).get(name)  # rclpy keeps no public copy
    return given.value if given is not None else "(the given value)"


def _refusal(name: str, kind: str, value) -> str:
    return f"parameter {name}: expected {_EXPECTED[kind]}, got {value!r}"


def parameter_value(node, name: str):
    """A declared parameter's value in its declared kind (an integer given for a float parameter
    as that float, 0/1 for a boolean as ``False``/``True``); ``None`` for a parameter left unset."""
    from rclpy.exceptions import ParameterUninitializedException

    try:
        value = node.get_parameter(name).value
    except ParameterUninitializedException:
        return None
    kinds = _KINDS.get(node, {})
    return _convert(kinds.get(name), value)


def requested_value(node, parameter):
    """The value of a ``set_parameters`` request (an ``rclpy.parameter.Parameter``) converted
    like :func:`parameter_value` (unchanged if it is of the wrong kind: the declared check refuses it)."""
    try:
        return _convert(_KINDS.get(node, {}).get(parameter.name), parameter.value)
    except ValueError:
        return parameter.value
