"""`dpfreq resign`: re-sign saved artefacts under a new artefact key (a key rotation).

Each PATH — a saved file (a release saved with ``--save``, a sketch, ...), a ledger, or a reach
stream's state directory — is verified under the old key ``DPFREQ_ARTIFACT_KEY_OLD`` and signed
again under ``DPFREQ_ARTIFACT_KEY`` (:mod:`dpfreq.resign`). Prints ``resigned PATH (KIND)`` for
each artefact re-signed, and ``refused: <why>`` on stderr for each refused (a file that does
not verify under the old key, named; nothing of that artefact changed). The artefacts are
independent: a refused one does not stop the others, which are still re-signed; the command
then fails (exit status 2) with one line counting both. Run it again on the refused ones once
their cause is fixed: an artefact already re-signed is refused under the old key, never signed
twice.
"""

from __future__ import annotations

import click

from dpfreq.cli._common import output_path_option
from dpfreq.cli.output import write_json
from dpfreq.errors import DataError, DPFreqError

__all__ = ["command"]


@click.command(name="resign")
@click.argument("paths", nargs=-1, required=True, type=click.Path(), metavar="PATH...")
@click.option("--from-unsigned", is_flag=True, default=False,
              help="The artefacts are unsigned (plain SHA-256, DPFREQ_ARTIFACT_KEY_OLD unset): "
                   "sign them. Anyone could have edited an unsigned file: check them first.")
@click.option("--to-unsigned", is_flag=True, default=False,
              help="Stop signing: write plain SHA-256 digests (DPFREQ_ARTIFACT_KEY unset).")
@output_path_option("--json", "json_out", suffixes=(".json",), allow_stdout=True,
                    help="Write the artefacts re-signed and refused as JSON to FILE ('-' = "
                         "stdout).")
def command(paths: tuple[str, ...], from_unsigned: bool, to_unsigned: bool,
            json_out: str | None) -> None:
    """Re-sign saved files, ledgers and stream states under a new artefact key.

    Verifies each PATH under the old key in DPFREQ_ARTIFACT_KEY_OLD and re-signs it under the
    new key in DPFREQ_ARTIFACT_KEY (both hexadecimal, at least 32 bytes; never printed). A
    refused PATH changes nothing and does not stop the others; the command then exits 2.
    """
    from dpfreq.cli.spelling import spelled
    from dpfreq.resign import resign_with_keys, rotation_keys

    # the keys read and checked once, before any PATH
    old, new = rotation_keys(from_unsigned=from_unsigned, to_unsigned=to_unsigned)
    done: list[dict[str, str]] = []
    refused: list[dict[str, str]] = []
    for path in paths:
        try:
            kind = resign_with_keys(path, old, new)
        except DPFreqError as exc:
            why = " ".join(spelled(str(exc)).split())
            refused.append({"path": path, "error": why})
            click.echo(f"refused: {why}", err=True)
            continue
        done.append({"path": path, "kind": kind})
        click.echo(f"resigned {path} ({kind})")
    if json_out is not None:
        write_json({"resigned": done, "refused": refused}, json_out)
    if refused:
        raise DataError(f"{len(refused)} of {len(paths)} artefacts refused (each named above, "
                        f"unchanged); the other {len(done)} re-signed.")
