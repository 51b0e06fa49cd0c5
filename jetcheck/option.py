"""One option as jetcheck takes it everywhere (`Option`), and the commands and hosts that take options (a shared
leaf: jetcheck.option_table lists the options). Choices only a lower layer knows (the load's scenarios) are
registered by that layer (`register_choices`), so the table names them without importing it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jetcheck.errors import ConfigError
from jetcheck.option_values import as_text

# The commands of `jetcheck` that take options from the table, and the two hosts that run our code with their own
# parsers: the pytest plugin (--jetcheck-<name>, ini jetcheck_<name>) and the locustfile (--jetcheck-<name>).
COMMANDS = ("certify", "load", "run", "matrix", "bisect", "diff", "report", "durability")
PYTEST, LOCUST = "pytest", "locust"
TARGET = ("certify", "load", "run", "diff", PYTEST)  # the commands that reach a server


@dataclass(frozen=True)
class Option:
    """One option, the same everywhere it is taken: a `jetcheck` command's `--<name>`, the pytest plugin's
    `--jetcheck-<name>` and ini `jetcheck_<name>`, Locust's `--jetcheck-<name>`, and the variable `JETCHECK_<NAME>`.

    `default` is a text parsed like a given value, or None when the command decides (the option's value is then
    None). `variants` adjusts the option for one command or host by the fields of this class (e.g. Locust's
    --jetcheck-server defaults to a URL and reads JETCHECK_LOAD_SERVER, which jetcheck load sets)."""

    name: str
    help: str
    default: Callable[[], str | None] = lambda: ""
    parse: Callable[[str], Any] = as_text
    secret: bool = False
    switch: bool = False  # a flag without a value on the command line (yes when given)
    commands: tuple[str, ...] = ()
    variable: str | None = ""  # the environment variable: "" for JETCHECK_<NAME>, None for none
    cli: str = ""  # a `jetcheck` command's flag when it is not --<name>
    aliases: tuple[str, ...] = ()  # earlier flags that keep working
    metavar: str | None = None
    choices: Callable[[], list[str]] | None = None  # shown and checked by argparse, and by `value` for a variable
    required: bool = False  # on the command line (such an option has no variable)
    repeat: bool = False  # given once per value; the value is the list
    exclusive: str = ""  # options with the same group name exclude each other on the command line
    web_ui: bool = True  # Locust: shown in its web UI
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def flag(self) -> str:
        """The pytest plugin's and Locust's flag."""
        return "--jetcheck-" + self.name.replace("_", "-")

    @property
    def cli_flag(self) -> str:
        """A `jetcheck` command's flag."""
        return self.cli or "--" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "jetcheck_" + self.name

    @property
    def env(self) -> str | None:
        return "JETCHECK_" + self.name.upper() if self.variable == "" else self.variable

    def value(self, raw: str) -> Any:
        if self.choices is not None and raw not in self.choices():
            raise ConfigError(f"expected one of {', '.join(self.choices())}, not {raw!r}")
        return self.parse(raw)

    def described(self) -> str:
        """The help text (with the default where it says {default}) and where else the value can come from."""
        text = self.help.format(default=self.default()) if "{default}" in self.help else self.help
        return f"{text} [{self.env}]" if self.env else text


_REGISTERED_CHOICES: dict[str, Callable[[], list[str]]] = {}


def register_choices(name: str, choices: Callable[[], list[str]]) -> None:
    """Give option `name` the values it takes, from the module that knows them (jetcheck.load.scenarios registers
    the scenarios); `registered_choices(name)` is the table's `choices` for it."""
    _REGISTERED_CHOICES[name] = choices


def registered_choices(name: str) -> Callable[[], list[str]]:
    """The choices of option `name`, as registered when they are asked for."""

    def choices() -> list[str]:
        if name not in _REGISTERED_CHOICES:
            raise LookupError(f"the choices of option {name!r} are registered by the module that knows them: import it")
        return _REGISTERED_CHOICES[name]()

    return choices
