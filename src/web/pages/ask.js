// kubemedic dashboard, "Ask": send a message to POST /v1/chat/completions, then follow the
// turn's typed events (GET /v1/chat/stream/{id}) with an EventSource until its `done`. At an
// approval request an approver gets Approve / Deny, sent as the conversation's next message.
// No library; nothing loaded from anywhere else.
(function () {
  "use strict";
  var root = document.getElementById("conversation");
  if (!root) { return; }
  var log = document.getElementById("log");
  var form = document.getElementById("ask-form");
  var input = document.getElementById("question");
  var hitl = document.getElementById("hitl");
  var hitlWhat = document.getElementById("hitl-what");
  var csrf = root.dataset.csrf || "";
  var conversation = null;
  var pendingAction = null;
  var answer = null;
  var thinking = null;

  function line(kind, text) {
    var p = document.createElement("p");
    p.className = "ev ev-" + kind;
    p.dataset.kind = kind;
    var k = document.createElement("span"); k.className = "kind"; k.textContent = kind;
    var m = document.createElement("span"); m.className = "msg"; m.textContent = text;
    p.appendChild(k); p.appendChild(document.createTextNode(" ")); p.appendChild(m);
    log.appendChild(p);
    return p;
  }

  function busy(on) {
    document.getElementById("send").disabled = on;
    root.dataset.busy = on ? "true" : "false";
  }

  // Send one message; resolve with the first chunk (it names the conversation and the turn).
  function send(text, action) {
    var body = { model: "kubemedic", stream: true, messages: [{ role: "user", content: text }] };
    if (conversation) { body.conversation_id = conversation; }
    if (action) { body.action_id = action; }
    var controller = new AbortController();
    return fetch("/v1/chat/completions", {
      method: "POST", credentials: "same-origin", signal: controller.signal,
      headers: { "content-type": "application/json", "x-csrf-token": csrf },
      body: JSON.stringify(body)
    }).then(function (r) {
      if (!r.ok) {
        return r.json().then(function (e) {
          throw new Error((e.error && e.error.message) || ("HTTP " + r.status));
        });
      }
      var reader = r.body.getReader();
      var decoder = new TextDecoder();
      var buf = "";
      function pump() {
        return reader.read().then(function (x) {
          if (x.done) { throw new Error("the stream ended before the first chunk"); }
          buf += decoder.decode(x.value, { stream: true });
          var end = buf.indexOf("\n\n");
          if (end < 0) { return pump(); }
          var data = buf.slice(0, end).split("\n").filter(function (l) { return l.indexOf("data:") === 0; })
            .map(function (l) { return l.slice(5).trim(); }).join("");
          controller.abort();
          return JSON.parse(data);
        });
      }
      return pump();
    });
  }

  // Follow turn `turn` of the conversation until its `done`.
  function follow(turn) {
    var after = (turn - 1) + ".9223372036854775807.9223372036854775807";
    var source = new EventSource("/v1/chat/stream/" + conversation + "?after=" + encodeURIComponent(after));
    answer = null;
    thinking = null;
    ["status", "plan", "tool_call", "tool_result", "error"].forEach(function (kind) {
      source.addEventListener(kind, function (ev) {
        var d = JSON.parse(ev.data);
        var p = line(kind, d.message || "");
        // A tool's output, whole (the model may have read it cut), folded away.
        if (kind === "tool_result" && d.output) {
          var det = document.createElement("details"); var sum = document.createElement("summary");
          var pre = document.createElement("pre");
          sum.textContent = "output"; pre.textContent = d.output;
          det.appendChild(sum); det.appendChild(pre); p.appendChild(det);
        }
      });
    });
    source.addEventListener("token", function (ev) {
      var d = JSON.parse(ev.data);
      // The model's words as it writes them (not kept: a reload shows the trail, not these).
      if (d.live) {
        var call = d.invocation + "." + d.call;
        if (!thinking || thinking.dataset.call !== call) {
          thinking = document.createElement("div"); thinking.className = "live"; thinking.dataset.call = call;
          log.appendChild(thinking);
        }
        thinking.textContent += d.content || "";
        return;
      }
      if (!answer) { answer = document.createElement("div"); answer.className = "answer"; log.appendChild(answer); }
      answer.textContent += d.content || "";
    });
    source.addEventListener("hitl_request", function (ev) {
      var d = JSON.parse(ev.data);
      pendingAction = d.action_id;
      hitlWhat.textContent = "Approval required: " + (d.action_type || "") + " on " + (d.target || "") +
        " (risk " + d.risk_score + ")";
      hitl.hidden = false;
    });
    source.addEventListener("done", function () {
      source.close();
      busy(false);
      root.dataset.turns = String(turn);
    });
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) { busy(false); }
    };
  }

  function ask(text, action) {
    busy(true);
    line("you", text);
    send(text, action).then(function (chunk) {
      conversation = chunk.conversation_id;
      root.dataset.conversation = conversation;
      follow(chunk.turn);
    }).catch(function (e) {
      line("error", String(e.message || e));
      busy(false);
    });
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = input.value.trim();
    if (!text) { return; }
    input.value = "";
    ask(text, null);
  });
  function decide(word) {
    hitl.hidden = true;
    var action = pendingAction;
    pendingAction = null;
    ask(word, action);
  }
  var approve = document.getElementById("approve");
  var deny = document.getElementById("deny");
  if (approve) { approve.addEventListener("click", function () { decide("approve"); }); }
  if (deny) { deny.addEventListener("click", function () { decide("deny"); }); }
  document.querySelectorAll("#conversations a[data-conversation]").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      ev.preventDefault();
      conversation = a.dataset.conversation;
      root.dataset.conversation = conversation;
      log.textContent = "";
      line("status", "continuing conversation " + conversation);
    });
  });
}());
