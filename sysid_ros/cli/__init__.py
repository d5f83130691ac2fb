"""The ``sysid`` command line: one module per subcommand (``inspect_model``, ``demo``, ``pipeline``,
``trajectory``, ``simulate``, ``identify``, ``monitor``, ``validate``, ``report``, ``bag``), each
owning its parser (``add_parser``) and its work; :mod:`.main` assembles them, :mod:`.common` holds
what they share.

    sysid inspect MODEL.xml [--json]
    sysid demo [--model MODEL.xml] [--payload SPEC] [--duration S] [--realtime] [--out DIR]
    sysid pipeline [--model MODEL.xml] [--duration S] [--seed N] [--out DIR] [--json]
    sysid trajectory MODEL.xml --export FILE [--optimize] [--duration S] [--rate HZ] [--start Q,..]
    sysid simulate MODEL.xml --out BAG [--duration S] [--seed N] [--noise torque=..,position=..]
                   [--encoder-resolution RAD] [--payload body=NAME,mass=KG,com=X,Y,Z[,inertia=..]]
                   [--rate HZ] [--storage mcap|sqlite3]
    sysid identify BAG_OR_CSV [RUN2 ...] --model MODEL.xml --method M --out DIR [--json]
                   [--payloads KNOWN.json] [--drive-gains]
                   [--payload-only BODY] [--friction coulomb,viscous,offset,stribeck,sigmoid] [--armature]
                   [--stribeck-velocity RAD_S] [--sigmoid-shape PHI2,PHI3]
                   [--validate OTHER_BAG] [--bandwidth HZ] [--regularization W]
                   [--columns FIELD=COLUMN,..] [--time-unit s|ms|us|ns] [--controller LAW:GAINS]
                   online (--method rls|rls_logdet|momentum|ekf|mhe): [--alpha A] [--forgetting LAMBDA]
                   [--torque-noise NM] [--weighting fixed|adaptive] [--weight-memory S] [--cutoff HZ]
                   [--sample-rate HZ] [--gap-periods N] [--window S] [--min-speed RAD_S]
                   [--drift PER_SQRT_S] [--position-noise RAD] [--velocity-noise RAD_S]
                   [--horizon S] [--solve-rate HZ]
    sysid monitor BAG_OR_CSV --model MODEL.xml [--result result.json] [--calibrate CONTACT_FREE_BAG |
                  --threshold NM[,NM..] | --calibration-time S] [--gain 1/S] [--sigma-factor K]
                  [--peak-factor F] [--margin NM] [--release R] [--json]
    sysid report RESULT_DIR [--out FILE]
    sysid bag recover PATH    (a recording killed before it finished: the bag's path or its
                               .NAME.partial-* folder)
    sysid validate [--model MODEL.xml] [--result DIR/result.json [--truth TRUE.xml|truth.json]]
                   [--payload SPEC] [--method M] [--quick] [--only CHECK,..] [--out DIR]

Exit codes: 0 success, 1 the work failed (message on stderr), 2 bad usage, 3 identify: an estimate it
cannot stand behind (solver, consistency, or bounds and prior costing > 5 % torque: --accept-cost).
"""

from sysid_ros import headless  # noqa: F401  (before MuJoCo's first import: no OpenGL probe)
from sysid_ros.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
