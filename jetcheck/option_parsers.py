"""The options as the three hosts take them, generated from the table: a `jetcheck` command's argparse parser
(`add_command`, `add_arguments`), the pytest plugin's options and ini keys (`add_pytest_options`) and the
locustfile's configargparse options (`add_locust_arguments`). A shared leaf."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from jetcheck.option_table import LOCUST, PYTEST, options_for
from jetcheck.option_values import argument_type


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    *,
    run: Callable[[argparse.Namespace], int],
    validate: Callable[[argparse.Namespace], Any],
    passthrough: bool = False,
    **parser_options: Any,
) -> argparse.ArgumentParser:
    """The parser of command `name`: its options from the table, with `passthrough` the arguments after -- (for
    pytest); `validate` checks the parsed options before anything starts, `run` runs the command."""
    parser = subparsers.add_parser(name, **parser_options)
    add_arguments(parser, name)
    if passthrough:
        parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then extra pytest arguments")
    parser.set_defaults(func=run, validate=validate)
    return parser


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """`command`'s flags, from the table. argparse keeps each given value's text (None when not given);
    `resolve_arguments` then gives every option its value, from the flag, its variable or its default."""
    groups: dict[str, Any] = {}
    for option in options_for(command):
        kind: dict[str, Any] = {}
        if option.switch:
            kind = {"action": "store_const", "const": "yes"}
        elif option.repeat:
            kind = {"action": "append"}
        if option.choices is not None:
            kind["choices"] = option.choices()
        if option.metavar:
            kind["metavar"] = option.metavar
        if option.required:
            kind["required"] = True
        where = parser
        if option.exclusive:
            if option.exclusive not in groups:
                groups[option.exclusive] = parser.add_mutually_exclusive_group()
            where = groups[option.exclusive]
        where.add_argument(option.cli_flag, dest=option.name, default=None, help=option.described(), **kind)


def add_pytest_options(parser: Any) -> None:
    """The pytest plugin's options and ini keys, from the table (`parser` is pytest's)."""
    group = parser.getgroup("jetcheck", "jetcheck conformance")
    for option in options_for(PYTEST):
        kind = {"action": "store_const", "const": "yes"} if option.switch else {}
        where = f" [env {option.env}, ini {option.ini}]"
        group.addoption(option.flag, dest="jetcheck_" + option.name, default=None, help=option.help + where, **kind)
        parser.addini(option.ini, option.help)


def add_locust_arguments(parser: Any) -> None:
    """The locustfile's --jetcheck-* options, from the table (`parser` is Locust's, a configargparse parser:
    `env_var` names the variable). Values are parsed as the table parses them."""
    for option in options_for(LOCUST):
        kind: dict[str, Any] = (
            {"action": "store_true"}
            if option.switch
            else {"type": argument_type(option.value), "default": option.default()}
        )
        if option.choices is not None:
            kind["choices"] = option.choices()
        if option.env:
            kind["env_var"] = option.env
        parser.add_argument(
            option.flag,
            *option.aliases,
            dest="jetcheck_" + option.name,
            help=option.help,
            include_in_web_ui=option.web_ui,
            **kind,
        )
