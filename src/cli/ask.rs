//! `kubemedic ask "why is checkout crashing in shop?"`: ask a running daemon, watch the
//! investigation as it happens, and decide the proposed change at the prompt.
//!
//! It speaks the daemon's public chat API and nothing else: `POST /v1/chat/completions`
//! (streaming) takes the question, and `GET /v1/chat/stream/{conversation}` gives the turn's
//! typed events — status, plan, tool calls and results, the answer, the approval request —
//! printed as they come. At an approval request it asks (or takes `--approve`/`--deny`) and
//! sends the decision as the next message of the conversation, then follows execution and
//! verification to the end.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::secret::Secret;

#[derive(Debug, clap::Args)]
pub struct AskArgs {
    /// The question (or, with --conversation, the next message).
    #[arg(value_name = "QUESTION", required = true, num_args = 1..)]
    pub question: Vec<String>,
    #[command(flatten)]
    pub daemon: super::Remote,
    /// Continue this conversation.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// Approve a proposed change without asking.
    #[arg(long, conflicts_with = "deny")]
    pub approve: bool,
    /// Deny a proposed change without asking.
    #[arg(long)]
    pub deny: bool,
}

struct Client {
    http: reqwest::Client,
    url: String,
    key: Option<Secret>,
}

/// One server-sent event.
#[derive(Debug, Default)]
struct Sse {
    event: String,
    data: String,
}

/// Reads server-sent events from a response, one at a time.
struct SseReader {
    response: reqwest::Response,
    buf: String,
}

impl SseReader {
    async fn next(&mut self) -> Result<Option<Sse>, String> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut e = Sse::default();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        e.event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        if !e.data.is_empty() {
                            e.data.push('\n');
                        }
                        e.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if e.event.is_empty() && e.data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Ok(Some(e));
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self
                    .buf
                    .push_str(&String::from_utf8_lossy(&bytes).replace("\r\n", "\n")),
                Ok(None) => return Ok(None),
                Err(e) => return Err(format!("the stream broke: {e}")),
            }
        }
    }
}

impl Client {
    fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(k) => rb.bearer_auth(k.expose()),
            None => rb,
        }
    }

    async fn check(r: reqwest::Response) -> Result<reqwest::Response, String> {
        if r.status().is_success() {
            return Ok(r);
        }
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        let message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("no detail");
        Err(format!("the daemon answered {status}: {message}"))
    }

    /// Send one message; the conversation and the turn it made.
    async fn send(
        &self,
        conversation: Option<&str>,
        message: &str,
        action_id: Option<&str>,
    ) -> Result<(String, i64), String> {
        let mut body = serde_json::Map::new();
        body.insert("model".into(), json!("kubemedic"));
        body.insert("stream".into(), json!(true));
        body.insert(
            "messages".into(),
            json!([{"role": "user", "content": message}]),
        );
        if let Some(c) = conversation {
            body.insert("conversation_id".into(), json!(c));
        }
        if let Some(a) = action_id {
            body.insert("action_id".into(), json!(a));
        }
        let r = self
            .auth(self.http.post(format!("{}/v1/chat/completions", self.url)))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("cannot reach {}: {e}", self.url))?;
        let mut sse = SseReader {
            response: Self::check(r).await?,
            buf: String::new(),
        };
        // The first chunk names the conversation and the turn; the rest is followed as typed
        // events.
        let first = sse
            .next()
            .await?
            .ok_or("the daemon closed the stream before answering")?;
        let chunk: Value = serde_json::from_str(&first.data)
            .map_err(|e| format!("not a chat completion chunk: {e}"))?;
        let conversation = chunk
            .get("conversation_id")
            .and_then(Value::as_str)
            .ok_or("the answer carries no conversation_id")?
            .to_owned();
        let turn = chunk
            .get("turn")
            .and_then(Value::as_i64)
            .ok_or("the answer carries no turn")?;
        Ok((conversation, turn))
    }

    /// Print the turn's typed events up to its `done`; the approval asked for, if any.
    async fn follow(&self, conversation: &str, turn: i64) -> Result<Option<Value>, String> {
        let r = self
            .auth(
                self.http
                    .get(format!("{}/v1/chat/stream/{conversation}", self.url)),
            )
            .header(
                "last-event-id",
                format!("{}.{}.{}", turn - 1, i64::MAX, i64::MAX),
            )
            .send()
            .await
            .map_err(|e| format!("cannot reach {}: {e}", self.url))?;
        let mut sse = SseReader {
            response: Self::check(r).await?,
            buf: String::new(),
        };
        let mut hitl = None;
        let out = std::io::stdout();
        while let Some(e) = sse.next().await? {
            let d: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
            let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let mut o = out.lock();
            let _ = match e.event.as_str() {
                "status" => writeln!(o, "· {}", text("message")),
                "plan" => writeln!(o, "plan: {}", text("message")),
                "tool_call" => writeln!(o, "  → {}", text("message")),
                "tool_result" => writeln!(o, "  ← {}", text("message")),
                "error" => writeln!(o, "! {}", text("message")),
                // The model's words as it writes them, set apart from the answer.
                "token" if d.get("live") == Some(&Value::Bool(true)) => text("content")
                    .lines()
                    .try_for_each(|l| writeln!(o, "  ┆ {l}")),
                "token" => write!(o, "{}", text("content")),
                "hitl_request" => {
                    hitl = Some(d.clone());
                    Ok(())
                }
                "done" => {
                    let _ = writeln!(o);
                    break;
                }
                _ => Ok(()),
            };
            let _ = o.flush();
        }
        Ok(hitl)
    }
}

fn ask_approval(hitl: &Value) -> Option<bool> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let what = |k: &str| {
        hitl.get(k)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    print!(
        "\nApprove {} on {} (risk {})? [y/N] ",
        what("action_type"),
        what("target"),
        hitl.get("risk_score").cloned().unwrap_or(Value::Null)
    );
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes" | "approve"
    ))
}

pub async fn run(args: AskArgs) -> ExitCode {
    let http = match reqwest::Client::builder().build() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: cannot build an HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = Client {
        http,
        url: args.daemon.url.trim_end_matches('/').to_owned(),
        key: args.daemon.api_key.clone(),
    };
    let question = args.question.join(" ");
    match converse(&client, &args, &question).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn converse(client: &Client, args: &AskArgs, question: &str) -> Result<ExitCode, String> {
    let (conversation, turn) = client
        .send(args.conversation.as_deref(), question, None)
        .await?;
    println!("conversation {conversation}");
    let Some(hitl) = client.follow(&conversation, turn).await? else {
        return Ok(ExitCode::SUCCESS);
    };
    let action = hitl
        .get("action_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let decision = if args.approve {
        Some(true)
    } else if args.deny {
        Some(false)
    } else {
        ask_approval(&hitl)
    };
    let Some(approve) = decision else {
        println!(
            "Not decided. To decide: kubemedic ask --conversation {conversation} approve (or \
             deny); action_id {action}"
        );
        return Ok(ExitCode::SUCCESS);
    };
    let word = if approve { "approve" } else { "deny" };
    let (_, turn) = client
        .send(Some(&conversation), word, Some(&action))
        .await?;
    client.follow(&conversation, turn).await?;
    Ok(ExitCode::SUCCESS)
}
