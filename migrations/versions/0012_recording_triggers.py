"""The database records what changes money and rules (issue 25 item 3): triggers that append an activity_log
row for every credit note status change, every vote and every policy change, whoever makes it.

BillSleuth writes its own rows (`credit_note.issued`, `approval.recorded`, `policy.changed`, …) with the
Slack user or OS account who acted. These triggers add the database's own account of the same change,
written whoever made it — billsleuth, a second process, psql — with actor_type `database`, the login that
made the change as actor_id, and distinct actions, so the two never look alike:

- `db.credit_note.status`: a note inserted, deleted, or its status changed (`from`, `to`, amount, invoice).
- `db.vote`: a row of `approvals` inserted, changed or deleted.
- `db.policy`: a stored policy setting inserted, changed or deleted; and a month's model budget limit set
  or changed (`model_budget_months.limit_usd`, what `budget raise` writes).
- `db.truncate`: TRUNCATE of one of those tables while it held rows (row triggers do not see TRUNCATE).

Row triggers are deferred constraint triggers: they run at commit, after the transaction's own locks, so
the chain's head (locked by the first append until commit, approvals/activity.py) is taken last, as our
own code does. Each change still gets its own row, with the row as that change left it.

The functions run as the schema owner (SECURITY DEFINER, search_path pinned to the schema they were
created in): the runtime role owns no table, so it can neither drop nor disable these triggers, and it
needs no right of its own on activity_log for them to write. A row claiming actor_type `database` is
refused unless a trigger writes it (pg_trigger_depth), so the runtime cannot forge the database's word.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# (trigger, function, table, events, when) of every deferred row trigger. An UPDATE that changes nothing
# recorded is filtered by WHEN, which a constraint trigger evaluates at once: no event is queued for it.
ROW_TRIGGERS = (
    ("activity_credit_note_written", "activity_credit_note_status", "credit_notes", "INSERT OR DELETE", ""),
    (
        "activity_credit_note_status",
        "activity_credit_note_status",
        "credit_notes",
        "UPDATE",
        "OLD.status IS DISTINCT FROM NEW.status",
    ),
    ("activity_vote_written", "activity_vote", "approvals", "INSERT OR DELETE", ""),
    ("activity_vote_changed", "activity_vote", "approvals", "UPDATE", "OLD IS DISTINCT FROM NEW"),
    ("activity_policy_written", "activity_policy", "policy", "INSERT OR DELETE", ""),
    (
        "activity_policy_changed",
        "activity_policy",
        "policy",
        "UPDATE",
        "(OLD.name, OLD.value) IS DISTINCT FROM (NEW.name, NEW.value)",
    ),
    # A month's row is also written when spend pauses it: only its limit is policy.
    ("activity_model_budget_set", "activity_model_budget", "model_budget_months", "INSERT",
     "NEW.limit_usd IS NOT NULL"),
    ("activity_model_budget_changed", "activity_model_budget", "model_budget_months", "UPDATE",
     "OLD.limit_usd IS DISTINCT FROM NEW.limit_usd"),
)  # fmt: skip
FUNCTIONS = ("activity_credit_note_status", "activity_vote", "activity_policy", "activity_model_budget")
TRUNCATE_WATCHED = ("credit_notes", "approvals", "policy", "model_budget_months")

# Who and what made the change, as the database knows it: the login (session_user: SECURITY DEFINER
# changes current_user to the owner) and the client's application_name (psql says "psql").
_APPEND = """
    INSERT INTO activity_log (actor_type, actor_id, action, entity_type, entity_id, details)
    VALUES ('database', session_user, {action}, {entity_type}, {entity_id},
            {details} || jsonb_strip_nulls(jsonb_build_object(
                'op', lower(TG_OP), 'application', nullif(current_setting('application_name', true), ''))));
