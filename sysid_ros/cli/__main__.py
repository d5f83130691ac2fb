"""``python -m sysid_ros.cli``: the ``sysid`` command."""

import sys

from sysid_ros.cli import main

sys.exit(main())
