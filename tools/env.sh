# Source this (bash) after tools/bootstrap.sh: the venv, the install space and local-only DDS.
_sysid_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# colcon's setup scripts read unset variables: tolerate them even in `set -u` shells
case $- in *u*) _sysid_nounset=1; set +u ;; *) _sysid_nounset=0 ;; esac
# shellcheck disable=SC1091
source "$_sysid_root/.venv/bin/activate"
# shellcheck disable=SC1091
source "$_sysid_root/install/local_setup.bash"
export PYTHONPATH="$_sysid_root${PYTHONPATH:+:$PYTHONPATH}"
# ROS from PyPI wheels: the venv is the underlay whose share/ holds std_msgs, sensor_msgs...;
# `ros2 interface show`, ament_index and launch find packages through AMENT_PREFIX_PATH
if [ -d "$VIRTUAL_ENV/share/ament_index" ]; then
  case ":${AMENT_PREFIX_PATH:-}:" in
    *":$VIRTUAL_ENV:"*) ;;
    *) export AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:+$AMENT_PREFIX_PATH:}$VIRTUAL_ENV" ;;
  esac
fi
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
[ "$_sysid_nounset" = 1 ] && set -u
unset _sysid_root _sysid_nounset
