-- Conversations with kubemedic (`POST /v1/chat/completions`, docs/chat.md): one row per
-- conversation, one per message a user sent (a turn). A turn's live events are read from the
-- audit trail of the request it follows; the turn keeps what came before that request and,
-- once done, the answer. Pinned context for investigations, per scope (`cluster`,
-- `user:<name>`).

CREATE TABLE chat_conversations (
    id         TEXT PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    title      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX chat_conversations_owner ON chat_conversations (owner, updated_at);

CREATE TABLE chat_turns (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES chat_conversations (id),
    turn            TEXT NOT NULL,      -- JSON: the NewTurn
    request_id      TEXT,
    answer          TEXT
);
CREATE INDEX chat_turns_conversation ON chat_turns (conversation_id, id);
CREATE INDEX chat_turns_request ON chat_turns (request_id) WHERE request_id IS NOT NULL;

CREATE TABLE cluster_memory (
    scope      TEXT PRIMARY KEY NOT NULL,
    content    TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL
);
