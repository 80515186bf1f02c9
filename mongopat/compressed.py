"""Open a file that may be gzipped whatever its name (logs, mongodump archives): told by its first bytes."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO

from mongopat.errors import SourceError

GZIP_MAGIC = b"\x1f\x8b"


def open_sniffed(path: Path, what: str = "") -> IO[bytes]:
    """``path`` for reading, through gzip when it starts with gzip's magic number; ``what`` names the file
    in the error (``"log "`` gives "cannot read log ...")."""
    try:
        with path.open("rb") as probe:
            gzipped = probe.read(2) == GZIP_MAGIC
        return gzip.open(path, "rb") if gzipped else path.open("rb")
    except OSError as exc:
        raise SourceError(f"cannot read {what}{path}: {exc.strerror or exc}") from None
