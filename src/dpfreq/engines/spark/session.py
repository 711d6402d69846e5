"""Spark sessions and Spark's errors in one line: what the Spark engine
(:mod:`dpfreq.engines.spark`) and its helpers share.

A Spark failure becomes one line: Spark's error condition or the Java exception classes (the
root cause, such as ``java.lang.OutOfMemoryError``, in full), never a value Spark's message may
quote, unless ``DPFREQ_DEBUG=1``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import SparkSession

import dpfreq.engines._common as common
from dpfreq.errors import EngineUnavailableError

__all__ = ["EXECUTOR_DOCS", "SPARK_ERRORS", "executor_import_error", "one_line", "reads_text_file",
           "reason", "spark_session"]


def spark_session(master: str = "local[*]", app_name: str = "dpfreq") -> SparkSession:
    """Get or create a SparkSession for dpfreq.

    An active session (one the caller created, e.g. by ``spark-submit``) is returned unchanged,
    with its own master and configuration. Otherwise a session is created on ``master`` with
    ``spark.sql.session.timeZone=UTC`` and Arrow transfers on; executors then run this very
    interpreter (``PYSPARK_PYTHON`` is set to ``sys.executable`` unless already set, so that
    they import the same dpfreq). A session that cannot start (no Java, unreachable master)
    raises :class:`~dpfreq.errors.EngineUnavailableError` with Spark's one-line reason.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    try:
        return builder.getOrCreate()
    except Exception as exc:  # JVM not found, master unreachable, bad URL, ...
        raise EngineUnavailableError(
            f"cannot start Spark with master {master!r}: {one_line(exc)} (the spark engine "
            "needs Java 17+ and a reachable master)") from exc


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _java_lines(exc: BaseException) -> tuple[str, str]:
    """First lines of a Java exception and of its root cause ("" where there is none)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return "", ""
    try:
        head = _first_line(str(java.toString()))
        root = java
        for _ in range(20):
            cause = root.getCause()
            if cause is None:
                break
            root = cause
        tail = _first_line(str(root.toString())) if root is not java else ""
    except Exception:  # pragma: no cover - the JVM is gone
        return "", ""
    return head, (tail if tail not in head else "")


def one_line(exc: BaseException) -> str:
    """Spark's reason in one line; for a Java exception its message and its root cause (such as
    ``java.lang.OutOfMemoryError: Java heap space``) rather than py4j's "error occurred while
    calling o403.getResult"."""
    head, tail = _java_lines(exc)
    if head:
        return f"{head} (cause: {tail})" if tail else head
    return _first_line(str(exc)) or type(exc).__name__


_IMPORT_FAILURE = re.compile(r"(ModuleNotFoundError|ImportError): ([^\n\r]*)")

#: where the docs show how to give the executors an environment with dpfreq
EXECUTOR_DOCS = "docs/scaling.md, section 'Spark executors'"


def executor_import_error(exc: BaseException) -> str | None:
    """If ``exc`` is a Python worker on an executor failing to import a module (dpfreq, numpy,
    pyarrow: its environment lacks them), one line saying so, what the executors need and where
    the docs show how; else None. (Module names are code, not data: shown in full.)"""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):  # the JVM may be gone
            text += "\n" + str(java.toString())
    found = _IMPORT_FAILURE.search(text)
    if found is None:
        return None
    return (f"the Spark executors' Python cannot import what this step runs there "
            f"({found.group(1)}: {found.group(2).strip()[:120]}); this step runs dpfreq's own "
            "code on the executors, so their Python needs dpfreq installed (set "
            f"PYSPARK_PYTHON or spark.pyspark.python to such an environment; {EXECUTOR_DOCS})")


def reason(exc: BaseException) -> str:
    """:func:`one_line` without what may quote the data: by default a failure while reading
    values shows only Spark's error condition or the Java exception classes (a JVM ``Error``
    such as ``OutOfMemoryError`` in full); ``DPFREQ_DEBUG=1`` or an analysis error (names,
    schema) shows the whole line."""
    missing = executor_import_error(exc)
    if missing is not None:
        return missing
    if common.debug_enabled() or isinstance(exc, AnalysisException):
        return one_line(exc)
    hint = " (Spark's message may quote the data; DPFREQ_DEBUG=1 shows it)"
    head, tail = _java_lines(exc)
    if head:
        cls = head.split(":", 1)[0]
        if tail:
            jvm_error = tail.startswith("java.lang.") and tail.split(":", 1)[0].endswith("Error")
            cls += f" (cause: {tail if jvm_error else tail.split(':', 1)[0]})"
        return cls + hint
    condition = exc.getCondition() if isinstance(exc, PySparkException) else None
    return (f"[{condition}]" if condition else type(exc).__name__) + hint


#: what Spark raises: Python-side errors and Java errors through py4j
SPARK_ERRORS: tuple[type[BaseException], ...] = (PySparkException, Py4JJavaError)


#: a line of an analyzed plan reading a text file: ``Relation [a#1,b#2] csv``
_TEXT_RELATION = re.compile(r"\] (csv|text)$", re.MULTILINE)


def reads_text_file(df: Any) -> bool:
    """Whether the DataFrame reads a CSV or text file (a ``csv``/``text`` relation in its
    analyzed plan), whose column names are a line of the file; True when the plan cannot be
    had (a Spark Connect DataFrame: names are then not shown)."""
    try:
        plan = str(df._jdf.queryExecution().analyzed().toString())
    except (AttributeError, PySparkException, Py4JJavaError):
        return True
    return _TEXT_RELATION.search(plan) is not None
