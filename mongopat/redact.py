"""Keep credentials out of every message, log line and report.

A MongoDB connection string carries secrets in three places: the password of its user information (for
``MONGODB-AWS``, the secret access key), the options MongoDB's URI options specification marks sensitive
(:data:`SENSITIVE_OPTIONS`: the TLS key file's password, the SOCKS5 proxy's user and password), and the
properties of ``authMechanismProperties`` other than the few that name a service or a host
(:data:`SHOWN_AUTH_PROPERTIES`): ``AWS_SESSION_TOKEN`` and whatever a future mechanism adds. Each is
replaced by ``***`` in the URI, and everywhere else its value appears (a driver's message quoting it, raw or
percent-decoded). Option names are compared without case, as the driver does.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

MASK = "***"
_USERINFO = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:@/]*)(?::(?P<password>[^@/]*))?@")
SENSITIVE_OPTIONS = frozenset({"tlscertificatekeyfilepassword", "sslpemkeypassword", "proxypassword", "proxyusername"})
AUTH_PROPERTIES = "authmechanismproperties"
# Properties that say which service or host to authenticate with, not how: shown, for diagnosis.
SHOWN_AUTH_PROPERTIES = frozenset(
    {"SERVICE_NAME", "SERVICE_HOST", "SERVICE_REALM", "CANONICALIZE_HOST_NAME", "ENVIRONMENT", "TOKEN_RESOURCE",
     "ALLOWED_HOSTS"}
)  # fmt: skip


def _query(uri: str) -> tuple[str, str | None]:
    """The URI before its options, and its options (None without any)."""
    head, mark, options = uri.partition("?")
    return (head, options) if mark else (uri, None)


def _options(options: str) -> list[tuple[str, str, str, str]]:
    """``(separator before it, name, "=" or "", raw value)`` for each option (``&`` or ``;`` separated)."""
    found = []
    for separator, item in re.findall(r"(^|[&;])([^&;]*)", options):
        name, equals, value = item.partition("=")
        found.append((separator, name, equals, value))
    return found


def _auth_properties(raw: str) -> tuple[str, list[str]]:
    """The ``authMechanismProperties`` value with secret properties masked, and the secrets."""
    shown, secrets = [], []
    for item in unquote(raw).split(","):
        key, colon, value = item.partition(":")
        if colon and key.strip().upper() not in SHOWN_AUTH_PROPERTIES and value:
            shown.append(f"{key}:{MASK}")
            secrets.append(value)
        else:
            shown.append(item)
    return ",".join(shown), secrets


def redact_uri(uri: str) -> str:
    """The URI with every secret replaced by ``***`` (user name, hosts and other options kept, for diagnosis)."""
    match = _USERINFO.match(uri)
    if match and match.group("password") is not None:
        uri = f"{match.group('scheme')}{match.group('user')}:{MASK}@{uri[match.end() :]}"
    head, options = _query(uri)
    if options is None:
        return uri
    parts = []
    for separator, name, equals, value in _options(options):
        lowered = name.lower()
        if lowered in SENSITIVE_OPTIONS and value:
            value = MASK
        elif lowered == AUTH_PROPERTIES and value:
            value = _auth_properties(value)[0]
        parts.append(f"{separator}{name}{equals}{value}")
    return f"{head}?{''.join(parts)}"


def secrets(uri: str) -> list[str]:
    """Every secret the URI holds, as written and percent-decoded (longest first)."""
    found: set[str] = set()
    match = _USERINFO.match(uri)
    if match and match.group("password"):
        found.add(match.group("password"))
    _head, options = _query(uri)
    for _separator, name, _equals, value in _options(options or ""):
        lowered = name.lower()
        if lowered in SENSITIVE_OPTIONS and value:
            found.add(value)
        elif lowered == AUTH_PROPERTIES and value:
            found.update(_auth_properties(value)[1])
    expanded = {form for secret in found for form in (secret, unquote(secret), quote(unquote(secret), safe=""))}
    return sorted((s for s in expanded if s), key=len, reverse=True)


def scrub(text: str, uri: str | None) -> str:
    """Remove the URI's secrets (raw and percent-decoded) from any text, e.g. a driver's error message."""
    if not uri:
        return text
    text = text.replace(uri, redact_uri(uri))
    for secret in secrets(uri):
        text = text.replace(secret, MASK)
    return text
