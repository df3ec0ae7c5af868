"""The connection to a Temporal cluster or Temporal Cloud: TLS and an API key from the
variables Temporal's CLI and SDKs read, turned into the same connection they would make,
and a bad file refused up front in one line naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.envconfig import ClientConfigProfile
from tls_support import make_certificates
from typer.testing import CliRunner

from duragent.client.cli import app
from duragent.client.connection import temporal_connect_config
from duragent.client.workers import private_paths
from duragent.settings import Settings

pytestmark = pytest.mark.fast

CONNECTION_VARIABLES = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_API_KEY",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CONNECTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_the_dev_server_connection_is_plain_as_before() -> None:
    settings = Settings.from_env(home=Path("/tmp"))
    assert not settings.temporal_tls_on
    assert temporal_connect_config(settings) == {
        "target_host": "127.0.0.1:7233",
        "namespace": "default",
    }


def cases(certs_dir: Path) -> list[dict[str, str]]:
    certs = make_certificates(certs_dir)
    mtls = {
        "TEMPORAL_ADDRESS": "agents.a1b2c.tmprl.cloud:7233",
        "TEMPORAL_NAMESPACE": "agents.a1b2c",
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(certs.client_cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.client_key),
    }
    return [
        mtls,
        mtls
        | {
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca),
            "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
        },
        {
            "TEMPORAL_ADDRESS": "eu-west-1.aws.api.temporal.io:7233",
            "TEMPORAL_NAMESPACE": "agents.a1b2c",
            "TEMPORAL_API_KEY": "key-123",
        },
        {"TEMPORAL_ADDRESS": "temporal.internal:7233", "TEMPORAL_TLS": "true"},
        {"TEMPORAL_ADDRESS": "proxy:7233", "TEMPORAL_TLS": "false", "TEMPORAL_API_KEY": "k"},
    ]


def test_each_connection_is_the_one_temporals_own_configuration_makes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for env in cases(tmp_path):
        for name in CONNECTION_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        ours = temporal_connect_config(Settings.from_env(home=tmp_path))
        theirs = ClientConfigProfile.load(
            disable_file=True, override_env_vars=env
        ).to_client_connect_config()
        assert ours == {"namespace": "default", **theirs}, env  # Client.connect's default
        assert ("tls" in ours and ours["tls"] is not False) == (env.get("TEMPORAL_TLS") != "false")


def test_the_api_key_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_API_KEY", "very-secret-key")
    settings = Settings.from_env(home=Path("/tmp"))
    assert settings.temporal_tls_on
    assert "very-secret-key" not in repr(settings) and "very-secret-key" not in str(settings)
    assert temporal_connect_config(settings)["api_key"] == "very-secret-key"


def test_a_sandboxed_tool_cannot_read_the_workers_tls_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    certs = make_certificates(tmp_path)
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(certs.client_cert))
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(certs.client_key))
    hidden = private_paths(Settings.from_env(home=tmp_path / "home"))
    assert certs.client_key in hidden  # covered by /dev/null in bwrap, wherever it is


def bad_settings(certs_dir: Path) -> list[tuple[dict[str, str], str]]:
    certs = make_certificates(certs_dir)
    not_pem = certs_dir / "cert.der"
    not_pem.write_bytes(b"\x30\x82\x01\x0a")
    missing = certs_dir / "nope.pem"
    return [
        (
            {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(missing)},
            f"TEMPORAL_TLS_SERVER_CA_CERT_PATH: {missing} cannot be read (No such file or"
            " directory)",
        ),
        (
            {
                "TEMPORAL_TLS_CLIENT_CERT_PATH": str(not_pem),
                "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.client_key),
            },
            f"TEMPORAL_TLS_CLIENT_CERT_PATH: {not_pem} is not a PEM file (no -----BEGIN line)",
        ),
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": str(certs.client_cert)},
            "TEMPORAL_TLS_CLIENT_CERT_PATH is set but TEMPORAL_TLS_CLIENT_KEY_PATH is not: a"
            " client certificate and its key go together",
        ),
        (
            {"TEMPORAL_TLS": "false", "TEMPORAL_TLS_SERVER_NAME": "temporal.internal"},
            "TEMPORAL_TLS is false, but TEMPORAL_TLS_SERVER_NAME is set: unset one of them",
        ),
        (
            {"TEMPORAL_TLS": "maybe"},
            "temporal_tls: Input should be a valid boolean, unable to interpret input"
            " (got 'maybe')",
        ),
    ]


def test_a_bad_tls_setting_is_one_line_naming_the_variable_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    for env, message in bad_settings(tmp_path):
        for name in CONNECTION_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("DURAGENT_HOME", str(home))
        result = CliRunner().invoke(app, ["sessions"])
        assert (result.exit_code, result.stderr.splitlines()) == (
            2,
            [f"error: bad setting: {message}"],
        ), env
        assert not home.exists()  # refused before anything is stored