"""


def _function(name: str, body: str, search_path: str, declare: str = "") -> str:
    return f"""
        CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = {search_path}, pg_temp AS $$
        {declare}
        BEGIN
            {body}
            RETURN NULL;
        END $$;
    """


def _credit_note_status(search_path: str) -> str:
    body = """
        IF TG_OP = 'DELETE' THEN note := OLD; ELSE note := NEW; END IF;
    """ + _APPEND.format(
        action="'db.credit_note.status'",
        entity_type="'credit_note'",
        entity_id="note.id",
        details="""jsonb_build_object(
            'from', CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.status END,
            'to', CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE NEW.status END,
            'amount', note.amount::text, 'currency', note.currency,
            'invoice_id', note.invoice_id, 'case_id', note.case_id)""",
    )
    return _function("activity_credit_note_status", body, search_path, "DECLARE note credit_notes%ROWTYPE;")


def _vote(search_path: str) -> str:
    vote = "jsonb_build_object('approver', {r}.approver, 'decision', {r}.decision, 'comment', {r}.comment, " \
        "'source', {r}.source, 'args_hash', {r}.args_hash)"  # fmt: skip
    body = """
        IF TG_OP = 'DELETE' THEN ballot := OLD; ELSE ballot := NEW; END IF;
    """ + _APPEND.format(
        action="'db.vote'",
        entity_type="'credit_note'",
        entity_id="ballot.credit_note_id",
        details=f"""jsonb_build_object(
            'old', CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE {vote.format(r="OLD")} END,
            'new', CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE {vote.format(r="NEW")} END)""",
    )
    return _function("activity_vote", body, search_path, "DECLARE ballot approvals%ROWTYPE;")


def _policy(search_path: str) -> str:
    body = """
        IF TG_OP = 'DELETE' THEN setting := OLD; ELSE setting := NEW; END IF;
    """ + _APPEND.format(
        action="'db.policy'",
        entity_type="'policy'",
        entity_id="'policy'",
        details="""jsonb_build_object(
            'variable', setting.name,
            'old', CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.value END,
            'new', CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE NEW.value END)""",
    )
    return _function("activity_policy", body, search_path, "DECLARE setting policy%ROWTYPE;")


def _model_budget(search_path: str) -> str:
    body = _APPEND.format(
        action="'db.policy'",
        entity_type="'policy'",
        entity_id="'policy'",
        details="""jsonb_build_object(
            'variable', 'BILLSLEUTH_MODEL_BUDGET', 'month', NEW.month,
            'old', CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.limit_usd::text END,
            'new', NEW.limit_usd::text)""",
    )
    return _function("activity_model_budget", body, search_path)


def _truncated(search_path: str) -> str:
    # BEFORE TRUNCATE: the rows are still there to count; an empty table's TRUNCATE changes nothing.
    body = """
        EXECUTE format('SELECT count(*) FROM %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME) INTO n;
        IF n = 0 THEN RETURN NULL; END IF;
    """ + _APPEND.format(
        action="'db.truncate'",
        entity_type="'table'",
        entity_id="TG_TABLE_NAME",
        details="jsonb_build_object('rows', n)",
    )
    return _function("activity_truncated", body, search_path, "DECLARE n bigint;")


# Only a trigger may speak as the database: a direct INSERT runs at trigger depth 1 (this trigger's own).
_ONLY_TRIGGERS_SPEAK_AS_THE_DATABASE = """
    CREATE FUNCTION activity_log_database_rows() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.actor_type = 'database' AND pg_trigger_depth() < 2 THEN
            RAISE EXCEPTION 'activity_log rows with actor_type database are written by the database''s '
                'own triggers only';
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER activity_log_database_rows BEFORE INSERT ON activity_log
        FOR EACH ROW EXECUTE FUNCTION activity_log_database_rows();
"""


def _search_path() -> str:
    """The schema these tables live in, quoted: the functions resolve names there and nowhere a caller
    could put a table of the same name first."""
    bind = op.get_bind()
    schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
    return bind.dialect.identifier_preparer.quote(schema)


def upgrade() -> None:
    search_path = _search_path()
    for build in (_credit_note_status, _vote, _policy, _model_budget, _truncated):
        op.execute(build(search_path))
    for trigger, function, table, events, when in ROW_TRIGGERS:
        op.execute(
            f"CREATE CONSTRAINT TRIGGER {trigger} AFTER {events} ON {table} DEFERRABLE INITIALLY DEFERRED "
            f"FOR EACH ROW {f'WHEN ({when}) ' if when else ''}EXECUTE FUNCTION {function}()"
        )
    for table in TRUNCATE_WATCHED:
        op.execute(
            f"CREATE TRIGGER activity_truncated BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION activity_truncated()"
        )
    op.execute(_ONLY_TRIGGERS_SPEAK_AS_THE_DATABASE)


def downgrade() -> None:
    op.execute("DROP TRIGGER activity_log_database_rows ON activity_log")
    op.execute("DROP FUNCTION activity_log_database_rows()")
    for table in TRUNCATE_WATCHED:
        op.execute(f"DROP TRIGGER activity_truncated ON {table}")
    for trigger, _, table, _, _ in ROW_TRIGGERS:
        op.execute(f"DROP TRIGGER {trigger} ON {table}")
    for function in (*FUNCTIONS, "activity_truncated"):
        op.execute(f"DROP FUNCTION {function}()")
