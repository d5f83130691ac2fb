"""Reporting: result files of an identification (``files``), payload scoring against a truth
(``payload``), headless plots (``plotting``)."""
