"""dpfreq.anonymized (see its issue)."""

__all__: list[str] = []
