"""Every public name has a numpydoc docstring with an example, and the examples run.

Public names are those in the ``__all__`` of ``dpfreq`` and of its subpackages. The examples are
executed by ``test_docstring_examples_run`` (doctest, in a temporary directory), so the reference
cannot drift from the code.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
from collections.abc import Iterator

import numpy as np
import pytest

PACKAGES = ["dpfreq", "dpfreq.profile", "dpfreq.anonymized", "dpfreq.windows",
            "dpfreq.longitudinal", "dpfreq.stream", "dpfreq.crossparty",
            "dpfreq.crossparty.shuffle", "dpfreq.engines", "dpfreq.budget", "dpfreq.release",
            "dpfreq.rng", "dpfreq.noise", "dpfreq.artifacts", "dpfreq.ledger", "dpfreq.accounting",
            "dpfreq.resign"]


def public_objects() -> Iterator[tuple[str, object]]:
    seen: set[int] = set()
    for pkg in PACKAGES:
        try:
            module = importlib.import_module(pkg)
        except ImportError:
            continue
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{pkg}.{name}", obj


OBJECTS = sorted(public_objects(), key=lambda kv: kv[0])


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=[n for n, _ in OBJECTS])
def test_public_name_has_docstring_with_example(name: str, obj: object) -> None:
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{name} has no docstring"
    assert ">>>" in doc, f"{name}: the docstring has no example (an Examples section with >>>)"


@pytest.mark.parametrize(("name", "obj"), OBJECTS, ids=[n for n, _ in OBJECTS])
def test_docstring_examples_run(name: str, obj: object, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    finder = doctest.DocTestFinder(recurse=False)
    module = inspect.getmodule(obj)
    globs = {**vars(module), "np": np} if module is not None else {"np": np}
    tests = finder.find(obj, name, globs=globs)
    if not any(t.examples for t in tests):
        pytest.skip("no examples (reported by the other test)")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{name}: {runner.failures} docstring example(s) failed"
