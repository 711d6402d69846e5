"""Reach and frequency across publishers: a deduplicated union from each party's private sketch.

Every party maps its users into the registers of a shared virtual-ID space with a keyed hash
(:mod:`dpfreq.crossparty.vid`; the parties share the key, whoever merges does not), computes
capped per-register frequencies on its own engine (:mod:`dpfreq.crossparty.registers`), and
publishes an ε-DP sketch of them with local noise (:func:`build_sketch`), which records the
period and campaigns it covers (:class:`Coverage`). Anyone can merge the
sketches of any subset of parties (:func:`merge_sketches`) into the deduplicated reach, the k+
reach and the frequency distribution of the union and of each party, consistent with each
other and with intervals. Guide: ``docs/guide/crossparty.md``; theory:
``docs/theory/crossparty.md``.
"""

from dpfreq.crossparty.coverage import Coverage
from dpfreq.crossparty.merge import merge_sketches
from dpfreq.crossparty.params import CrossPartyParams
from dpfreq.crossparty.result import CrossPartyRelease
from dpfreq.crossparty.sketch import PartySketch, build_sketch
from dpfreq.crossparty.vid import key_fingerprint, new_hash_key, read_hash_key, write_hash_key

__all__ = [
    "Coverage",
    "CrossPartyParams",
    "CrossPartyRelease",
    "PartySketch",
    "build_sketch",
    "key_fingerprint",
    "merge_sketches",
    "new_hash_key",
    "read_hash_key",
    "write_hash_key",
]
