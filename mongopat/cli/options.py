"""Options the commands share, declared once: single options (``--format``, ``--yes``...) and groups.

A command that reads a database or a dump folder takes one ``source: SourceSpec`` parameter and is
decorated with :func:`reads_source`; one that runs migrations takes ``target: SourceSpec`` and is decorated
with :func:`migrates`. The decorator gives the command line the group's options (``--uri``, ``--dump``,
``--db``, the timeouts...) and hands the command the ``SourceSpec`` they make, so every command spells
them, their help and their defaults the same way.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from mongopat.sources import SourceSpec
from mongopat.sources.base import DEFAULT_MAX_TIME_MS, DEFAULT_TIMEOUT_MS

if TYPE_CHECKING:
    from mongopat.project import Project


def _uri_option(help: str) -> Any:
    return Annotated[
        str | None, typer.Option("--uri", envvar="MONGOPAT_URI", show_envvar=True, metavar="URI", help=help)
    ]


UriOption = _uri_option("mongodb:// or mongodb+srv:// URI (mongomock:// for tests).")
MigrateUriOption = _uri_option("The deployment to migrate (mongodb://...).")
DumpOption = Annotated[
    str | None,
    typer.Option(
        "--dump",
        metavar="PATH",
        help="Folder of mongoexport .json and/or mongodump .bson files, or a mongodump --archive file (read-only: "
        "'mongopat unpack' writes it out as a folder): no server needed.",
    ),
]
DbOption = Annotated[
    str | None, typer.Option("--db", metavar="NAME", help="Database name, when the URI or folder does not say.")
]
CollectionOption = Annotated[
    list[str] | None,
    typer.Option("--collection", "-c", metavar="NAME", help="Collection to read (repeatable); default: all."),
]
TimeoutOption = Annotated[
    int, typer.Option("--timeout-ms", metavar="MS", help="How long to wait for an unreachable server.", min=1)
]
MaxTimeOption = Annotated[
    int, typer.Option("--max-time-ms", metavar="MS", help="maxTimeMS sent with every server command.", min=1)
]
ReadPrefOption = Annotated[
    str,
    typer.Option(
        "--read-preference", metavar="MODE", help="primary, primaryPreferred, secondary, secondaryPreferred, nearest."
    ),
]


def project() -> Project:
    """The working directory's project file; a malformed one is an input error like any other (exit 2)."""
    from mongopat.cli.errors import fail
    from mongopat.errors import MongopatError
    from mongopat.project import current

    try:
        return current()
    except MongopatError as error:
        raise fail(error) from None


def _migrations_folder(value: str | None) -> str:
    return project().migrations_folder(value)


def _access_file(value: str | None) -> str | None:
    return project().access_file(value)


DirOption = Annotated[
    str | None,
    typer.Option(
        "--dir",
        metavar="FOLDER",
        callback=_migrations_folder,
        help="The migrations folder [default: the project file's (mongopat.yaml), else migrations].",
    ),
]


AccessOption = Annotated[
    str | None,
    typer.Option(
        "--access",
        "-a",
        metavar="FILE",
        callback=_access_file,
        help="The access-pattern file: what the application does [default: the project file's].",
    ),
]


def format_option(*choices: str) -> Any:
    """``--format``/``-f`` with its choices, shown in help and completed by the shell; another value is a usage
    error (exit 2)."""
    return Annotated[
        Literal[choices],  # type: ignore[valid-type]
        typer.Option("--format", "-f", help=f"Output: {', '.join(choices)}."),
    ]


SeedOption = Annotated[int, typer.Option("--seed", metavar="N", help="Random seed for sampling dump files.")]
FormatOption = format_option("table", "json")
RecommendFormatOption = format_option("table", "json", "markdown")
DraftFormatOption = format_option("yaml", "json")
CheckFormatOption = format_option("table", "json", "junit", "sarif")
GuideFormatOption = format_option("markdown", "json")
HtmlOption = Annotated[
    str | None, typer.Option("--html", metavar="FILE", help="Also write a self-contained HTML report to this file.")
]
ShowValuesOption = Annotated[
    bool,
    typer.Option("--show-values", help="Show field values (top values, an example document) in HTML; off by default."),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Only results and errors.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Notes on how each figure was obtained.")]
BatchOption = Annotated[
    int, typer.Option("--batch-size", metavar="N", help="Documents per batch (one bulk write each).", min=1)
]
LockTimeoutOption = Annotated[
    float, typer.Option("--lock-timeout", metavar="SECONDS", help="Seconds to wait for another run's lock.", min=0)
]

NoColorOption = Annotated[bool, typer.Option("--no-color", help="No colours (NO_COLOR is honoured too).")]

_KW = inspect.Parameter.KEYWORD_ONLY


def _spec(options: dict[str, Any], **fixed: Any) -> SourceSpec:
    """The source from its options; ``--no-color`` given after the command applies to this run's output."""
    from mongopat.cli.output import State

    asked = bool(options.pop("no_color", False))
    State.no_color = State.no_color or asked
    # The source the flags name (MONGOPAT_URI counts as a flag), else the project file's.
    options["uri"], options["dump"], options["db"] = project().source(options["uri"], options["dump"], options["db"])
    return SourceSpec(**options, **fixed)


def _option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, _KW, default=default, annotation=annotation)


def _with_group(
    parameter: str,
    first: list[inspect.Parameter],
    last: list[inspect.Parameter],
    make: Callable[[dict[str, Any]], SourceSpec],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Replace the command's ``parameter`` by the options ``first`` (listed before its own) and ``last``
    (after them); ``make`` builds the value of ``parameter`` from those options."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        own = [
            p.replace(kind=_KW, annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.name != parameter
        ]
        group = {p.name for p in first + last}

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            options = {name: kwargs.pop(name) for name in list(kwargs) if name in group}
            return command(**{parameter: make(options)}, **kwargs)

        parameters = first + own + last
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


def reads_source(
    read_preference: str = "secondaryPreferred", seed: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--uri``, ``--dump``, ``--db`` (first) and ``--timeout-ms``, ``--max-time-ms``,
    ``--read-preference`` (last), and ``--seed`` when the command samples dump files."""
    first = [_option("uri", UriOption, None), _option("dump", DumpOption, None), _option("db", DbOption, None)]
    last = [
        _option("timeout_ms", TimeoutOption, DEFAULT_TIMEOUT_MS),
        _option("max_time_ms", MaxTimeOption, DEFAULT_MAX_TIME_MS),
        _option("read_preference", ReadPrefOption, read_preference),
        _option("no_color", NoColorOption, False),
    ]
    if seed:
        last.insert(0, _option("seed", SeedOption, 0))
    return _with_group("source", first, last, _spec)


def migrates() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The deployment or dump folder a migration command runs against: ``--uri``, ``--db``, ``--dump``
    (first) and ``--timeout-ms`` (last); it reads and writes the primary."""
    first = [_option("uri", MigrateUriOption, None), _option("db", DbOption, None), _option("dump", DumpOption, None)]
    last = [_option("timeout_ms", TimeoutOption, DEFAULT_TIMEOUT_MS), _option("no_color", NoColorOption, False)]
    return _with_group(
        "target",
        first,
        last,
        lambda options: _spec(options, max_time_ms=DEFAULT_MAX_TIME_MS, read_preference="primary"),
    )
