//! The loop both invocations run ([`converse`]): the model answers, the invocation acts on the
//! answer (runs the tools it called, or reads its result), and the loop goes on until the
//! result is read or the turns run out.
//!
//! An answer the invocation cannot read (free text with no result in it, a result whose
//! arguments do not fit its schema) is asked for again once, with the submit tool forced; a
//! second one ends the loop without a result. Every tool call of an answer gets a reply before
//! the next turn ("Not run." where the invocation gave none), as the chat protocol requires.

use super::*;

/// What an invocation makes of one answer of the model.
pub(super) enum Step<T> {
    /// The result: the loop ends.
    Done(T),
    /// Go on: the replies to this answer's tool calls (by call id), then, if any, a message to
    /// the model and the tool to force on the next turn.
    Next {
        replies: Vec<(String, String)>,
        say: Option<String>,
        force: Option<String>,
    },
    /// The answer cannot be read (`why`): the replies and message that ask again, and the
    /// submit tool to force. Once per conversation; the second ends it.
    Unreadable {
        why: String,
        replies: Vec<(String, String)>,
        say: Option<String>,
        force: String,
    },
}

/// An invocation's side of the conversation.
pub(super) trait Conversation {
    type Output;

    /// The tools offered on the next turn (rebuilt each turn: a server that failed a call
    /// has lost its tools).
    fn tools(&self) -> Vec<ToolDef>;

    /// Act on the model's answer on turn `turn` (from 0).
    async fn answer(
        &mut self,
        response: &ChatResponse,
        turn: usize,
    ) -> Result<Step<Self::Output>, InvestigateError>;
}

/// How a conversation ended.
pub(super) struct Ending<T> {
    /// The result, when one was read.
    pub(super) result: Option<T>,
    /// Why an answer was asked for again (at most one).
    pub(super) asked_again: Option<String>,
    /// Why the conversation ended without a result after asking again.
    pub(super) unreadable: Option<String>,
    /// The turns ran out before a result.
    pub(super) out_of_turns: bool,
}

/// Run the conversation from `messages` for at most `turns` model calls.
pub(super) async fn converse<C: Conversation>(
    session: &mut Session<'_>,
    messages: &mut Vec<Message>,
    turns: usize,
    c: &mut C,
) -> Result<Ending<C::Output>, InvestigateError> {
    let mut ending = Ending {
        result: None,
        asked_again: None,
        unreadable: None,
        out_of_turns: false,
    };
    let mut force: Option<String> = None;
    for turn in 0..turns {
        let choice = force.take().map_or(ToolChoice::Auto, ToolChoice::Force);
        let response = session.chat(messages, &c.tools(), choice).await?;
        messages.push(Message::Assistant {
            content: response.content.as_deref().map(Redacted::new),
            tool_calls: response.tool_calls.clone(),
        });
        let (replies, say, next) = match c.answer(&response, turn).await? {
            Step::Done(out) => {
                ending.result = Some(out);
                return Ok(ending);
            }
            Step::Next {
                replies,
                say,
                force,
            } => (replies, say, force),
            Step::Unreadable {
                why,
                replies,
                say,
                force,
            } => {
                if ending.asked_again.is_some() {
                    ending.unreadable = Some(why);
                    return Ok(ending);
                }
                ending.asked_again = Some(why);
                (replies, say, Some(force))
            }
        };
        for call in &response.tool_calls {
            let text = replies
                .iter()
                .find(|(id, _)| *id == call.id)
                .map_or("Not run.", |(_, t)| t.as_str());
            messages.push(Message::Tool {
                tool_call_id: call.id.clone(),
                content: Redacted::new(text),
            });
        }
        if let Some(say) = say {
            messages.push(Message::User {
                content: Redacted::new(&say),
            });
        }
        force = next;
    }
    ending.out_of_turns = true;
    Ok(ending)
}
