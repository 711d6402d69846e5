"""Public parameter files of a cross-party measurement: sealed JSON, read back with every field
checked.

Both the local-noise sketches' parameters (:class:`~dpfreq.crossparty.params.CrossPartyParams`)
and the shuffle's (:class:`~dpfreq.crossparty.shuffle.params.ShuffleParams`) are public files
that the parties exchange before a measurement. They are written and read the same way, which
:class:`PublicParamsFile` holds once: the fields as JSON (fractions as ``"s/t"`` text), sealed
with a plain SHA-256 digest (public: never signed), and read back through the dataclass's own
checks, so that a file refused is one :class:`~dpfreq.errors.DataError` naming the file.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, Self

from dpfreq.artifacts import open_json, read_text_file, seal_json
from dpfreq.errors import DataError, DPFreqError

__all__ = ["PublicParamsFile"]


class PublicParamsFile:
    """Mixin of a frozen dataclass of public parameters: ``to_dict``/``to_json``/``save`` and
    ``from_dict``/``from_json``/``load``.

    A subclass sets :attr:`KIND` and :attr:`VERSION` (the sealed file's kind and version),
    :attr:`FIELDS` (the exact field names a file holds), :attr:`WHAT` (its name in errors) and
    :attr:`FRACTIONS` (the fields written as exact ``"s/t"`` text).
    """

    KIND: ClassVar[str]
    VERSION: ClassVar[int]
    FIELDS: ClassVar[tuple[str, ...]]
    WHAT: ClassVar[str]
    FRACTIONS: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (fractions as ``"s/t"`` text)."""
        out = {f.name: getattr(self, f.name)
               for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name in self.FRACTIONS:
            value = Fraction(out[name])
            out[name] = f"{value.numerator}/{value.denominator}"
        return out

    def to_json(self) -> str:
        """The parameters as sealed JSON text (plain SHA-256 digest: public, never signed)."""
        return seal_json(self.to_dict(), kind=self.KIND, version=self.VERSION, sign=False)

    @classmethod
    def from_dict(cls, fields: dict[str, Any], *, label: str = "the parameters") -> Self:
        """Parameters from :meth:`to_dict`'s fields; anything else is one DataError."""
        if not isinstance(fields, dict) or set(fields) != set(cls.FIELDS):
            given = set(fields) if isinstance(fields, dict) else set()
            missing = [name for name in cls.FIELDS if name not in given]
            unknown = sorted(str(name) for name in given - set(cls.FIELDS))
            which = "; ".join(part for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(unknown)}" if unknown else "") if part)
            raise DataError(f"{label} are not valid {cls.WHAT}: their fields are not "
                            f"{', '.join(cls.FIELDS)} ({which}: write the file again with this "
                            "dpfreq).")
        try:
            return cls.from_fields(fields)
        except DPFreqError as exc:
            raise DataError(f"{label} are not valid {cls.WHAT}: "
                            f"{str(exc).rstrip('.')}.") from None

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> Self:
        """The parameters of :attr:`FIELDS`' values as read from JSON (a subclass turns the
        JSON form of a field back into its type here)."""
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str | bytes, *, label: str = "the text") -> Self:
        """Parameters from :meth:`to_json` text (digest and every field checked).

        A file of an earlier format version is read far enough to name the fields it lacks.
        """
        _, payload = open_json(text, kind=cls.KIND, versions=tuple(range(1, cls.VERSION + 1)),
                               label=label, sign=False)
        return cls.from_dict(payload, label=label)

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_json` to ``path`` (a public file)."""
        out = Path(path)
        out.write_text(self.to_json() + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a parameters file written by :meth:`save`."""
        return cls.from_json(read_text_file(path, "a parameters file"), label=str(path))
