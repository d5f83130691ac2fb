"""What the launch files in ``launch/`` check before any node starts, and what ends a launch.

Pure functions (no ``launch`` import) so they are tested where launch is not installed:

* :func:`switch`: a boolean launch argument, accepting exactly what launch's own ``IfCondition``
  accepts (``true``/``false``/``1``/``0``, case and surrounding blanks ignored) and naming the
  argument in the error otherwise;
* :func:`new_bag`: a bag that already exists is refused before any node starts (a run never
  overwrites or appends to a recording);
* :func:`model_file`: a model argument that names no file is refused before any node starts.

:func:`required` (imports ``launch`` when called) is the ``on_exit`` of a node the launch cannot do
without: when it ends while the launch is running, one line says which node ended, with which
status and why the launch stops, and the launch is shut down (every other node gets SIGINT and
finishes its files, e.g. the recorder its bag).

:data:`RUN_ARGUMENTS` are the launch arguments the identification launches share (one name, one
description), :func:`run_arguments` picks some of them (defaults may differ per launch file) and
:func:`declare` (imports ``launch`` when called) declares a table of them.
"""

from __future__ import annotations

from pathlib import Path

from sysid_ros.core.errors import SysIdError

__all__ = ["RUN_ARGUMENTS", "SWITCH_VALUES", "declare", "model_file", "new_bag", "required", "run_arguments",
           "switch"]

#: what launch's IfCondition accepts (launch/conditions/evaluate_condition_expression_impl.py:
#: the expanded text, stripped and lower-cased, must be one of these)
SWITCH_VALUES = {"true": True, "1": True, "false": False, "0": False}


#: launch arguments shared by sim_identify and ros2_control_identify: name -> (default, description)
RUN_ARGUMENTS: dict[str, tuple[str, str]] = {
    "target": ("arm", "estimator target: 'arm' (every parameter) or the body carrying the unknown payload"),
    "method": ("rls_logdet", "rls | rls_logdet | momentum | ekf | mhe"),
    "lockstep": ("false", "the simulated arm steps when the commands and the consumers' progress have "
                          "come (deterministic, as fast as the graph goes); false: free-running"),
    "lockstep_timeout": ("60.0", "[s of wall time] a consumer silent this long ends the run with an "
                                 "error (0 = wait forever)"),
    "excitation_time": ("30.0", "[s] of excitation"),
    "record": ("true", "record a rosbag2 bag of the run"),
    "bag": ("", "bag directory, must not exist ('' = sysid_bags/run_<time>)"),
}


def run_arguments(*names: str, **defaults: str) -> tuple[tuple[str, str, str], ...]:
    """``(name, default, description)`` of the :data:`RUN_ARGUMENTS` ``names``, in that order,
    with the ``defaults`` given here instead of the table's."""
    return tuple((name, defaults.get(name, RUN_ARGUMENTS[name][0]), RUN_ARGUMENTS[name][1]) for name in names)


def declare(arguments) -> list:
    """``DeclareLaunchArgument`` of each ``(name, default, description)`` of ``arguments``."""
    from launch.actions import DeclareLaunchArgument

    return [DeclareLaunchArgument(name, default_value=default, description=description)
            for name, default, description in arguments]


def switch(name: str, value: str) -> bool:
    """The boolean launch argument ``name`` given as ``value``; :class:`SysIdError` naming it if
    ``value`` is not one that ``IfCondition`` accepts."""
    key = str(value).strip().lower()
    if key not in SWITCH_VALUES:
        raise SysIdError(f"launch argument {name}:={value!r}: expected true, false, 1 or 0 "
                         "(case-insensitive, as launch's IfCondition accepts)")
    return SWITCH_VALUES[key]


def new_bag(name: str, value: str, *, cwd: Path | None = None) -> Path | None:
    """The bag directory ``value`` of launch argument ``name`` (relative to ``cwd``, the nodes'
    working directory, default the current one); ``None`` for ``''`` (the recorder then names a
    fresh ``sysid_bags/run_<date-time>``). :class:`SysIdError` if something exists there."""
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    if path.exists() or path.is_symlink():
        raise SysIdError(f"launch argument {name}:={value}: {path} already exists; a run never "
                         f"overwrites a recording: name a new bag, or give {name}:='' for a fresh "
                         "sysid_bags/run_<date-time>")
    return path


def model_file(name: str, value: str) -> Path | None:
    """The model file of launch argument ``name`` (``''``: ``None``, the package's robot);
    :class:`SysIdError` naming the argument if no such file exists."""
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise SysIdError(f"launch argument {name}:={value}: no such file (expected an MJCF or URDF "
                         "file, or '' for the package's robot)")
    return path


def required(node: str, why: str):
    """``on_exit`` for a launch_ros ``Node`` the launch cannot do without: if ``node`` ends while
    the launch runs (not during the launch's own shutdown), log one line
    ``<node> ended (exit status N): <why>; stopping the launch`` and shut the launch down."""

    def on_exit(event, context):
        if context.is_shutdown:
            return None  # the launch is already ending (Ctrl-C, another required node)
        import launch.logging
        from launch.actions import Shutdown

        text = f"{node} ended (exit status {event.returncode}): {why}; stopping the launch"
        launch.logging.get_logger("launch").error(text)
        return [Shutdown(reason=text)]

    return on_exit
