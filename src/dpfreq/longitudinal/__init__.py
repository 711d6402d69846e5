"""dpfreq.longitudinal (see its issue)."""

__all__: list[str] = []
