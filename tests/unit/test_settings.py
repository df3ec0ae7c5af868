"""Settings read from the environment: every variable's name and default, flags on top,
and bad values refused with a message naming the setting and its rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from duragent.client.cli import app
from duragent.settings import Settings
from duragent.temporal_dev.record import DevServerRecord, record_path, write_record

VARIABLES = {
    "DURAGENT_DATABASE_URL": (
        "database_url",
        "sqlite:////srv/db.sqlite",
        "sqlite:////srv/db.sqlite",
    ),
    "TEMPORAL_ADDRESS": ("temporal_address", "temporal.example:7233", "temporal.example:7233"),
    "TEMPORAL_NAMESPACE": ("temporal_namespace", "agents", "agents"),
    "DURAGENT_TASK_QUEUE": ("task_queue", "q1", "q1"),
    "DURAGENT_MODEL": ("model", "claude-x", "claude-x"),
    "ANTHROPIC_API_KEY": ("anthropic_api_key", "sk-1", "sk-1"),
    "ANTHROPIC_BASE_URL": ("anthropic_base_url", "http://m:1", "http://m:1"),
    "DURAGENT_OFFLINE_SCRIPT": ("offline_script", "/s.yaml", Path("/s.yaml")),
    "DURAGENT_HEARTBEAT_TIMEOUT": ("heartbeat_timeout_s", "2.5", 2.5),
    "DURAGENT_HEARTBEAT_THROTTLE_MS": ("heartbeat_throttle_ms", "20", 20),
    "DURAGENT_WORKER_LEASE": ("worker_lease_s", "0", 0.0),
    "DURAGENT_HOST_ONLY": ("host_only", "true", True),
    "DURAGENT_MODEL_READ_TIMEOUT": ("model_read_timeout_s", "30", 30.0),
    "DURAGENT_API_TOKENS": ("api_tokens", "t1=alice, t2", {"t1": "alice", "t2": "default"}),
    "DURAGENT_WORKSPACE_ROOTS": ("workspace_roots", "/a: /b", [Path("/a"), Path("/b")]),
    "DURAGENT_TEMPORAL_UI_PORT": ("temporal_ui_port", "9000", 9000),
    "DURAGENT_TOOL_ENV": ("tool_env", "GOPATH,CI=1", ["GOPATH", "CI=1"]),
    "DURAGENT_TOOL_SANDBOX": ("tool_sandbox", "BWRAP", "bwrap"),
    "DURAGENT_WORKER_MAX_ACTIVITIES": ("worker_max_activities", "50", 50),
    "DURAGENT_WORKER_MAX_WORKFLOW_TASKS": ("worker_max_workflow_tasks", "20", 20),
    "DURAGENT_WORKER_CACHED_RUNS": ("worker_cached_runs", "0", 0),
    "DURAGENT_WORKER_POLLERS": ("worker_pollers", "2", 2),
    "DURAGENT_DATABASE_POOL_SIZE": ("database_pool_size", "3", 3),
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*VARIABLES, "DURAGENT_HOME"]:
        monkeypatch.delenv(name, raising=False)


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env()
    assert settings.home == tmp_path / ".duragent"
    assert settings.database_url == f"sqlite:///{tmp_path / '.duragent' / 'duragent.db'}"
    assert settings.temporal_address == "127.0.0.1:7233"
    assert (settings.temporal_namespace, settings.task_queue) == ("default", "duragent")
    assert settings.model == "claude-sonnet-5-5"
    assert settings.offline and settings.anthropic_base_url is None
    assert settings.offline_script is None
    assert (settings.heartbeat_timeout_s, settings.heartbeat_throttle_ms) == (60.0, 10)
    assert settings.model_read_timeout_s == 120.0
    assert (settings.api_tokens, settings.workspace_roots, settings.tool_env) == ({}, [], [])
    assert settings.temporal_ui_port is None and settings.web_ui_port == 8233
    assert settings.tool_sandbox == "none"
    assert (settings.worker_max_activities, settings.worker_max_workflow_tasks) == (500, 10)
    assert (settings.worker_cached_runs, settings.worker_pollers) == (1000, 5)
    assert settings.database_pool_size == 10


def test_without_an_address_temporal_is_the_homes_own_dev_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No TEMPORAL_ADDRESS: the home's dev server, at the port its record names once one
    was started elsewhere than 7233; an address given is used as it is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    assert Settings.from_env().home_dev_server
    record = DevServerRecord(port=23456, ui_port=24567, cluster_id="c1")
    write_record(record_path(tmp_path / ".duragent" / "temporal.db"), record)
    settings = Settings.from_env()
    assert settings.home_dev_server and settings.temporal_address == "127.0.0.1:23456"
    assert settings.web_ui_port == 24567
    moved = settings.model_copy(update={"temporal_address": "127.0.0.1:1"})
    assert moved.home_dev_server  # still the home's: only its port moved
    given = Settings.from_env(temporal_address="127.0.0.1:7233")
    assert not given.home_dev_server and given.temporal_address == "127.0.0.1:7233"
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
    assert not Settings.from_env().home_dev_server


def test_every_variable_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DURAGENT_HOME", str(tmp_path))
    for name, (_, raw, _) in VARIABLES.items():
        monkeypatch.setenv(name, raw)
    settings = Settings.from_env()
    assert settings.home == tmp_path
    for name, (field, _, expected) in VARIABLES.items():
        assert getattr(settings, field) == expected, name


def test_flags_win_over_the_environment_and_none_is_no_flag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DURAGENT_HOME", str(tmp_path / "env"))
    monkeypatch.setenv("DURAGENT_TASK_QUEUE", "from-env")
    monkeypatch.setenv("TEMPORAL_ADDRESS", "env:1")
    settings = Settings.from_env(home=tmp_path / "flag", task_queue="from-flag", model=None)
    assert settings.home == tmp_path / "flag"
    assert settings.database_url == f"sqlite:///{tmp_path / 'flag' / 'duragent.db'}"
    assert (settings.task_queue, settings.temporal_address) == ("from-flag", "env:1")
    assert settings.model == "claude-sonnet-5-5"


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.setenv(name, "")
    settings = Settings.from_env()
    assert settings.offline and settings.heartbeat_timeout_s == 60.0
    assert settings.temporal_ui_port is None and settings.tool_sandbox == "none"
    assert settings.database_url.endswith("/duragent.db")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "DURAGENT_HEARTBEAT_TIMEOUT",
            "abc",
            "heartbeat_timeout_s: Input should be a valid number, unable to parse string as a"
            " number (got 'abc')",
        ),
        (
            "DURAGENT_TEMPORAL_UI_PORT",
            "x",
            "temporal_ui_port: Input should be a valid integer, unable to parse string as an"
            " integer (got 'x')",
        ),
        (
            "DURAGENT_DATABASE_URL",
            "nonsense",
            "database_url: Value error, not a SQLAlchemy database URL (Could not parse"
            " SQLAlchemy URL from given URL string) (got 'nonsense')",
        ),
        (
            "DURAGENT_TOOL_SANDBOX",
            "docker",
            "DURAGENT_TOOL_SANDBOX: 'docker' is not one of none, bwrap",
        ),
        (
            "DURAGENT_TOOL_ENV",
            "1ABC",
            "DURAGENT_TOOL_ENV: '1ABC' is not NAME (passed through), PREFIX* (every name"
            " starting so) or NAME=value",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_the_setting_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv("DURAGENT_HOME", str(tmp_path))
    monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["sessions"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: bad setting: {message}"]
    assert not any(tmp_path.iterdir())  # refused before anything is stored
