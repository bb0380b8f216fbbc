//! [`Chat`](crate::store::Chat): conversations, their turns, and pinned context.

use async_trait::async_trait;
use sqlx::types::Json;
use uuid::Uuid;

use super::dialect::Dialect;
use super::facade::{Arg as _, Col as _, Conn as _, query_as};
use super::{DbRow, SqlStore};
use crate::domain::{AuditDraft, ChatTurn, Conversation, MemoryNote, NewTurn};
use crate::store::{Chat, Result, corrupt, storable_json, storable_text};

impl<D: Dialect> SqlStore<D> {
    fn conversation_from_row(row: &DbRow<D>) -> Result<Conversation> {
        let get = |e: sqlx::Error| corrupt("chat_conversations", e.to_string());
        Ok(Conversation {
            id: D::uuid_of(row.col("id").map_err(get)?),
            owner: row.col("owner").map_err(get)?,
            title: row.col("title").map_err(get)?,
            created_at: D::time_of(row.col("created_at").map_err(get)?)?,
            updated_at: D::time_of(row.col("updated_at").map_err(get)?)?,
        })
    }

    fn turn_from_row(row: &DbRow<D>) -> Result<ChatTurn> {
        let get = |e: sqlx::Error| corrupt("chat_turns", e.to_string());
        let id: i64 = row.col("id").map_err(get)?;
        let turn: Json<serde_json::Value> = row.col("turn").map_err(get)?;
        let mut turn: NewTurn = serde_json::from_value(turn.0)
            .map_err(|e| corrupt("chat_turns", format!("turn {id}: {e}")))?;
        let answer: Option<String> = row.col("answer").map_err(get)?;
        if answer.is_some() {
            turn.answer = answer;
        }
        Ok(ChatTurn { id, turn })
    }

    fn memory_from_row(row: &DbRow<D>) -> Result<MemoryNote> {
        let get = |e: sqlx::Error| corrupt("cluster_memory", e.to_string());
        Ok(MemoryNote {
            scope: row.col("scope").map_err(get)?,
            content: row.col("content").map_err(get)?,
            updated_at: D::time_of(row.col("updated_at").map_err(get)?)?,
            updated_by: row.col("updated_by").map_err(get)?,
        })
    }
}

#[async_trait]
impl<D: Dialect> Chat for SqlStore<D> {
    async fn open_conversation(&self, c: &Conversation) -> Result<()> {
        let _write = self.write_guard().await;
        sqlx::query(
            "INSERT INTO chat_conversations (id, owner, title, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
        )
        .arg(D::id(c.id))
        .arg(storable_text(&c.owner))
        .arg(storable_text(&c.title))
        .arg(D::ts(c.created_at))
        .arg(D::ts(c.updated_at))
        .execute(self.writes())
        .await?;
        Ok(())
    }

    async fn conversation(&self, id: Uuid) -> Result<Option<Conversation>> {
        let row = sqlx::query(
            "SELECT id, owner, title, created_at, updated_at FROM chat_conversations \
             WHERE id = $1",
        )
        .arg(D::id(id))
        .fetch_optional(self.reads())
        .await?;
        row.as_ref().map(Self::conversation_from_row).transpose()
    }

    async fn conversations(&self, owner: &str, limit: i64) -> Result<Vec<Conversation>> {
        let rows = sqlx::query(
            "SELECT id, owner, title, created_at, updated_at FROM chat_conversations \
             WHERE owner = $1 ORDER BY updated_at DESC, id LIMIT $2",
        )
        .arg(owner)
        .arg(limit)
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::conversation_from_row).collect()
    }

    async fn add_turn(&self, turn: &NewTurn) -> Result<ChatTurn> {
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let (id,): (i64,) = query_as(
            "INSERT INTO chat_turns (conversation_id, turn, request_id, answer) \
             VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .arg(D::id(turn.conversation_id))
        .arg(storable_json(turn)?)
        .arg(turn.request_id.map(D::id))
        .arg(turn.answer.as_deref().map(storable_text))
        .fetch_one(tx.conn())
        .await?;
        sqlx::query("UPDATE chat_conversations SET updated_at = $1 WHERE id = $2")
            .arg(D::ts(turn.at))
            .arg(D::id(turn.conversation_id))
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(ChatTurn {
            id,
            turn: turn.clone(),
        })
    }

    async fn turns(&self, conversation: Uuid, after: i64, limit: i64) -> Result<Vec<ChatTurn>> {
        let rows = sqlx::query(
            "SELECT id, turn, answer FROM chat_turns \
             WHERE conversation_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .arg(D::id(conversation))
        .arg(after)
        .arg(limit)
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::turn_from_row).collect()
    }

    async fn finish_turn(&self, id: i64, answer: &str) -> Result<()> {
        let _write = self.write_guard().await;
        sqlx::query("UPDATE chat_turns SET answer = $1 WHERE id = $2 AND answer IS NULL")
            .arg(storable_text(answer))
            .arg(id)
            .execute(self.writes())
            .await?;
        Ok(())
    }

    async fn memory(&self, scope: &str) -> Result<Option<MemoryNote>> {
        let row = sqlx::query(
            "SELECT scope, content, updated_at, updated_by FROM cluster_memory WHERE scope = $1",
        )
        .arg(scope)
        .fetch_optional(self.reads())
        .await?;
        row.as_ref().map(Self::memory_from_row).transpose()
    }

    async fn memories(&self) -> Result<Vec<MemoryNote>> {
        let rows = sqlx::query(
            "SELECT scope, content, updated_at, updated_by FROM cluster_memory ORDER BY scope",
        )
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::memory_from_row).collect()
    }

    async fn set_memory(&self, scope: &str, content: Option<&str>, actor: &str) -> Result<()> {
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let draft = match content {
            Some(content) => {
                sqlx::query(
                    "INSERT INTO cluster_memory (scope, content, updated_at, updated_by) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (scope) DO UPDATE SET \
                     content = excluded.content, updated_at = excluded.updated_at, \
                     updated_by = excluded.updated_by",
                )
                .arg(scope)
                .arg(storable_text(content))
                .arg(D::ts(now))
                .arg(storable_text(actor))
                .execute(tx.conn())
                .await?;
                AuditDraft::new(
                    "memory_set",
                    actor,
                    format!(
                        "pinned context of {scope} set ({} characters)",
                        content.chars().count()
                    ),
                )
                .with_payload(serde_json::json!({"scope": scope, "content": content}))
            }
            None => {
                sqlx::query("DELETE FROM cluster_memory WHERE scope = $1")
                    .arg(scope)
                    .execute(tx.conn())
                    .await?;
                AuditDraft::new(
                    "memory_deleted",
                    actor,
                    format!("pinned context of {scope} deleted"),
                )
                .with_payload(serde_json::json!({"scope": scope}))
            }
        };
        Self::insert_audit(&mut tx, &self.audit_key, None, None, now, &draft).await?;
        tx.commit().await?;
        Ok(())
    }
}
