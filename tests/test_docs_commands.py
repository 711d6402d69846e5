"""Every ``dpfreq`` command the documentation shows exists as written.

The Python blocks of the pages run (``tests/test_docs.py``); the shell commands do not, since
many read data the reader makes first, start servers or take minutes. This test holds them to
the command line's parser instead, without running anything: every ``dpfreq ...`` line of a
fenced block (``bash``, ``text``, ``console`` or none; continuation lines joined) and every
inline code span that starts with ``dpfreq`` names an existing subcommand, each ``--option`` it
uses exists on that subcommand, a value given to an option with fixed choices is one of them,
and a whole command of a fenced block gives every required option (an inline span may be an
excerpt: ``dpfreq reach ... --timezone America/New_York``). A ``python benchmarks/...``,
``scripts/...`` or ``tests/...`` line names a script that exists and defines each option given.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from dpfreq.cli.main import cli
from dpfreq.cli.spelling import invoked_command

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
PAGES = [p for p in PAGES if "_build" not in p.parts]
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_INLINE = re.compile(r"`((?:dpfreq |python (?:benchmarks|scripts|tests)/)[^`]+)`")
#: Fenced blocks whose lines are shell commands (an info string names the language).
_SHELL = {"", "bash", "sh", "shell", "console", "text"}
#: Where a shell line stops being one command's arguments.
_STOP = {"&", "&&", "|", "||", ";", ">", ">>", "2>", "<"}
#: Written where a reader fills in the rest: such a command is an excerpt.
_ELLIPSIS = ("...", "…")


def _commands(text: str) -> list[tuple[int, str, bool]]:
    """``(line, command, whole)`` for every ``dpfreq`` command (and every ``python`` run of a
    script of the repository) of a page: the lines of shell
    fences (``whole``: the command as a reader would type it) and inline code spans of the
    prose, which may run over a line break (``whole=False``: possibly an excerpt)."""
    out: list[tuple[int, str, bool]] = []
    fence: str | None = None
    info = ""
    prose: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None

    def flush() -> None:
        if prose:
            first, paragraph = prose[0][0], "\n".join(line for _, line in prose)
            for span in _INLINE.finditer(paragraph):
                where = first + paragraph.count("\n", 0, span.start())
                out.append((where, " ".join(span.group(1).split()), False))
            prose.clear()

    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                flush()
                fence, info = m.group("fence"), m.group("info").strip().lower()
            elif line.strip():
                prose.append((number, line))
            else:
                flush()
            continue
        if m and m.group("fence").startswith(fence) and not m.group("info").strip():
            fence = None
            continue
        if info not in _SHELL:
            continue
        code = line.strip()
        if pending is not None:
            start, sofar = pending
            code = f"{sofar} {code}"
        elif not code.startswith(("dpfreq ", "python benchmarks/", "python scripts/",
                                  "python tests/")):
            continue
        else:
            start = number
        if code.endswith("\\"):
            pending = (start, code[:-1].rstrip())
            continue
        pending = None
        out.append((start, code, True))
    flush()
    return out


def _words(command: str) -> list[str]:
    """The command's words up to the end of its first command (a pipe, ``&``, a redirect)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="&|;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for word in lexer:
        if word in _STOP:
            break
        words.append(word)
    return words


def _options(command: click.Command) -> dict[str, click.Parameter]:
    out: dict[str, click.Parameter] = {"--help": command.get_help_option(
        click.Context(command)) or click.Option(["--help"])}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in (*param.opts, *param.secondary_opts):
                out[opt] = param
    return out


