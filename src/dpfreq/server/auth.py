"""Bearer tokens with roles, stored only as SHA-256 hashes.

A token is 32 bytes from :func:`secrets.token_urlsafe` (256 random bits). The database keeps
``SHA-256(token)`` and the role (``admin`` for everything, ``manager`` for one study: issues and
revokes that study's analyst tokens, ``analyst`` for one study: reads it, ``device`` for one
enrolled device of one study), an optional expiry and a revocation time; the token itself is
shown once, to whoever asked for it. A token's public id is the first 16 hex digits of its hash:
it names the token in the audit log and in revocation requests without revealing it.

Why SHA-256 and not bcrypt/scrypt/Argon2: slow, salted hashes protect *low-entropy* secrets
(human passwords) from offline guessing after a database leak. A 256-bit random token cannot be
guessed whatever the hash speed (2^256 trials), so a slow hash adds no protection; it would cost
tens of milliseconds of CPU on every request, and its per-token salt would forbid looking a token
up by its hash (every request would have to try every stored hash). An unsalted fast hash keeps
the lookup one indexed primary-key read and still reveals nothing usable if the table leaks.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

__all__ = ["Principal", "hash_token", "new_token", "parse_bearer", "token_id"]


def new_token() -> str:
    """A fresh bearer token: 256 random bits, URL-safe base64."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """Hex SHA-256 of a token: what the database stores and looks up."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_id(token_hash: str) -> str:
    """The public id of a token: the first 16 hex digits of its hash."""
    return token_hash[:16]


def parse_bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512:
        return None
    return token


@dataclass(frozen=True)
class Principal:
    """Who a valid token belongs to (``hash``: the token's full hash, the key of its row)."""

    role: str
    study: str | None = None
    device: int | None = None
    id: str = ""
    expires: float | None = None
    hash: str = ""
