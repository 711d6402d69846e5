"""Package-level smoke tests: public API surface and version."""

from __future__ import annotations

import dpfreq


def test_all_names_exist_and_sorted() -> None:
    for name in dpfreq.__all__:
        assert hasattr(dpfreq, name), name
    assert list(dpfreq.__all__) == sorted(dpfreq.__all__)


def test_star_import() -> None:
    namespace: dict[str, object] = {}
    exec("from dpfreq import *", namespace)
    assert "Accountant" in namespace


SUBPACKAGES = ["dpfreq.profile", "dpfreq.anonymized", "dpfreq.windows", "dpfreq.longitudinal",
               "dpfreq.engines", "dpfreq.budget", "dpfreq.ledger", "dpfreq.release",
               "dpfreq.errors", "dpfreq.noise", "dpfreq.rng", "dpfreq.artifacts"]


def test_every_subpackage_all_exists_and_star_imports() -> None:
    import importlib

    for name in SUBPACKAGES:
        module = importlib.import_module(name)
        assert module.__all__, name
        for public in module.__all__:
            assert hasattr(module, public), f"{name}.{public}"
        namespace: dict[str, object] = {}
        exec(f"from {name} import *", namespace)
        assert set(module.__all__) <= set(namespace), name


def test_import_dpfreq_imports_no_system_and_no_optional_dependency() -> None:
    import subprocess
    import sys

    code = ("import sys, dpfreq; "
            "print(sorted(m for m in sys.modules if m.startswith(('dpfreq.', 'pyspark', "
            "'fastapi', 'sqlalchemy', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out
