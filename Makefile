# sysid_ros: `make demo` runs the main job, `make test` the whole test suite; both set up first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ENV := source tools/env.sh
OUT ?= out/demo

.PHONY: setup demo test test-fast lint bench clean

setup:
	@tools/bootstrap.sh

demo: setup
	@$(ENV) && python -m sysid_ros.cli demo --out "$(OUT)"

# --durations/--cpu-durations: where the time went (wall, and CPU seconds whatever the load; test/README.md).
# PARALLEL="-n 2 --dist loadgroup": two pytest-xdist workers; every test that starts a ROS graph
# (test/ros, the docs' ros2 lines) on one of them, one after the other as in a serial run, the unit
# and acceptance files spread a file at a time (module fixtures computed once; test/conftest.py
# gives each worker its own DDS domains). Off by default until a whole run with it is green on a
# loaded host (-n 2 --dist loadfile, graphs on both workers: 7 failures at load 6-23).
PARALLEL ?=

test: setup
	@tools/install_browser.sh
	@$(ENV) && ruff check . && lint-imports && python -m pytest --durations=25 --cpu-durations=25 $(PARALLEL)

# the unit tier without its slow tests (test/README.md): a quick check while working
test-fast: setup
	@$(ENV) && python -m pytest -q -m "unit and not slow"

lint: setup
	@$(ENV) && ruff check . && lint-imports

bench: setup
	@$(ENV) && for b in regressor batch_speed iv_downgraded dual_metric online_rate online_tables online_node_throughput ekf_mhe ekf_projection sim_speed excitation bridge_rate collision_monitor identify_bag_speed blas_threads speed_table; do \
	  echo "== benchmarks/$$b.py"; python benchmarks/$$b.py; done

clean:
	rm -rf build install log out .pytest_cache .ruff_cache
