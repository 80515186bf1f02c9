"""No secret of a connection string in any output: every credential a MongoDB URI can carry, through every
command that takes ``--uri``, against a host that does not answer and against the test lane's server."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.redact import redact_uri, scrub, secrets

runner = CliRunner()

# (what it is, the URI's options holding it, the secret itself)
SECRETS = [
    ("password", "", "Pw0rd-secret"),
    ("percent-encoded password", "", "p%40ss%2Fw0rd"),
    (
        "TLS key password",
        "tls=true&tlsCertificateKeyFile=/nonexistent.pem&tlsCertificateKeyFilePassword=KeyPass1",
        "KeyPass1",
    ),
    ("legacy TLS key password", "ssl=true&sslPEMKeyPassword=LegacyPass2", "LegacyPass2"),
    ("proxy user", "proxyHost=127.0.0.1&proxyPort=1&proxyUsername=ProxyUser3&proxyPassword=x1", "ProxyUser3"),
    ("proxy password", "proxyHost=127.0.0.1&proxyPort=1&proxyUsername=u&proxyPassword=ProxyPass4", "ProxyPass4"),
    (
        "AWS session token",
        "authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:Sess5Token",
        "Sess5Token",
    ),
    (
        "AWS session token, encoded",
        "authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN%3ASess6Tok",
        "Sess6Tok",
    ),
    ("option names in any case", "authMechanism=MONGODB-AWS&AUTHMECHANISMPROPERTIES=aws_session_token:Sess7", "Sess7"),
]
COMMANDS = [
    ["analyze"],
    ["recommend"],
    ["check", "--dir", "{dir}"],
    ["migrate", "status", "--dir", "{dir}"],
    ["migrate", "up", "--dir", "{dir}"],
    ["access", "draft"],
]


def uri_with(host: str, options: str, secret: str, case: str) -> str:
    password = secret if "password" in case else "pw"
    query = "&".join(part for part in (options, "serverSelectionTimeoutMS=300", "connectTimeoutMS=300") if part)
    return f"mongodb://user:{password}@{host}/shop?{query}"


def forms(secret: str) -> set[str]:
    from urllib.parse import unquote

    return {secret, unquote(secret)}


@pytest.mark.parametrize("case, options, secret", SECRETS, ids=[c[0] for c in SECRETS])
def test_the_uri_is_shown_without_its_secrets(case, options, secret):
    uri = uri_with("db.example.com", options, secret, case)
    shown = redact_uri(uri)
    assert not any(form in shown for form in forms(secret)), shown
    assert "db.example.com" in shown and "serverSelectionTimeoutMS=300" in shown  # the rest kept, for diagnosis
    assert set(forms(secret)) <= set(secrets(uri))
    message = f"connection to {uri} failed: {secret} refused ({next(iter(forms(secret)))})"
    assert not any(form in scrub(message, uri) for form in forms(secret))


def test_names_and_hosts_stay_readable():
    uri = "mongodb://user:pw@h1:27017,h2/db?replicaSet=rs0&authMechanismProperties=SERVICE_NAME:mongodb,AWS_SESSION_TOKEN:t0k"
    assert redact_uri(uri) == (
        "mongodb://user:***@h1:27017,h2/db?replicaSet=rs0&authMechanismProperties=SERVICE_NAME:mongodb,AWS_SESSION_TOKEN:***"
    )
    assert redact_uri("mongodb://h/?w=majority&journal") == "mongodb://h/?w=majority&journal"


def run_all(uri: str, tmp_path: Path) -> list[tuple[list[str], int, str]]:
    runs = []
    for command in COMMANDS:
        args = [arg.replace("{dir}", str(tmp_path / "migrations")) for arg in command]
        result = runner.invoke(app, [*args, "--uri", uri, "--timeout-ms", "300"])
        runs.append((args, result.exit_code, result.output + (str(result.exception) if result.exception else "")))
    return runs


@pytest.mark.parametrize("case, options, secret", SECRETS, ids=[c[0] for c in SECRETS])
def test_no_command_prints_a_secret_for_an_unreachable_host(case, options, secret, tmp_path):
    (tmp_path / "migrations").mkdir()
    for args, code, output in run_all(uri_with("127.0.0.1:1", options, secret, case), tmp_path):
        assert code != 0, (args, output)
        assert not any(form in output for form in forms(secret)), (args, output)
        assert "Traceback" not in output, (args, output)


@pytest.mark.parametrize("case, options, secret", SECRETS, ids=[c[0] for c in SECRETS])
def test_no_command_prints_a_secret_for_a_live_server(case, options, secret, mongo, tmp_path):
    if not mongo.real:
        pytest.skip("a URI names a server: the server lane's")
    (tmp_path / "migrations").mkdir()
    host = mongo.uri.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    for args, _code, output in run_all(uri_with(host, options, secret, case), tmp_path):
        assert not any(form in output for form in forms(secret)), (args, output)
        assert "Traceback" not in output, (args, output)
