"""A load run's settings: built in one place from its options' values, and handed to Locust through the option table.

`jetcheck load` resolves its options (jetcheck.options), adds what the run decided (the server's URL, the run id,
the output folder, the monitoring URL), and builds the run's `LoadSettings` with `load_settings`; it hands the
same values to its Locust process with `locust_handover`, one entry per option the locustfile takes in the table.
The locustfile parses them with the table's parsers (`add_locust_arguments`) and builds its settings from them
with `load_settings` again, so both sides hold the same settings, by the same rules. Locust run by hand (its web
UI) reads the same options from its command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jetcheck.options import LOCUST, options_for

from .scenarios import LoadSettings, scenario


def load_settings(values: Mapping[str, Any]) -> LoadSettings:
    """The settings of a load run from its options' values, keyed by the table's names, and `users`: the users over
    all processes."""
    spec = scenario(values["scenario"])
    users = values["users"]
    return LoadSettings(
        scenario=spec.name,  # an alias (publish) runs as the scenario it names
        server_url=values["server"],
        run_id=values["run_id"],
        prefix=values["run_prefix"],
        out_dir=str(values["out"]),
        rate=values["rate"] if spec.paced else 0.0,
        users=users,
        consumers=values["consumers"] if spec.publisher and spec.consumer else users,
        payload_size=values["payload"],
        max_inflight=values["max_inflight"],
        prefill=values["prefill"],
        replicas=values["replicas"],
        monitor_url=values["monitor"] or "",
    )


def locust_handover(values: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Locust's command-line arguments and environment variables that carry `values` (keyed by option name, one for
    every option the locustfile takes) to the locustfile: each value as text its option's parser reads back to the
    same value, in the option's variable where the table gives it one (so the server's URL, which may carry
    credentials, never reaches a command line), else as its flag."""
    arguments: list[str] = []
    environment: dict[str, str] = {}
    for option in options_for(LOCUST):
        value = values[option.name]
        text = "" if value is None else str(value)
        if option.switch:  # a Locust switch takes no text: given, it is on
            arguments += [option.flag] if value else []
        elif option.env:
            environment[option.env] = text
        else:
            arguments += [option.flag, text]
    return arguments, environment


def locust_values(parsed_options: Any) -> dict[str, Any]:
    """The values of the locustfile's options in Locust's parsed options, keyed by option name (their `dest` is
    jetcheck_<name>, as add_locust_arguments names it)."""
    return {option.name: getattr(parsed_options, "jetcheck_" + option.name) for option in options_for(LOCUST)}
