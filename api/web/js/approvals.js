// Approval cards: a tool call the session's approval policy asks about waits for a person.
// Its tool card shows what asked, the arguments, a box for a reason to deny, and Approve /
// Always / Deny; the card goes when the call is decided, from this page or any other
// client (approval_decided), or when its run ends. What waits is rebuilt from run events,
// so a reload shows the same.

import { el } from "./dom.js";
import { t } from "./i18n.js";
import { PersonWaits } from "./waits.js";

export class Approvals extends PersonWaits {
  constructor({ decide }) {
    super({ asked: "approval_requested", ended: "approval_decided" });
    this.decide = decide; // (callId, action, body) -> Promise
  }

  waitingFrom(p) {
    return { rule: p.rule, argsPreview: p.args_preview };
  }

  // The card for a waiting call (null when it does not wait); `refresh` redraws its tool card.
  //
  // The reason box is always there, above the buttons: a reason is typed first, and Deny
  // sends it in one tap (an empty box denies without one). A box that appeared only on a
  // first tap of Deny needed a second one, and on a phone opened half under the message
  // box. What is typed is kept across redraws.
  card(callId, args, refresh) {
    const waiting = this.waiting.get(callId);
    if (!waiting) return null;
    const shown = args && Object.keys(args).length ? JSON.stringify(args, null, 2) : waiting.argsPreview;
    const send = this.sender(callId, refresh, (action, body) => this.decide(callId, action, body));
    const reason = el("input", {
      class: "approval-reason", type: "text", enterkeyhint: "send",
      placeholder: t("Reason for denying, read by the model (optional)"), "aria-label": t("Reason for denying"),
    });
    this.keepDraft(callId, reason);
    const deny = () => send("deny", { reason: reason.value.trim() || null });
    reason.addEventListener("keydown", (e) => { if (e.key === "Enter") deny(); });
    const actions = el("div", { class: "approval-actions" },
      el("button", { class: "approval-approve", onclick: () => send("approve", { always: false }) }, t("Approve")),
      el("button", {
        class: "approval-always", title: t("Approve, and allow this tool (for bash: this exact command) from now on"),
        onclick: () => send("approve", { always: true }),
      }, t("Always")),
      el("button", { class: "approval-deny", onclick: deny }, t("Deny")));
    // Typing on a phone: the box and its buttons in sight, clear of the message box and
    // of the keyboard (which shrinks the screen once it is up).
    const inSight = () => actions.scrollIntoView({ block: "nearest" });
    reason.addEventListener("focus", () => {
      inSight();
      if (window.visualViewport) window.visualViewport.addEventListener("resize", inSight, { once: true });
    });
    const error = this.errors.get(callId);
    return el("div", { class: "approval", role: "group", "aria-label": t("Approval") },
      el("div", { class: "approval-head" }, t("Waits for your approval"), " ", el("span", { class: "approval-rule" }, ...askedBy(waiting.rule))),
      el("pre", { class: "approval-args" }, shown),
      reason,
      actions,
      error ? el("div", { class: "approval-error", role: "alert" }, error) : null);
  }
}

// What asked, from the event's `rule` (domain/approvals.py: "the default (ask)" or
// "rule bash 'rm *' -> ask"): in words, a rule as code.
function askedBy(rule) {
  if (/^the default \(\w+\)$/.test(rule || "")) return [t("your approval policy asks about calls no rule of it covers")];
  const found = /^rule (.+) -> \w+$/.exec(rule || "");
  if (found) return [t("asked by the rule"), " ", el("code", {}, found[1])];
  return [t("asked by"), " ", el("code", {}, rule || "?")];
}
