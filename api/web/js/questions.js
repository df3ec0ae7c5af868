// Question cards: an `ask_user` call waits for the person's answer. Its tool card shows
// the question, a button per choice, and (unless the question allows only its choices)
// a text input; the card goes when the question is answered, from this page or any
// other client (question_answered), or when its run ends. What waits is rebuilt from run
// events, so a reload shows the same.

import { el } from "./dom.js";
import { t } from "./i18n.js";
import { PersonWaits } from "./waits.js";

export class Questions extends PersonWaits {
  constructor({ answer }) {
    super({ asked: "question_asked", ended: "question_answered" });
    this.answer = answer; // (callId, text) -> Promise
  }

  waitingFrom(p) {
    return { question: p.question, choices: p.choices || [], allowOther: p.allow_other !== false };
  }

  // The card for a waiting question (null when none waits); `refresh` redraws its tool card.
  card(callId, refresh) {
    const waiting = this.waiting.get(callId);
    if (!waiting) return null;
    const send = this.sender(callId, refresh, (text) => this.answer(callId, text));
    const choices = waiting.choices.map((choice) =>
      el("button", { type: "button", class: "question-choice", onclick: () => send(choice) }, choice));
    let own = null;
    if (waiting.allowOther || !waiting.choices.length) {
      const input = el("input", {
        class: "question-input", type: "text", "aria-label": t("Your answer"),
        placeholder: waiting.choices.length ? t("Or answer in your own words") : t("Your answer"),
      });
      this.keepDraft(callId, input);
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