def _problems(command_text: str, whole: bool) -> list[str]:
    words = _words(command_text)
    assert words[0] == "dpfreq"
    command, path = invoked_command(cli, words[1:])
    if isinstance(command, click.Group) and not getattr(command, "invoke_without_command", False):
        subcommands = sorted(command.list_commands(click.Context(command)))
        return [f"{path} needs a subcommand: {subcommands}"]
    known = _options(command)
    problems: list[str] = []
    given: set[str] = set()
    excerpt = not whole or any(e in command_text for e in _ELLIPSIS)
    rest = words[len(path.split()):]
    for i, word in enumerate(rest):
        word = word.strip("[]")
        if not word.startswith("--"):
            continue
        name, _, inline_value = word.partition("=")
        param = known.get(name)
        if param is None:
            problems.append(f"{path} has no option {name}")
            continue
        given.add(param.name or name)
        value = inline_value or (rest[i + 1] if i + 1 < len(rest) else "")
        if isinstance(param.type, click.Choice) and not getattr(param, "is_flag", False) and \
                re.fullmatch(r"[a-z0-9_]+", value) and value not in param.type.choices:
            problems.append(f"{path} {name} takes one of {list(param.type.choices)}; "
                            f"got {value!r}")
    if not excerpt:
        for param in command.params:
            if isinstance(param, click.Option) and param.required and param.name not in given:
                problems.append(f"{path} needs {param.opts[-1]}")
    return problems


def _script_problems(command_text: str) -> list[str]:
    """A ``python benchmarks/x.py --option ...`` line: the script exists and defines every
    option it is given (the scripts parse with argparse: the option is a literal in them)."""
    if re.search(r"<\w+>", command_text):  # a pattern (`bench_<system>.py`), not a file
        return []
    words = [w.strip("[]") for w in _words(command_text)]
    script = ROOT / words[1]
    if not script.is_file():
        return [f"no script {words[1]}"]
    source = script.read_text(encoding="utf-8")
    return [f"{words[1]} has no option {word}" for word in words[2:]
            if word.startswith("--") and f'"{word.partition("=")[0]}"' not in source]


def _cases() -> list[tuple[str, int, str, bool]]:
    return [(str(page.relative_to(ROOT)), line, text, whole) for page in PAGES
            for line, text, whole in _commands(page.read_text(encoding="utf-8"))]


CASES = _cases()


def test_the_pages_show_commands() -> None:
    """The scan finds the commands of the pages (a broken scan would check nothing)."""
    pages = {page for page, *_ in CASES}
    assert {"README.md", "docs/guide/windows.md", "docs/accuracy.md"} <= pages
    assert sum(whole for *_, whole in CASES) >= 30
    assert sum(not whole for *_, whole in CASES) >= 20
    assert sum(text.startswith("python benchmarks/") for _, _, text, _ in CASES) >= 10


def test_the_scan_catches_what_it_is_for() -> None:
    """A missing required option, an unknown option, a wrong choice and an unknown subcommand
    are each found; an excerpt is not held to the required options."""
    assert _problems("dpfreq reach log.csv --item u --time ts --epsilon 1 --unit item "
                     "--windows cumulative", True) == ["dpfreq reach needs --k"]
    assert _problems("dpfreq reach ... --time-unit s --tz UTC", False) == [
        "dpfreq reach has no option --tz"]
    assert _problems("dpfreq ledger init b.db --epsilon 1 --composition tigth", True) == [
        "dpfreq ledger init --composition takes one of ['tight', 'basic']; got 'tigth'"]
    assert _problems("dpfreq ledger", False)[0].startswith("dpfreq ledger needs a subcommand")
    assert _script_problems("python benchmarks/bench_profile.py --quick --only grid") == []
    assert _script_problems("python benchmarks/bench_profile.py [--fast]") == [
        "benchmarks/bench_profile.py has no option --fast"]
    assert _script_problems("python benchmarks/nope.py") == ["no script benchmarks/nope.py"]
    text = ("Run `dpfreq plan reach --start 2024-01-01\n--horizon 3` and\n\n```bash\n"
            "dpfreq ledger init b.db \\\n    --epsilon 1  # a comment --no\n```\n")
    assert _commands(text) == [(1, "dpfreq plan reach --start 2024-01-01 --horizon 3", False),
                               (5, "dpfreq ledger init b.db --epsilon 1  # a comment --no",
                                True)]


@pytest.mark.parametrize(("page", "line", "text", "whole"), CASES,
                         ids=[f"{page}:{line}" for page, line, *_ in CASES])
def test_documented_command_parses(page: str, line: int, text: str, whole: bool) -> None:
    problems = _script_problems(text) if text.startswith("python") else _problems(text, whole)
    assert not problems, f"{page}:{line}: {text!r}: {problems}"
