"""Reading the YAML files mongopat takes (access-pattern files, migrations, check configuration): the
node tree with line numbers, and one error that lists every problem found, each with file:line:column."""

from __future__ import annotations

from pathlib import Path

import yaml

from mongopat.errors import InputError


class YamlFileError(InputError):
    """One or more problems in a YAML file (all of them listed)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
        )


def compose_yaml(text: str, file: str) -> yaml.Node | None:
    """The YAML node tree (no object is built), or an error naming file, line and column."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise YamlFileError([f"{where}: not valid YAML: {exc.problem or exc}"]) from None
    except yaml.YAMLError as exc:
        raise YamlFileError([f"{file}: not valid YAML: {exc}"]) from None


def read_yaml_text(path: str | Path, what: str) -> str:
    """The text of the YAML file ``what`` (e.g. "config file"), or an error naming it: missing,
    unreadable or not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from None
