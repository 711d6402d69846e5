"""Error messages in the command line's spelling.

The library's messages name Python parameters and functions (``out_of_range of
release_window_counts must be ...; pass out_of_range='drop'``); a command-line user typed options.
:func:`cli_spelling` rewrites a message for the command that ran, in one place for every command:

* the parameter a message starts with, and every ``name=value`` / ``name = value``, become the
  command's option (``--out-of-range drop``; a flag alone: ``--all-windows``);
* other Python identifiers with an underscore that are options of the command become the option;
* the function the message starts with (``<param> of release_profile ...``, a Python name with
  an underscore or a dot, or the command itself, which the library names as the public call it
  runs under) becomes the command (``dpfreq profile``).

* a keyword named bare (``when group= is set``) and names joined by ``/`` that are all options
  (``start/end/period``) become options (``--group``; ``--start/--end/--period``);
* the library's words for a missing value become the command line's: ``must be None`` and
  ``both None`` read "left out", a flag's ``must be True`` reads "must be given", a final
  ``got None`` reads "got nothing"; a list's value reads as typed (``got '0.5,1'``), values of
  options named together by their options (``got --start 2020-01-01, no --period``);
* another public call that runs as a command (``see plan_profile``) becomes that command
  (``see dpfreq plan profile``), and a parameter of it that is an option of that command
  (``max_count of release_profile``) becomes that option (``--max-count of dpfreq profile``).

Words that are not options of the command (parameters the command does not expose) stay as they
are. Only click and the standard library are imported: the start-up stays light.

:func:`spelled` applies the same rules to a line a command prints (a plan's explanation, say),
except that a number assigned to a plain word (``epsilon=0.5``, ``k=1``: the notation of a
summary) stays: there a Python literal (``unit='item'``, ``singleton=True``) or a Python name
(``capping_epsilon = 0.2``) is an option.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import click

__all__ = ["cli_spelling", "invoked_command", "spelled"]

_VALUE = r"'[^']*'|\"[^\"]*\"|[\w.+:/-]+"
_ASSIGN = re.compile(rf"\b(?P<name>[a-z][a-z0-9_]*)(?P<eq>=| = )(?P<value>{_VALUE})")
_LEADING = re.compile(r"^(?P<param>[a-z][a-z0-9_]*(?:/[a-z][a-z0-9_]*)*) of "
                      r"(?P<func>[A-Za-z]\w*(?:_\w+|\.\w+)+)(?=[ :;,.]|$)")
#: a library rule "must be None" (or "both None") reads "left out" on the command line
_NONE = re.compile(r"(?:(?<=must be )|(?<=both ))None\b")
#: a flag's rule "must be True" / "must be False"
_FLAG_RULE = re.compile(r"(?<=must be )(?P<value>True|False)\b")
#: a keyword named without a value: ``when group= is set``
_BARE = re.compile(r"\b(?P<name>[a-z][a-z0-9_]*)=(?=[\s),;]|$)")
#: names joined by slashes: ``start/end/period``
_JOINED = re.compile(r"(?<![\w/-])(?P<names>[a-z][a-z0-9_]*(?:/[a-z][a-z0-9_]*)+)(?![\w/])")
_IDENTIFIER = re.compile(r"(?<![\w-])(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")
#: the value a message ends with
_GOT = re.compile(r"; got (?P<value>.+)\.$")
#: a Python name standing alone (not inside a path, a quoted name or a dotted name)
_CALL = re.compile(r"(?<![\w/.'\"-])[a-z][a-z_]+(?![\w/'\"-]|\.\w)")
#: a parameter of a public call named inside a message (``max_count of release_profile``)
_OTHER_PARAM = re.compile(r"(?<![\w/-])(?P<param>[a-z][a-z0-9_]*) of "
                          r"(?P<func>[a-z]+(?:_[a-z]+)+)\b")
#: public calls that run as a command
_COMMANDS = {
    "aggregate_reports_file": "dpfreq longitudinal aggregate",
    "build_sketch": "dpfreq sketch build",
    "plan_anonymized": "dpfreq plan anonymize",
    "plan_longitudinal": "dpfreq plan longitudinal",
    "plan_profile": "dpfreq plan profile",
    "plan_reach_stream": "dpfreq plan stream",
    "plan_window_counts": "dpfreq plan reach",
    "release_anonymized_histogram": "dpfreq anonymize",
    "release_profile": "dpfreq profile",
    "release_window_counts": "dpfreq reach",
    "simulate_longitudinal": "dpfreq longitudinal simulate",
}


def invoked_command(group: click.Group, argv: Sequence[str]) -> tuple[click.Command, str]:
    """The (sub)command ``argv`` runs under ``group``, and its path (``"dpfreq plan profile"``).

    Group-level options are flags, so the first word naming a subcommand is the subcommand.
    """
    command: click.Command = group
    path = ["dpfreq"]
    words = list(argv)
    ctx = click.Context(group, info_name="dpfreq")
    while isinstance(command, click.Group):
        for i, word in enumerate(words):
            if word.startswith("-") or word not in command.list_commands(ctx):
                continue
            sub = command.get_command(ctx, word)
            if sub is None:
                break
            command, words = sub, words[i + 1:]
            path.append(word)
            break
        else:
            break
    routes = getattr(command, "routes", {})  # `dpfreq reach query`: a first word routes on
    if words and words[0] in routes:
        command = routes[words[0]]
        path.append(words[0])
    return command, " ".join(path)


#: Python parameters whose option has another name: ``k_values=`` is ``--k``, the Spark
#: engine's ``master=`` is ``--spark-master``.
_PYTHON_NAMES = {"k_values": "k", "master": "spark_master"}


def _spellings(command: click.Command) -> dict[str, click.Parameter]:
    """Python spelling -> parameter: the parameter's name and its long options read as Python
    names (``--time`` stored as ``time_col`` answers to ``time``; ``k_values`` to ``--k``)."""
    out: dict[str, click.Parameter] = {}
    for p in command.params:
        for opt in p.opts if isinstance(p, click.Option) else ():
            if opt.startswith("--"):
                out.setdefault(opt[2:].replace("-", "_"), p)
        if p.name:
            out.setdefault(p.name, p)
    for python, option in _PYTHON_NAMES.items():
        if option in out:
            out.setdefault(python, out[option])
    return out


#: Python parameters that several options give together (``period=`` is ``--start/--end``).
_COMPOUND_NAMES = {"period": ("start", "end")}


def _compound(name: str, params: dict[str, click.Parameter]) -> str | None:
    """``--start/--end`` for ``period`` when the command has both options, else None."""
    parts = _COMPOUND_NAMES.get(name)
    if parts is None or any(p not in params for p in parts):
        return None
    return "/".join(_option(params[p]) for p in parts)


def _option(param: click.Parameter, value: str | None = None) -> str:
    """``--long-form`` of an option (with ``value``), or an argument's metavar."""
    if not isinstance(param, click.Option):
        return param.human_readable_name
    names = [o for o in param.opts if o.startswith("--")] or list(param.opts)
    flag = max(names, key=len)
    if value is None:
        return flag
    if param.is_flag:
        if value in ("True", "true", "1"):
            return flag
        off = [o for o in param.secondary_opts if o.startswith("--")]
        return max(off, key=len) if off else f"no {flag}"
    return f"{flag} {value}"


