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

Words that are not options of the command (parameters the command does not expose) stay as they
are. Only click and the standard library are imported: the start-up stays light.

:func:`spelled` applies the same rules to a line a command prints (a plan's explanation, say),
except that a number assigned to a plain word (``epsilon=0.5``, ``k=1``: the notation of a
summary) stays: there a Python literal (``unit='item'``, ``singleton=True``) or a Python name
(``capping_epsilon = 0.2``) is an option.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import click

__all__ = ["cli_spelling", "invoked_command", "spelled"]

_VALUE = r"'[^']*'|\"[^\"]*\"|[\w.+:/-]+"
_ASSIGN = re.compile(rf"\b(?P<name>[a-z][a-z0-9_]*)(?P<eq>=| = )(?P<value>{_VALUE})")
_LEADING = re.compile(r"^(?P<param>[a-z][a-z0-9_]*) of "
                      r"(?P<func>[A-Za-z]\w*(?:_\w+|\.\w+)+)(?=[ :;,.]|$)")
#: a library rule "must be None" reads "must be left out" on the command line
_NONE = re.compile(r"(?<=must )be None\b")
_IDENTIFIER = re.compile(r"(?<![\w-])(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")


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


#: Python parameters whose option has another name: ``k_values=`` is ``--k``.
_PYTHON_NAMES = {"k_values": "k"}


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


def cli_spelling(text: str, command: click.Command, path: str, *, notation: bool = False
                 ) -> str:
    """``text`` with the Python parameters and function of ``command`` in option spelling.

    ``notation`` (a printed line): a number assigned to a plain word (``epsilon=0.5``,
    ``k = 1``) is notation and stays; Python literals (quoted text, ``True``/``False``) and
    Python names (with an underscore) are rewritten."""
    params = _spellings(command)

    def assign(m: re.Match[str]) -> str:
        param = params.get(m.group("name"))
        value = m.group("value")
        if param is None or (notation and "_" not in m.group("name")
                             and value[0] not in "'\"" and value not in ("True", "False")):
            return m.group(0)
        return _option(param, value.strip("'\""))

    out = _NONE.sub("be left out", _ASSIGN.sub(assign, text))
    lead = _LEADING.match(out) or re.match(
        rf"^(?P<param>[a-z][a-z0-9_]*) of {re.escape(path)}(?=[ :;,.]|$)", out)
    if lead is not None:
        param = params.get(lead.group("param"))
        name = (_option(param) if param is not None
                else _compound(lead.group("param"), params) or lead.group("param"))
        out = f"{name} of {path}{out[lead.end():]}"
    return _IDENTIFIER.sub(lambda m: _option(params[m.group("name")])
                           if m.group("name") in params else m.group(0), out)


def spelled(text: str) -> str:
    """A line printed by the command running now (click's current context) in its spelling:
    :func:`cli_spelling` with ``notation`` (numbers assigned to plain words stay); ``text`` as is
    outside a command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return text
    return cli_spelling(text, ctx.command, ctx.command_path, notation=True)
