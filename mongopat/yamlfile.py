"""Reading the YAML files mongopat takes (access-pattern files, migrations, check configuration): the
node tree with line numbers, and one error that lists every problem found, each with file:line:column."""

from __future__ import annotations

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
