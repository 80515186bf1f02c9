"""Open a file that may be gzipped whatever its name (logs, mongodump archives): told by its first bytes."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import IO

from mongopat.errors import SourceError

GZIP_MAGIC = b"\x1f\x8b"
# What reading a file can raise beyond the format's own errors: the disk (OSError), a gzip stream cut short
# (EOFError) or damaged inside (zlib.error, which is no OSError).
READ_ERRORS = (OSError, EOFError, zlib.error)


def unreadable(path: Path, exc: BaseException, where: str = "", what: str = "") -> SourceError:
    """The message for ``exc`` raised while reading ``path``; ``where`` says how far the reading got
    (``"after line 1,203"``, ``"at byte 4,096"``), ``what`` names the kind of file (``"log "``)."""
    if isinstance(exc, zlib.error):
        reason = f"the gzip data is damaged ({exc})"
    elif isinstance(exc, EOFError):
        reason = "the gzip data ends early (a file cut short?)"
    elif isinstance(exc, gzip.BadGzipFile):
        reason = f"not valid gzip data ({exc})"
    elif isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
    else:
        reason = str(exc)
    place = f" {where}" if where else ""
    return SourceError(
        f"cannot read {what}{path}{place}: {reason}",
        hint="nothing is reported from a file read only in part: copy or export it again",
    )


def open_sniffed(path: Path, what: str = "") -> IO[bytes]:
    """``path`` for reading, through gzip when it starts with gzip's magic number; ``what`` names the file
    in the error (``"log "`` gives "cannot read log ...")."""
    try:
        with path.open("rb") as probe:
            gzipped = probe.read(2) == GZIP_MAGIC
        return gzip.open(path, "rb") if gzipped else path.open("rb")
    except OSError as exc:
        raise SourceError(f"cannot read {what}{path}: {exc.strerror or exc}") from None
