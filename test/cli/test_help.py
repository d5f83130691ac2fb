"""`sysid ... --help`: one formatter for every parser; every option has a help text; every option
with a default shows it (the default method of each command included); models are "MJCF or URDF"
wherever a URDF works."""

from __future__ import annotations

import argparse

import pytest

from sysid_ros.cli import build_parser


def _parsers():
    def walk(parser, name):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    yield from walk(child, f"{name} {sub}")
    return list(walk(build_parser(), "sysid"))


PARSERS = _parsers()


@pytest.mark.parametrize("name, parser", PARSERS, ids=[n for n, _ in PARSERS])
def test_every_option_has_help_and_shows_its_default(name, parser):
    formatter = parser._get_formatter()
    assert type(formatter) is type(PARSERS[0][1]._get_formatter())  # one formatter everywhere
    for action in parser._actions:
        skipped = isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        if skipped or not action.option_strings:
            continue
        assert action.help, f"{name} {action.option_strings[0]} has no help text"
        shown = formatter._get_help_string(action)
        if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
            option = action.option_strings[0]
            assert "default" in shown, f"{name} {option}: default {action.default!r} not shown"


def test_the_default_method_is_named_by_each_command():
    texts = {name: parser.format_help() for name, parser in PARSERS}
    assert "(default: ols)" in " ".join(texts["sysid identify"].split())
    assert "default pc_ls" in " ".join(texts["sysid validate"].split())
    assert "(default: dual_metric,pc_iv)" in " ".join(texts["sysid demo"].split())


def test_models_are_mjcf_or_urdf():
    for name, parser in PARSERS:
        for action in parser._actions:
            if action.dest == "model" and action.help:
                assert "MJCF or URDF" in action.help, f"{name}: {action.help}"
