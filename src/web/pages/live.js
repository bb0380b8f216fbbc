// kubemedic dashboard: the request page follows its request live (Server-Sent Events from the
// audit trail, resumed with Last-Event-ID by the browser), and the inbox counts down to expiry.
// No library; nothing loaded from anywhere else.
(function () {
  "use strict";
  // The same classes the server gives a phase badge.
  function phaseClass(phase) {
    switch (phase) {
      case "Completed": return "ok";
      case "Failed": return "bad";
      case "Blocked": case "Rejected": case "Expired": case "ManualReviewRequired": return "warn";
      case "AwaitingApproval": return "wait";
      case "NoActionRequired": return "done";
      default: return "run";
    }
  }
  var list = document.getElementById("timeline");
  if (list && list.dataset.terminal !== "true" && window.EventSource) {
    var live = document.getElementById("live");
    var url = list.dataset.events + "?after=" + encodeURIComponent(list.dataset.after || "0");
    var source = new EventSource(url);
    var kinds = ["phase", "signal", "enrichment", "plan", "tool_call", "tool_result", "llm_usage",
      "rca", "selection", "proof", "gate_decision", "approval_requested", "approval_decided",
      "approval_refused", "approval_not_executed", "notification", "execution_step", "execution",
      "guardrail", "verification", "undo", "error", "audit"];
    source.onopen = function () { if (live) { live.hidden = false; } };
    kinds.forEach(function (kind) {
      source.addEventListener(kind, function (ev) {
        var data;
        try { data = JSON.parse(ev.data); } catch (e) { return; }
        if (document.getElementById("ev-" + ev.lastEventId)) { return; }
        var li = document.createElement("li");
        li.id = "ev-" + ev.lastEventId;
        li.dataset.kind = kind;
        li.className = data.bad === true ? "new bad" : "new";
        var k = document.createElement("span"); k.className = "kind"; k.textContent = kind;
        var t = document.createElement("time"); t.textContent = String(data.at || "").slice(0, 19).replace("T", " ");
        var a = document.createElement("span"); a.className = "actor"; a.textContent = data.actor || "";
        var m = document.createElement("span"); m.className = "msg"; m.textContent = data.message || "";
        [k, t, a, m].forEach(function (n, i) { if (i) { li.appendChild(document.createTextNode(" ")); } li.appendChild(n); });
        list.appendChild(li);
        if (kind === "phase" && data.to) {
          var badge = document.querySelector("#phase .badge");
          if (badge) { badge.textContent = data.to; badge.dataset.phase = data.to; badge.className = "badge " + phaseClass(data.to); }
        }
      });
    });
    source.addEventListener("end", function () {
      source.close();
      if (live) { live.textContent = " · finished"; }
      list.dataset.terminal = "true";
    });
  }
  var countdowns = document.querySelectorAll(".countdown[data-expires]");
  if (countdowns.length) {
    var tick = function () {
      countdowns.forEach(function (el) {
        var left = Math.floor((Date.parse(el.dataset.expires) - Date.now()) / 1000);
        el.textContent = left <= 0 ? "expired" : Math.floor(left / 60) + "m " + String(left % 60).padStart(2, "0") + "s left";
      });
    };
    tick();
    setInterval(tick, 1000);
  }
})();
