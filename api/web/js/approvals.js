// Approval cards: a tool call the session's approval policy asks about waits for a person.
// Its tool card shows the arguments and Approve / Always / Deny (with a reason); the card
// goes when the call is decided, from this page or any other client (approval_decided),
// or when its run ends. What waits is rebuilt from run events, so a reload shows the same.

import { el } from "./dom.js";
import { t } from "./i18n.js";

export class Approvals {
  constructor({ decide }) {
    this.decide = decide; // (callId, action, body) -> Promise
    this.waiting = new Map(); // call id -> {runId, rule, argsPreview}
    this.errors = new Map(); // call id -> what the last attempt was told
  }

  // The tool call ids whose card changes with this event.
  onEvent(event) {
    const p = event.payload;
    if (event.type === "approval_requested") {
      this.waiting.set(p.call_id, { runId: event.run_id, rule: p.rule, argsPreview: p.args_preview });
      return [p.call_id];
    }
    if (event.type === "approval_decided") return this.forget([p.call_id]);
    if (event.type === "agent_end") {
      return this.forget([...this.waiting].filter(([, w]) => w.runId === p.run_id).map(([id]) => id));
    }
    return [];
  }

  forget(ids) {
    for (const id of ids) {
      this.waiting.delete(id);
      this.errors.delete(id);
    }
    return ids;
  }

  // The card for a waiting call (null when it does not wait); `refresh` redraws its tool card.
  card(callId, args, refresh) {
    const waiting = this.waiting.get(callId);
    if (!waiting) return null;
    const shown = args && Object.keys(args).length ? JSON.stringify(args, null, 2) : waiting.argsPreview;
    const reason = el("input", { class: "approval-reason", type: "text", placeholder: "Reason the model reads (optional)", hidden: true });
    const send = async (action, body) => {
      try {
        await this.decide(callId, action, body);
        this.forget([callId]);
      } catch (error) {
        this.errors.set(callId, error.message);
      }
      refresh();
    };
    const deny = el("button", {
      class: "approval-deny",
      onclick: () => {
        if (reason.hidden) {
          reason.hidden = false;
          reason.focus();
          return;
        }
        send("deny", { reason: reason.value.trim() || null });
      },
    }, t("Deny"));
    reason.addEventListener("keydown", (e) => { if (e.key === "Enter") deny.click(); });
    const error = this.errors.get(callId);
    return el("div", { class: "approval", role: "group", "aria-label": "Approval" },
      el("div", { class: "approval-head" }, "Waits for your approval ", el("span", { class: "approval-rule" }, `asked by ${waiting.rule}`)),
      el("pre", { class: "approval-args" }, shown),
      el("div", { class: "approval-actions" },
        el("button", { class: "approval-approve", onclick: () => send("approve", { always: false }) }, t("Approve")),
        el("button", { class: "approval-always", title: "Approve, and allow this tool (for bash: this exact command) from now on", onclick: () => send("approve", { always: true }) }, t("Always")),
        deny, reason),
      error ? el("div", { class: "approval-error", role: "alert" }, error) : null);
  }
}
