"""The one rule for when bounds or a prior cost too much torque: the exported model fits the data
worse than the method's own fit without bounds or prior (its weighting, unconstrained), beyond the
estimate's noise (the export may move that much, core.batch.plausible), by more than
:data:`COST_LIMIT_PERCENT` of torque RMS on the regression rows (``excess_percent``).

Then the identification still writes its files, but ``sysid identify`` says so prominently and exits
3 and the batch solver's answer says so and fails, unless the user accepts the cost (``--accept-cost``,
``accept_cost``): a model that fits markedly worse than the data allow has bounds or a prior that
disagree with the robot (a wrong model file, a wrong drive gain, a payload), which a user must see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["COST_EXIT_CODE", "COST_LIMIT_PERCENT", "cost_exceeded"]

#: [%] torque RMS the exported model may lose against the method's unconstrained fit
COST_LIMIT_PERCENT = 5.0
#: exit code of ``sysid identify`` when the cost is above the limit and not accepted
COST_EXIT_CODE = 3


def cost_exceeded(extra: Mapping[str, Any]) -> str | None:
    """The message when ``diagnostics.extra``'s ``plausibility`` cost is above the limit, else None."""
    doc = extra.get("plausibility") or {}
    cost = doc.get("cost_percent")
    excess = doc.get("excess_percent", cost)
    if excess is None or not excess > doc.get("limit_percent", COST_LIMIT_PERCENT):
        return None
    rms = doc.get("torque_rms", {})
    binding = doc.get("binding") or []
    bodies = [name for name, body in (extra.get("exported_model") or {}).get("bodies", {}).items()
              if not body.get("plausible", True)]
    why = []
    if binding:
        why.append(f"binding bounds {binding[:6]}{' ...' if len(binding) > 6 else ''}")
    if bodies:
        why.append(f"bodies the data push out of plausible ranges {bodies}")
    limit = doc.get("limit_percent", COST_LIMIT_PERCENT)
    exported, reference = rms.get("exported", float("nan")), rms.get("reference", float("nan"))
    return (f"the exported model fits the data {cost:.1f} % worse (torque RMS {exported:.4g} N·m) than "
            f"{doc.get('reference', 'the unconstrained fit')} without bounds or prior ({reference:.4g} "
            f"N·m), above the {limit:g} % limit{': ' + '; '.join(why) if why else ''}. Check the model "
            "file, drive gains and payload, or widen the bounds (--mass-factor, --extent-factor); "
            "--accept-cost keeps this model")
