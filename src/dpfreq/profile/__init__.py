"""dpfreq.profile (see its issue)."""

__all__: list[str] = []
