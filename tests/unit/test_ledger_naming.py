"""The ledger is a SQLite file: every example names it ``.db``, never ``.json``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_examples_name_the_ledger_file_db():
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             ROOT / "src" / "dpfreq" / "ledger.py", *sorted((ROOT / "src" / "dpfreq" / "cli")
                                                           .glob("*.py"))]
    pattern = re.compile(r"(--ledger|ledger (init|show|verify))\s+(\S+)")
    named = [(p.name, m.group(3)) for p in texts
             for m in pattern.finditer(p.read_text(encoding="utf-8"))]
    assert named, "no ledger example found"
    wrong = [(f, n) for f, n in named if n.endswith((".json", ".sqlite"))]
    assert wrong == []
