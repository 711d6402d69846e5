"""dpfreq.windows (see its issue)."""

__all__: list[str] = []
