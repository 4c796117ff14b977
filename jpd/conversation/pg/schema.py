"""The tables, created and migrated on start: idempotent, versioned, one migrator at a
time (an advisory lock), and a daemon refuses a schema newer than it knows."""

from __future__ import annotations

import psycopg

SCHEMA_VERSION = 8
_LOCK_KEY = 0x6A7064  # "jpd": the advisory lock taken while migrating

# Migration N brings the schema from version N-1 to N; never edit one once released.
MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE jpd_conversations (
        id text PRIMARY KEY,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        title text,
        workspace text,
        event_count bigint NOT NULL DEFAULT 0,
        next_seq bigint NOT NULL DEFAULT 1,
        -- the last turn, kept per append so that the recovery scan reads no log
        turn_open boolean NOT NULL DEFAULT false,
        last_start text,
        resumable_start text,
        -- the turn lease: one writer per conversation, fenced by its epoch
        lease_holder text,
        lease_epoch bigint NOT NULL DEFAULT 0,
        lease_expires timestamptz
    );
    CREATE TABLE jpd_events (
        conversation_id text NOT NULL REFERENCES jpd_conversations (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        event_id uuid NOT NULL,
        type text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (conversation_id, seq),
        UNIQUE (conversation_id, event_id)
    );
    CREATE INDEX jpd_conversations_open ON jpd_conversations (id) WHERE turn_open;
    """,
    2: """
    CREATE TABLE jpd_questions (
        conversation_id text NOT NULL REFERENCES jpd_conversations (id) ON DELETE CASCADE,
        turn_id text NOT NULL,
        inquiry_id text NOT NULL,
        holder text NOT NULL,
        info text NOT NULL,
        answer text,
        remember boolean NOT NULL DEFAULT false,
        answered_by text,
        PRIMARY KEY (conversation_id, turn_id, inquiry_id)
    );
    CREATE INDEX jpd_questions_holder ON jpd_questions (holder);
    """,
    3: """
    CREATE TABLE jpd_stream (
        conversation_id text NOT NULL REFERENCES jpd_conversations (id) ON DELETE CASCADE,
        n bigserial NOT NULL,
        member text NOT NULL,
        turn_id text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (conversation_id, n)
    );
    """,
    4: """
    CREATE TABLE jpd_blobs (
        conversation_id text NOT NULL REFERENCES jpd_conversations (id) ON DELETE CASCADE,
        path text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (conversation_id, path)
    );
    """,
    5: """
    CREATE TABLE jpd_attributes (
        conversation_id text PRIMARY KEY REFERENCES jpd_conversations (id) ON DELETE CASCADE,
        body text NOT NULL
    );
    """,
    6: """
    -- the conversation's turn/event seqs, shared by the members: no member has sent a
    -- seq at or above this (a block is reserved with each lease claim and renewal)
    ALTER TABLE jpd_conversations ADD COLUMN stream_seq bigint NOT NULL DEFAULT 1;
    """,
    7: """
    -- turns waiting for a member with room (jpd/conversation/pg/queue.py); while one
    -- waits, its conversation's lease is held by the queue (holder '(queued)', no expiry)
    CREATE TABLE jpd_turn_queue (
        conversation_id text PRIMARY KEY REFERENCES jpd_conversations (id) ON DELETE CASCADE,
        turn_id text NOT NULL UNIQUE,
        host text,
        model text NOT NULL,
        workspace text,
        request text NOT NULL,
        queued_by text NOT NULL,
        queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        -- the member that claimed it (its lease holder); the row goes when that lease
        -- is released, so a claimer that dies before the turn starts leaves it claimable
        claimed_by text
    );
    CREATE INDEX jpd_turn_queue_order ON jpd_turn_queue (queued_at);
    -- turn/cancel of a turn queued or running on another member
    CREATE TABLE jpd_turn_cancels (
        turn_id text PRIMARY KEY,
        asked_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    8: """
    -- the clients able to answer that each member has subscribed to a conversation
    -- (jpd/conversation/pg/prompts.py), refreshed by the member while it lives
    CREATE TABLE jpd_watchers (
        conversation_id text NOT NULL,
        member text NOT NULL,
        link_id bigint NOT NULL,
        capabilities text NOT NULL,
        seen timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (conversation_id, member, link_id)
    );
    CREATE INDEX jpd_watchers_member ON jpd_watchers (member);
    -- a question's request (inquiry/prompt, tool/permission) or inquiry/resolved, sent
    -- by the member whose turn asks (asker) to a client of another member
    CREATE TABLE jpd_relayed (
        id bigserial PRIMARY KEY,
        asker text NOT NULL,
        member text NOT NULL,
        link_id bigint NOT NULL,
        method text NOT NULL,
        params text NOT NULL,
        reply text,
        made timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX jpd_relayed_member ON jpd_relayed (member) WHERE reply IS NULL;
    """,
}


class SchemaTooNew(RuntimeError):
    """The store was migrated by a newer jpd than this one."""


async def migrate(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> int:
    """Bring the schema to `SCHEMA_VERSION`; returns the version found before."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await conn.execute("CREATE TABLE IF NOT EXISTS jpd_schema (version integer NOT NULL)")
        row = await (await conn.execute("SELECT max(version) FROM jpd_schema")).fetchone()
        found = int(row[0]) if row is not None and row[0] is not None else 0  # type: ignore[call-overload]
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the store's schema is version {found}; this jpd knows up to "
                f"{SCHEMA_VERSION}: upgrade jpd"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            await conn.execute(MIGRATIONS[version].encode())
            await conn.execute("INSERT INTO jpd_schema (version) VALUES (%s)", (version,))
    return found
