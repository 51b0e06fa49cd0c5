"""Option resolution and redaction."""

from __future__ import annotations

import pytest

from jetcheck.errors import ConfigError
from jetcheck.options import OPTIONS, resolve
from jetcheck.redact import REDACTED, redact_text, redact_url
from jetcheck.specs import DEFAULT_VERSION


def test_defaults_apply_when_nothing_is_given():
    """With no flag, variable or ini key, every option takes its default."""
    cfg = resolve(cli={}, env={})
    assert (cfg.server, cfg.server_version, cfg.profile, cfg.check_timeout) == ("local", DEFAULT_VERSION, "fast", 60.0)
    assert cfg.run_prefix.startswith("jc")


def test_command_line_beats_environment_beats_ini():
    """Precedence is command line, then environment, then ini file."""
    assert resolve(cli={"profile": "thorough"}, env={"JETCHECK_PROFILE": "fast"}).profile == "thorough"
    assert resolve(cli={}, env={"JETCHECK_PROFILE": "thorough"}, ini={"profile": "fast"}).profile == "thorough"
    assert resolve(cli={}, env={}, ini={"profile": "thorough"}).profile == "thorough"


def test_every_option_has_flag_ini_and_environment_names():
    """Each option is reachable three ways, with predictable names."""
    for option in OPTIONS:
        assert option.flag == "--jetcheck-" + option.name.replace("_", "-")
        assert option.ini == "jetcheck_" + option.name
        assert option.env == "JETCHECK_" + option.name.upper()


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"server": "http://x"}, "--jetcheck-server: server must be"),
        ({"server_version": "2.x"}, "--jetcheck-server-version: server version must be X.Y.Z"),
        ({"check_timeout": "0"}, "--jetcheck-check-timeout: expected a positive number"),
        ({"run_prefix": "has.dot"}, "--jetcheck-run-prefix: run prefix must be"),
        ({"creds": "/no/such/file"}, "--jetcheck-creds: no such file"),
    ],
)
def test_bad_values_name_the_option_and_the_problem(cli, message):
    """A bad value is one ConfigError line naming where it came from."""
    with pytest.raises(ConfigError) as rejected:
        resolve(cli=cli, env={})
    assert str(rejected.value).startswith(message)
    assert "\n" not in str(rejected.value)


def test_bad_environment_value_names_the_variable():
    """A bad environment value names the variable."""
    with pytest.raises(ConfigError, match=r"^JETCHECK_PROFILE: expected one of fast, thorough"):
        resolve(cli={}, env={"JETCHECK_PROFILE": "slow"})


def test_redacted_config_hides_secrets_and_url_credentials():
    """Passwords, tokens and URL user info never appear in the redacted config."""
    cfg = resolve(cli={"server": "nats://alice:s3cret@127.0.0.1:4222", "password": "pw1", "token": "tok1"}, env={})
    shown = cfg.redacted()
    assert shown["password"] == shown["token"] == REDACTED
    assert shown["server"] == f"nats://{REDACTED}@127.0.0.1:4222"
    assert "s3cret" not in repr(shown)
    assert "pw1" not in repr(shown)


def test_redaction_helpers():
    """URL user info and known secret values are replaced wherever they appear."""
    assert redact_url("nats://tok@h:1") == f"nats://{REDACTED}@h:1"
    assert redact_url("nats://h:1") == "nats://h:1"
    assert redact_url("nats://u:p@127.0.0.1:x") == f"nats://{REDACTED}@127.0.0.1:x"  # a bad port: shown, not parsed
    assert redact_url("tls://u:p@[::1") == f"{REDACTED}@[::1"  # not a URL urlsplit reads
    assert redact_text("auth pw1 failed for pw12", ["pw1", "pw12", ""]) == f"auth {REDACTED} failed for {REDACTED}"


def test_clean_previous_is_off_unless_asked():
    """--clean-previous is a switch; its variable takes yes/no and refuses anything else in one line."""
    assert resolve(cli={}, env={}).clean_previous is False
    assert resolve(cli={"clean_previous": "yes"}, env={}).clean_previous is True
    assert resolve(cli={}, env={"JETCHECK_CLEAN_PREVIOUS": "True"}).clean_previous is True
    with pytest.raises(ConfigError, match=r"^JETCHECK_CLEAN_PREVIOUS: expected yes or no, not 'maybe'$"):
        resolve(cli={}, env={"JETCHECK_CLEAN_PREVIOUS": "maybe"})
