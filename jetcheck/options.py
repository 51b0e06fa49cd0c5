"""jetcheck's options, as the layers that take them import them (a shared leaf). Each job has its own module:

- jetcheck.option: `Option`, one option as every command and host takes it, and the commands and hosts;
- jetcheck.option_values: the checks of option values (text in, value out or ConfigError);
- jetcheck.option_table: TABLE, every option of every command, and `options_for` a command or host;
- jetcheck.option_resolution: each option's value from the command line, variable, ini key or default;
- jetcheck.config: the resolved options of a conformance run (`Config`, `resolve`);
- jetcheck.option_parsers: the table as argparse's, pytest's and Locust's options;
- jetcheck.specs and jetcheck.credentials: what --server, --client and the credential options name.
"""

from __future__ import annotations

from jetcheck.config import Config, resolve
from jetcheck.credentials import CREDENTIAL_OPTIONS
from jetcheck.option import COMMANDS, LOCUST, PYTEST, Option
from jetcheck.option_parsers import add_arguments, add_command, add_locust_arguments, add_pytest_options
from jetcheck.option_resolution import (
    cli_flag,
    credential_environment,
    resolve_arguments,
    resolve_credentials,
    resolve_some,
    resolve_values,
    server_version_for,
)
from jetcheck.option_table import (
    CREDENTIAL_VARIABLES,
    MAX_DEFAULT_PROCESSES,
    OPTION_BY_NAME,
    OPTIONS,
    TABLE,
    new_run_prefix,
    options_for,
)
from jetcheck.option_values import duration
from jetcheck.specs import CLIENTS, DRIVEN_CLIENTS, is_managed

__all__ = [
    "CLIENTS",
    "COMMANDS",
    "CREDENTIAL_OPTIONS",
    "CREDENTIAL_VARIABLES",
    "DRIVEN_CLIENTS",
    "LOCUST",
    "MAX_DEFAULT_PROCESSES",
    "OPTIONS",
    "OPTION_BY_NAME",
    "PYTEST",
    "TABLE",
    "Config",
    "Option",
    "add_arguments",
    "add_command",
    "add_locust_arguments",
    "add_pytest_options",
    "cli_flag",
    "credential_environment",
    "duration",
    "is_managed",
    "new_run_prefix",
    "options_for",
    "resolve",
    "resolve_arguments",
    "resolve_credentials",
    "resolve_some",
    "resolve_values",
    "server_version_for",
]
