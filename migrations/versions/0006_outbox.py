"""An outbox: every change Slack must show, written in the transaction that made it.

A credit note inserted or changing status, a vote counted, a case changing status: each adds a row to
`outbox` (what changed, and the case it belongs to) and wakes listeners with `NOTIFY billsleuth_outbox`.
The bot drains the table (woken by the notification, polling as the fallback), redraws the case's card,
posts any customer reply owed and refreshes App Home, then deletes the rows it delivered.

Triggers rather than calls in the Python that changes notes, so that no writer can forget one: the bot,
the CLI, the sweep, a second process, psql. The row commits or rolls back with the change itself, and
NOTIFY is delivered only on commit, so the bot never draws a change that did not happen.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("at", sa.TIMESTAMP(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("entity_type", sa.Text, nullable=False),  # credit_note | case
        sa.Column("entity_id", sa.Text, nullable=False),
        sa.Column("case_id", sa.Text),  # NULL: a note with no case (drafted outside one)
        sa.Column("change", sa.Text, nullable=False),  # e.g. credit_note.approved, vote.approve, case.issued
    )
    op.execute(
        """
        CREATE FUNCTION outbox_add(of_type text, of_id text, of_case text, what text)
        RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO outbox (entity_type, entity_id, case_id, change)
                VALUES (of_type, of_id, of_case, what);
            PERFORM pg_notify('billsleuth_outbox', coalesce(of_case, of_id));
        END $$;

        CREATE FUNCTION outbox_credit_note_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM outbox_add('credit_note', NEW.id, NEW.case_id, 'credit_note.' || NEW.status);
            RETURN NULL;
        END $$;

        CREATE FUNCTION outbox_vote_counted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM outbox_add('credit_note', NEW.credit_note_id,
                (SELECT case_id FROM credit_notes WHERE id = NEW.credit_note_id), 'vote.' || NEW.decision);
            RETURN NULL;
        END $$;

        CREATE FUNCTION outbox_case_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM outbox_add('case', NEW.id, NEW.id, 'case.' || NEW.status);
            RETURN NULL;
        END $$;

        CREATE TRIGGER credit_note_inserted AFTER INSERT ON credit_notes
            FOR EACH ROW EXECUTE FUNCTION outbox_credit_note_changed();
        CREATE TRIGGER credit_note_status_changed AFTER UPDATE OF status ON credit_notes
            FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
            EXECUTE FUNCTION outbox_credit_note_changed();
        CREATE TRIGGER vote_counted AFTER INSERT ON approvals
            FOR EACH ROW EXECUTE FUNCTION outbox_vote_counted();
        CREATE TRIGGER case_status_changed AFTER UPDATE OF status ON cases
            FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
            EXECUTE FUNCTION outbox_case_changed();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER case_status_changed ON cases;
        DROP TRIGGER vote_counted ON approvals;
        DROP TRIGGER credit_note_status_changed ON credit_notes;
        DROP TRIGGER credit_note_inserted ON credit_notes;
        DROP FUNCTION outbox_case_changed();
        DROP FUNCTION outbox_vote_counted();
        DROP FUNCTION outbox_credit_note_changed();
        DROP FUNCTION outbox_add(text, text, text, text);
        """
    )
    op.drop_table("outbox")
