// Guidance the model received (GET /guidance): a note in the conversation where it reached
// the model, saying in words what it met there (a tool it interrupted, calls not run), and
// a link to that note from each tool card it stopped. Guidance is no chat message (docs/SPEC.md):
// the note is set apart from the messages, and it is built from the store, so a reload
// shows the same.

import { el } from "./dom.js";
import { LANG, t } from "./i18n.js";

// Where guidance reached the model, after "reached the agent" (the injection points of docs/SPEC.md).
export const POINT_WORDS = {
  before_model: "before its next model call",
  before_tools: "before the tools it had planned ran",
  during_tool_interrupted: "while a tool ran, and interrupted it",
  after_tool: "after the running tool finished",
  before_finish: "as it was about to finish",
};

export function pointWords(point) {
  return t(POINT_WORDS[point] || "at a safe point");
}

const SHORT_CHARS = 60;

function short(text) {
  return text.length > SHORT_CHARS ? `${text.slice(0, SHORT_CHARS - 1)}…` : text;
}

export class GuidanceTrace {
  // `describeCall(callId)`: how the conversation names a tool call (its command, path…).
  constructor({ describeCall }) {
    this.describeCall = describeCall;
    this.marks = new Map(); // entry id -> mark (with its element once drawn)
    this.byCall = new Map(); // tool call id -> the mark of the guidance that stopped it
    this.stopped = new Set(); // tool call ids guidance interrupted (its event says so first)
  }

  // runtime_guidance_injected names the calls it interrupted as the model receives it,
  // before the marks are read: a call stopped for guidance stays "interrupted" even if
  // the run is stopped later (Stop and guidance cancel a call alike).
  onEvent(event) {
    if (event.type !== "runtime_guidance_injected") return [];
    const ids = event.payload.interrupted || [];
    for (const id of ids) this.stopped.add(id);
    return ids;
  }

  interrupted(callId) {
    return this.stopped.has(callId);
  }

  // The store's marks; returns whether any is new or changed.
  set(marks) {
    let changed = false;
    for (const mark of marks) {
      const known = this.marks.get(mark.entry_id);
      if (known && JSON.stringify(known.calls) === JSON.stringify(mark.calls)) continue;
      this.marks.set(mark.entry_id, { ...mark });
      for (const call of mark.calls) {
        if (call.outcome !== "finished") this.byCall.set(call.tool_call_id, mark.entry_id);
        if (call.outcome === "interrupted") this.stopped.add(call.tool_call_id);
      }
      changed = true;
    }
    return changed;
  }

  get list() {
    return [...this.marks.values()];
  }

  calls(mark, outcome) {
    return mark.calls.filter((call) => call.outcome === outcome);
  }

  // What the guidance met where it was taken, as nodes of a sentence.
  where(mark) {
    const interrupted = this.calls(mark, "interrupted");
    const skipped = this.calls(mark, "skipped");
    const names = (calls) => calls.flatMap((call, i) => [i ? ", " : "", this.describeCall(call.tool_call_id, call.tool_name)]);
    const parts = [];
    if (mark.point === "during_tool_interrupted" && interrupted.length) {
      parts.push(t("It reached the agent while a tool ran and interrupted the running "), ...names(interrupted),
        t(" (its output so far is kept)."));
    } else if (mark.point === "after_tool") {
      parts.push(t(mark.calls.length > 1 ? "It reached the agent after the running tools finished." : "It reached the agent after the running tool finished."));
    } else if (mark.point === "before_tools") {
      parts.push(t("It reached the agent before the tools it had planned ran: the agent planned again."));
    } else {
      parts.push(t("It reached the agent {where}.", { where: pointWords(mark.point) }));
    }
    if (skipped.length) {
      parts.push(t(" Not run because of it: "), ...names(skipped), LANG === "zh" ? "。" : ".");
    }
    return parts;
  }

  element(mark) {
    if (!mark.element) {
      mark.element = el("aside", { class: "guidance-mark", id: `guidance-${mark.entry_id}`, dataset: { entryId: mark.entry_id } },
        el("div", { class: "who" }, t("Your guidance")),
        el("blockquote", { class: "guidance-text text plain" }, mark.text),
        el("div", { class: "guidance-where" }, this.where(mark)));
    }
    return mark.element;
  }

  // The link on a tool card that guidance stopped (null for the others).
  link(callId) {
    const mark = this.marks.get(this.byCall.get(callId));
    if (!mark) return null;
    const call = mark.calls.find((c) => c.tool_call_id === callId);
    const what = t(call.outcome === "interrupted" ? "Interrupted by your guidance" : "Not run because of your guidance");
    return el("button", {
      type: "button",
      class: "guidance-link",
      title: t("Show the guidance where the agent received it"),
      onclick: () => this.element(mark).scrollIntoView({ block: "center" }),
    }, `${what}: “${short(mark.text)}” ↓`);
  }
}
