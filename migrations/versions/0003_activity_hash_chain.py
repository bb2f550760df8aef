"""activity_log becomes a SHA-256 hash chain, and TRUNCATE joins UPDATE and DELETE as refused.

Each row carries `prev_hash` (the previous row's `hash`, or 64 zeros for the first row) and
`hash = sha256(prev_hash || canonical JSON of the row)`, hex. The database computes both in a BEFORE
INSERT trigger, so every writer gets them: our code, another process, psql.

Appends serialise on the single row of `activity_log_head` (SELECT … FOR UPDATE, held to commit), which
records the chain's last id and hash. A row lock rather than an advisory lock because it also holds under
REPEATABLE READ: a second appender there gets a serialization failure instead of silently chaining onto a
stale snapshot's last row. The id is drawn inside that lock (from a plain sequence: the identity default
is dropped, it would be drawn before the lock), so id order is chain order. The head also lets
`activity verify` notice rows removed from the end of the chain, which the links alone cannot show.

The canonical JSON does not depend on the session: `at` is rendered in UTC with microseconds, and jsonb's
text output is canonical (keys in a fixed order, one spelling per value).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

GENESIS = "0" * 64


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION activity_log_row_hash(
            prev_hash text, id bigint, at timestamptz, actor_type text, actor_id text, action text,
            entity_type text, entity_id text, details jsonb
        ) RETURNS text LANGUAGE sql STABLE AS $$
            SELECT encode(sha256(convert_to(prev_hash || jsonb_build_object(
                'id', id,
                'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                'actor_type', actor_type,
                'actor_id', actor_id,
                'action', action,
                'entity_type', entity_type,
                'entity_id', entity_id,
                'details', details
            )::text, 'UTF8')), 'hex')
        $$;
        """
    )
    op.add_column("activity_log", sa.Column("prev_hash", sa.Text))
    op.add_column("activity_log", sa.Column("hash", sa.Text))
    op.create_table(
        "activity_log_head",
        sa.Column("one", sa.Boolean, primary_key=True, server_default=sa.true()),
        sa.Column("last_id", sa.BigInteger),
        sa.Column("last_hash", sa.Text, nullable=False),
        sa.CheckConstraint("one", name="activity_log_head_one_row"),
    )
    _backfill()
    # The daily credit limit looks up today's `ledger.reseeded` rows (notes a forced reseed erased).
    op.create_index("ix_activity_log_action_at", "activity_log", ["action", "at"])
    # The trigger draws every id itself, inside the lock; an identity default drawn before it would only
    # burn a number per row. A plain sequence, owned by the column, continues where the ids are.
    op.execute("ALTER TABLE activity_log ALTER COLUMN id DROP IDENTITY")
    op.execute("CREATE SEQUENCE activity_log_id_seq OWNED BY activity_log.id")
    op.execute(
        "SELECT setval('activity_log_id_seq', coalesce((SELECT max(id) FROM activity_log), 0) + 1, false)"
    )
    op.alter_column("activity_log", "prev_hash", nullable=False)
    op.alter_column("activity_log", "hash", nullable=False)
    op.execute(
        """
        CREATE FUNCTION activity_log_chain() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            head activity_log_head%ROWTYPE;
        BEGIN
            SELECT * INTO head FROM activity_log_head FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'activity_log_head is missing: the activity log chain cannot be extended';
            END IF;
            NEW.id := nextval('activity_log_id_seq');
            NEW.prev_hash := head.last_hash;
            NEW.hash := activity_log_row_hash(
                NEW.prev_hash, NEW.id, NEW.at, NEW.actor_type, NEW.actor_id, NEW.action,
                NEW.entity_type, NEW.entity_id, NEW.details
            );
            UPDATE activity_log_head SET last_id = NEW.id, last_hash = NEW.hash;
            RETURN NEW;
        END $$;
        CREATE TRIGGER activity_log_chain BEFORE INSERT ON activity_log
            FOR EACH ROW EXECUTE FUNCTION activity_log_chain();
        CREATE TRIGGER activity_log_no_truncate BEFORE TRUNCATE ON activity_log
            FOR EACH STATEMENT EXECUTE FUNCTION activity_log_is_append_only();
        """
    )


def _backfill() -> None:
    """Chain the rows already there, in id order (with the append-only trigger off for the moment)."""
    op.execute("ALTER TABLE activity_log DISABLE TRIGGER activity_log_append_only")
    op.execute(
        f"""
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
            INSERT INTO activity_log_head (one, last_id, last_hash)
                VALUES (true, (SELECT max(id) FROM activity_log), previous);
        END $$;
        """
    )
    op.execute("ALTER TABLE activity_log ENABLE TRIGGER activity_log_append_only")


def downgrade() -> None:
    op.execute("DROP TRIGGER activity_log_no_truncate ON activity_log")
    op.execute("DROP TRIGGER activity_log_chain ON activity_log")
    op.execute("DROP FUNCTION activity_log_chain()")
    op.drop_table("activity_log_head")
    op.drop_index("ix_activity_log_action_at", "activity_log")
    op.execute("DROP SEQUENCE activity_log_id_seq")
    op.execute("ALTER TABLE activity_log ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY")
    op.execute(
        "SELECT setval(pg_get_serial_sequence('activity_log', 'id'), "
        "coalesce((SELECT max(id) FROM activity_log), 0) + 1, false)"
    )
    op.drop_column("activity_log", "hash")
    op.drop_column("activity_log", "prev_hash")
    op.execute(
        "DROP FUNCTION activity_log_row_hash(text, bigint, timestamptz, text, text, text, text, text, jsonb)"
    )