def cli_spelling(text: str, command: click.Command, path: str, *, notation: bool = False,
                 root: click.Group | None = None) -> str:
    """``text`` with the Python parameters and function of ``command`` in option spelling.

    ``notation`` (a printed line): a number assigned to a plain word (``epsilon=0.5``,
    ``k = 1``) is notation and stays; Python literals (quoted text, ``True``/``False``) and
    Python names (with an underscore) are rewritten. ``root`` (the ``dpfreq`` group) finds the
    options of the other commands a message names (``max_count of release_profile``)."""
    params = _spellings(command)

    def assign(m: re.Match[str]) -> str:
        param = params.get(m.group("name"))
        value = m.group("value")
        if param is None or (notation and "_" not in m.group("name")
                             and value[0] not in "'\"" and value not in ("True", "False")):
            return m.group(0)
        return _option(param, value.strip("'\""))

    def bare(m: re.Match[str]) -> str:
        param = params.get(m.group("name"))
        return m.group(0) if param is None else _option(param)

    def joined(m: re.Match[str]) -> str:
        names = m.group("names").split("/")
        if not all(n in params for n in names):
            return m.group(0)
        return "/".join(_option(params[n]) for n in names)

    out = _BARE.sub(bare, _ASSIGN.sub(assign, text))
    out = _NONE.sub("left out", out)
    lead = _LEADING.match(out) or re.match(
        rf"^(?P<param>[a-z][a-z0-9_/]*) of {re.escape(path)}(?=[ :;,.]|$)", out)
    if lead is not None:
        first = lead.group("param")
        options = [params[n] for n in first.split("/") if n in params]
        if len(options) != len(first.split("/")):
            options = []
        name = ("/".join(_option(p) for p in options) if options
                else _compound(first, params) or first)
        out = f"{name} of {path}{out[lead.end():]}"
        if any(isinstance(p, click.Option) and p.is_flag for p in options):
            out = _FLAG_RULE.sub(lambda m: "given" if m.group("value") == "True"
                                 else "left out", out)
        out = _GOT.sub(lambda m: f"; got {_shown(m.group('value'), options)}.", out)
    out = _JOINED.sub(joined, out)
    if root is not None:
        out = _OTHER_PARAM.sub(lambda m: _other_option(m, root), out)
    out = _CALL.sub(lambda m: _COMMANDS.get(m.group(0), m.group(0)), out)
    return _IDENTIFIER.sub(lambda m: _option(params[m.group("name")])
                           if m.group("name") in params else m.group(0), out)


def _other_option(m: re.Match[str], root: click.Group) -> str:
    """``--max-count of dpfreq profile`` for ``max_count of release_profile``: the parameter of
    a public call that runs as a command (under ``root``), when it is an option of that
    command; else as is."""
    path = _COMMANDS.get(m.group("func"))
    if path is None:
        return m.group(0)
    command, found = invoked_command(root, path.split()[1:])
    param = _spellings(command).get(m.group("param")) if found == path else None
    return m.group(0) if param is None else f"{_option(param)} of {path}"


def _shown(value: str, options: list[click.Parameter]) -> str:
    """The value a message ends with, as the command line gives it: nothing for ``None``; a
    tuple of the values of options named together as those options; a list as typed."""
    if value == "None":
        return "nothing"
    try:
        literal = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value
    if not isinstance(literal, tuple | list) or any(
            isinstance(v, tuple | list | dict | set) for v in literal):
        return value
    if len(options) > 1 and len(literal) == len(options):
        return ", ".join(f"no {_option(p)}" if v is None else _option(p, str(v))
                         for p, v in zip(options, literal, strict=True))
    if len(options) == 1 and None not in literal:
        return repr(",".join(str(v) for v in literal))
    return value


def spelled(text: str) -> str:
    """A line printed by the command running now (click's current context) in its spelling:
    :func:`cli_spelling` with ``notation`` (numbers assigned to plain words stay); ``text`` as is
    outside a command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return text
    root = ctx.find_root().command
    return cli_spelling(text, ctx.command, ctx.command_path, notation=True,
                        root=root if isinstance(root, click.Group) else None)
