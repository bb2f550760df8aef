"""History anchored outside the database: a seal (`billsleuth activity seal`, the chain's head as
ROW:HASH) taken before a rewrite catches it, although whoever rewrote it recomputed every hash and the
head so that plain `activity verify` says the chain is intact."""

from __future__ import annotations

import re

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.activity import GENESIS
from approvals.seals import Seal, SealError, current_seal, parse_seal, verify_anchor
from tests.test_activity_log import cli, insert_rows

# What the schema owner (or a superuser) can do: switch the triggers off, change anything, then recompute
# every row's hash and the head from the first row on, so the chain is consistent again.
RECOMPUTE_EVERYTHING = f"""
    DO $$
    DECLARE
        r activity_log%ROWTYPE;
        previous text := '{GENESIS}';
        current text;
    BEGIN
        FOR r IN SELECT * FROM activity_log ORDER BY id LOOP
            current := activity_log_row_hash(
                previous, r.id, r.at, r.actor_type, r.actor_id, r.action, r.entity_type, r.entity_id,
                r.details
            );
            UPDATE activity_log SET prev_hash = previous, hash = current WHERE id = r.id;
            previous := current;
        END LOOP;
        UPDATE activity_log_head SET last_id = (SELECT max(id) FROM activity_log), last_hash = previous;
    END $$;
"""


def rewrite_as_the_owner(url: str, change: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("ALTER TABLE activity_log DISABLE TRIGGER USER")
        conn.execute(change)  # type: ignore[arg-type]
        conn.execute(RECOMPUTE_EVERYTHING)  # type: ignore[arg-type]
        conn.execute("ALTER TABLE activity_log ENABLE TRIGGER USER")


def take_seal(url: str) -> str:
    sealed = cli(url, "seal")
    assert sealed.returncode == 0, sealed.stderr
    line = sealed.stdout.strip()
    assert re.fullmatch(r"\d+:[0-9a-f]{64}", line), line
    return line


def test_a_seal_taken_before_a_rewrite_with_recomputed_hashes_catches_it(db_url: str) -> None:
    insert_rows(db_url, 5)
    seal = take_seal(db_url)
    assert seal.startswith("5:")
    anchored = cli(db_url, "verify", "--anchor", seal)
    assert (anchored.returncode, anchored.stdout.strip()) == (
        0,
        "5 rows, chain intact through the seal at row 5",
    )

    insert_rows(db_url, 2)  # history goes on: the seal still anchors it
    assert cli(db_url, "verify", "--anchor", seal).returncode == 0

    rewrite_as_the_owner(db_url, 'UPDATE activity_log SET details = \'{"amount": "9999.00"}\' WHERE id = 2')
    plain = cli(db_url, "verify")
    assert (plain.returncode, plain.stdout.strip()) == (0, "7 rows, chain intact")  # fooled
    caught = cli(db_url, "verify", "--anchor", seal)
    assert caught.returncode == 1, caught.stdout
    line = caught.stdout.strip()
    assert "row 5's hash is " in line and "the seal says " + seal.split(":")[1] in line
    assert "rewritten" in line and "\n" not in line and "Traceback" not in caught.stderr


@pytest.mark.parametrize(
    ("change", "anchored", "words"),
    [
        ("DELETE FROM activity_log WHERE id = 1", False, "rewritten"),
        ("DELETE FROM activity_log WHERE id >= 3", False, "row 3, which the seal names, is not in the log"),
        ("DELETE FROM activity_log WHERE id = 4", True, "chain intact through the seal at row 3"),
        (
            "UPDATE activity_log SET actor_id = 'U0MALLORY' WHERE id = 5",
            True,
            "chain intact through the seal",
        ),
    ],
    ids=["remove-before-the-seal", "remove-the-sealed-row", "after-the-seal", "edit-after-the-seal"],
)
async def test_a_seal_vouches_for_the_rows_up_to_it(
    db_url: str, db: AsyncEngine, change: str, anchored: bool, words: str
) -> None:
    """Rows after a seal are a later seal's to vouch for; any rewrite up to the sealed row is caught."""
    insert_rows(db_url, 3)
    seal = await current_seal(db)
    insert_rows(db_url, 2)
    rewrite_as_the_owner(db_url, change)
    report = await verify_anchor(db, seal)
    assert report.chain.intact  # the rewriter recomputed everything
    assert report.intact is anchored and words in report.line(), report.line()


async def test_a_chain_broken_plainly_is_named_with_or_without_a_seal(db_url: str, db: AsyncEngine) -> None:
    insert_rows(db_url, 3)
    seal = await current_seal(db)
    with psycopg.connect(db_url) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("UPDATE activity_log SET actor_id = 'U0MALLORY' WHERE id = 2")
    report = await verify_anchor(db, seal)
    assert not report.intact and report.line().startswith("3 rows, chain broken at row 2")


async def test_an_empty_log_seals_as_genesis_and_anchors_what_follows(db_url: str, db: AsyncEngine) -> None:
    empty = take_seal(db_url)
    assert empty == f"0:{GENESIS}"
    insert_rows(db_url, 2)
    assert (await verify_anchor(db, parse_seal(empty))).intact
    assert (await current_seal(db)).row == 2


@pytest.mark.parametrize("bad", ["", "5", "5:abc", "x:" + "0" * 64, "5:" + "g" * 64, "5:" + "0" * 63])
def test_a_malformed_anchor_is_refused_in_one_line(db_url: str, bad: str) -> None:
    refused = cli(db_url, "verify", "--anchor", bad)
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr.count("\n") == 1 and "ROW:HASH" in refused.stderr and "--anchor" in refused.stderr
    with pytest.raises(SealError):
        parse_seal(bad)


def test_a_seal_reads_in_upper_case_too() -> None:
    with pytest.raises(SealError):
        parse_seal("-1:" + "0" * 64)
    assert parse_seal(" 12:" + "AB" * 32 + "\n") == Seal(12, "ab" * 32)


def test_seal_without_slack_only_prints(db_url: str) -> None:
    insert_rows(db_url, 1)
    sealed = cli(db_url, "seal")
    assert sealed.returncode == 0 and sealed.stderr == ""
    with psycopg.connect(db_url) as conn:
        actions = [r[0] for r in conn.execute("SELECT action FROM activity_log ORDER BY id")]
    assert actions == ["test.row"]  # nothing posted, nothing recorded
