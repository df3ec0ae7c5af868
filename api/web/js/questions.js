// Question cards: an `ask_user` call waits for the person's answer. Its tool card shows
// the question, a button per choice, and (unless the question allows only its choices)
// a text input; the card goes when the question is answered, from this page or any
// other client (question_answered), or when its run ends. What waits is rebuilt from run
// events, so a reload shows the same.

import { el } from "./dom.js";
import { t } from "./i18n.js";

export class Questions {
  constructor({ answer }) {
    this.answer = answer; // (callId, text) -> Promise
    this.waiting = new Map(); // call id -> {runId, question, choices, allowOther}
    this.errors = new Map(); // call id -> what the last attempt was told
    this.drafts = new Map(); // call id -> text typed so far (kept across redraws)
  }

  // The tool call ids whose card changes with this event.
  onEvent(event) {
    const p = event.payload;
    if (event.type === "question_asked") {
      this.waiting.set(p.call_id, {
        runId: event.run_id, question: p.question, choices: p.choices || [], allowOther: p.allow_other !== false,
      });
      return [p.call_id];
    }
    if (event.type === "question_answered") return this.forget([p.call_id]);
    if (event.type === "agent_end") {
      return this.forget([...this.waiting].filter(([, w]) => w.runId === p.run_id).map(([id]) => id));
    }
    return [];
  }

  forget(ids) {
    for (const id of ids) {
      this.waiting.delete(id);
      this.errors.delete(id);
      this.drafts.delete(id);
    }
    return ids;
  }

  // The card for a waiting question (null when none waits); `refresh` redraws its tool card.
  card(callId, refresh) {
    const waiting = this.waiting.get(callId);
    if (!waiting) return null;
    const send = async (text) => {
      try {
        await this.answer(callId, text);
        this.forget([callId]);
      } catch (error) {
        this.errors.set(callId, error.message);
      }
      refresh();
    };
    const choices = waiting.choices.map((choice) =>
      el("button", { type: "button", class: "question-choice", onclick: () => send(choice) }, choice));
    let own = null;
    if (waiting.allowOther || !waiting.choices.length) {
      const input = el("input", {
        class: "question-input", type: "text", "aria-label": t("Your answer"),
        placeholder: waiting.choices.length ? t("Or answer in your own words") : t("Your answer"),
      });
      input.value = this.drafts.get(callId) || "";
      input.addEventListener("input", () => this.drafts.set(callId, input.value));
      const submit = () => { if (input.value.trim()) send(input.value); };
      input.addEventListener("keydown", (e) => { if (e.key === "Enter") submit(); });
      own = el("div", { class: "question-own" }, input,
        el("button", { type: "button", class: "question-send", onclick: submit }, t("Answer")));
    }
    const error = this.errors.get(callId);
    return el("div", { class: "question", role: "group", "aria-label": t("Question") },
      el("div", { class: "question-head" }, t("The agent asks you:")),
      el("p", { class: "question-text" }, waiting.question),
      choices.length ? el("div", { class: "question-choices" }, ...choices) : null,
      own,
      error ? el("div", { class: "question-error", role: "alert" }, error) : null);
  }
}
