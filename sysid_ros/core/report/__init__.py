"""Reporting: figures of merit defined once (``metrics``: torque errors, base-parameter errors,
truth decoding, the evaluation of a result), result files of an identification (``files``),
payload tables and plots of the demo (``payload``), headless plots (``plotting``), the
validation suite (``validation``: ``sysid validate``)."""
