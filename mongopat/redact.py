"""Keep credentials out of every message, log line and report."""

from __future__ import annotations

import re
from urllib.parse import unquote

_USERINFO = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:@/]*)(?::(?P<password>[^@/]*))?@")


def redact_uri(uri: str) -> str:
    """Return the URI with its password replaced by ``***`` (user name kept, for diagnosis)."""
    match = _USERINFO.match(uri)
    if not match or match.group("password") is None:
        return uri
    return f"{match.group('scheme')}{match.group('user')}:***@{uri[match.end() :]}"


def uri_password(uri: str) -> str | None:
    match = _USERINFO.match(uri)
    if not match or not match.group("password"):
        return None
    return match.group("password")


def scrub(text: str, uri: str | None) -> str:
    """Remove the URI's password (raw and percent-decoded) from any text, e.g. a driver's error message."""
    if not uri:
        return text
    password = uri_password(uri)
    if password:
        for secret in {password, unquote(password)}:
            if secret:
                text = text.replace(secret, "***")
    return text.replace(uri, redact_uri(uri))
