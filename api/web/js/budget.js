// Budgets (domain/budgets.py): the run header's line of what the budget allows and what is
// spent ("budget: 2 of 3 turns · $0.0123 of $0.5000"), and the budget card of a run that
// waits for a person to raise its budget (phase awaiting_budget).
//
// The card sits just above the composer, not in the conversation: the wait is the run's,
// not one message's, and it stays in sight however the conversation is scrolled. It says
// which limit was reached and what was spent (the server's words), shows the limits of the
// budget it waits on with inputs at their current values, and raises them; the server's
// refusal (a raise that lowers a limit or leaves one reached) shows on it. It goes when
// the budget is raised, from this page or any other client (budget_raised), or when the
// run ends. What waits is rebuilt from run events, and after a reload from /state's budget
// view when the event is older than the events loaded, so a reload shows the same.

import { costText } from "./cost.js";
import { el } from "./dom.js";
import { LANG, t } from "./i18n.js";

// Labels are catalogue keys (i18n.js), said with t() where shown.
const FIELDS = [
  { key: "max_turns", label: "Turns", step: "1", integer: true },
  { key: "max_tokens", label: "Tokens", step: "1", integer: true },
  { key: "max_cost_usd", label: "Cost (US$)", step: "any" },
  { key: "max_wall_s", label: "Wall time (s)", step: "any" },
];
const WHOSE = { run: "The run's budget", session: "The session's budget" };

function limited(budget) {
  return Boolean(budget) && FIELDS.some(({ key }) => budget[key] !== null && budget[key] !== undefined);
}

function isSet(value) {
  return value !== null && value !== undefined;
}

// "2 of 3 turns", "1,220 of 10,000 tokens", "$0.0123 of $0.5000", "12.3 of 60.0 s": only
// the limits that are set.
function used(budget, spent) {
  const parts = [];
  if (isSet(budget.max_turns)) {
    const values = { spent: spent.turns, limit: budget.max_turns };
    parts.push(budget.max_turns === 1 ? t("{spent} of {limit} turn", values) : t("{spent} of {limit} turns", values));
  }
  if (isSet(budget.max_tokens)) {
    parts.push(t("{spent} of {limit} tokens", { spent: spent.tokens.toLocaleString("en-US"), limit: budget.max_tokens.toLocaleString("en-US") }));
  }
  if (isSet(budget.max_cost_usd)) parts.push(t("{spent} of {limit}", { spent: costText(spent.cost_usd), limit: costText(budget.max_cost_usd) }));
  if (isSet(budget.max_wall_s)) parts.push(t("{spent} of {limit} s", { spent: spent.wall_s.toFixed(1), limit: budget.max_wall_s.toFixed(1) }));
  return parts;
}

// A limit's or a spend's value as the server's message says it (domain/budgets.py
// limit_text), in the page's language.
function limitText(limit, value) {
  if (limit === "turns") return value === 1 ? t("{n} turn", { n: value }) : t("{n} turns", { n: value });
  if (limit === "tokens") return t("{n} tokens", { n: Math.trunc(value).toLocaleString("en-US") });
  if (limit === "cost") return costText(value);
  return t("{s} s", { s: value.toFixed(1) });
}

const LIMIT_NAMES = { turns: "turn limit", tokens: "token limit", cost: "cost limit", wall: "wall-time limit" };

// What the card says of the limits reached. In English, the server's own message (what
// the model and the command line read too); in another language, the same said from the
// limits themselves.
function reachedText(waiting) {
  if (LANG === "en" || !waiting.reached.length) return withoutHeading(waiting.message);
  const what = waiting.reached.map((r) => t("{whose} {limit} ({allowed}) is reached: {spent} spent", {
    whose: t(r.scope === "run" ? "the run's" : "the session's"),
    limit: t(LIMIT_NAMES[r.limit] || r.limit),
    allowed: limitText(r.limit, r.allowed),
    spent: limitText(r.limit, r.spent),
  })).join(t("; "));
  return `${what}${t(". ")}${t("The run waits for the budget to be raised.")}`;
}

// The server's message begins "Budget reached: " (for the model and the CLI); on the page
// the card's or the note's heading says that.
export function withoutHeading(message) {
  const text = message.replace(/^Budget reached: /, "");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

// The header's budget line and its tooltip, from /state's budget view (empty without one).
export function budgetUse(view) {
  if (!view) return { text: "", title: "" };
  const scopes = [];
  if (limited(view.run_budget) && view.run_spent) scopes.push(["run", view.run_budget, view.run_spent]);
  if (limited(view.session_budget) && view.session_spent) scopes.push(["session", view.session_budget, view.session_spent]);
  const heading = { run: "run budget: {used}", session: "session budget: {used}" };
  const text = scopes
    .map(([scope, budget, spent]) => t(scopes.length > 1 ? heading[scope] : "budget: {used}", { used: used(budget, spent).join(" · ") }))
    .join(t("; "));
  const title = scopes.map(([scope, budget, spent]) => {
    const then = budget.on_exceed === "ask" ? t("the run waits for a raise") : t("the run stops");
    const unpriced = spent.unpriced_models && spent.unpriced_models.length
      ? t(" (no price for {models}: not counted in cost)", { models: spent.unpriced_models.join(", ") }) : "";
    return t("{whose}: when a limit is reached, {then}{unpriced}.", { whose: t(WHOSE[scope]), then, unpriced });
  }).join(" ");
  return { text, title };
}

export class BudgetCard {
  constructor(root, { raise }) {
    this.root = root;
    this.raise = raise; // (scope, budget) -> Promise<BudgetView>
    this.waiting = null; // {runId, message, scopes}
    this.view = null; // /state's budget view
    this.form = null; // the inputs of the wait shown
    this.card = null; // its parts, built once per wait
    this.error = null;
    this.sending = false;
    root.replaceChildren();
    root.hidden = true;
  }

  onEvent(event) {
    const p = event.payload;
    if (event.type === "budget_reached" && !p.stopped) {
      // Limits reached together come as one event each, with the same message.
      const same = this.waiting && this.waiting.runId === event.run_id && this.waiting.message === p.message;
      const scopes = same ? [...new Set([...this.waiting.scopes, p.scope])] : [p.scope];
      const reached = [...(same ? this.waiting.reached : []), { scope: p.scope, limit: p.limit, allowed: p.allowed, spent: p.spent }];
      if (!same) this.forget();
      this.waiting = { runId: event.run_id, message: p.message, scopes, reached };
      if (same) this.card = null; // a scope more: its inputs join the card
      this.form = null;
      this.render();
    } else if (event.type === "budget_raised") {
      this.forget();
    } else if (event.type === "agent_end" && this.waiting && this.waiting.runId === p.run_id) {
      this.forget();
    }
  }

  // /state's budget view. `rebuild` (the page's first load): a run that waits shows its
  // card even when its budget_reached event is older than the events loaded. Later views
  // only bring the limits: whether the run waits is the events' to say, in their order.
  setView(view, { rebuild = false, runId = null } = {}) {
    this.view = view || null;
    if (rebuild && !this.waiting && view && view.waiting.length && view.waiting_message) {
      this.waiting = {
        runId, message: view.waiting_message, scopes: [...new Set(view.waiting.map((r) => r.scope))], reached: view.waiting,
      };
    }
    this.render();
  }

  forget() {
    this.waiting = null;
    this.form = null;
    this.card = null;
    this.error = null;
    this.render();
  }

  budgetOf(scope) {
    if (!this.view) return null;
    return scope === "run" ? this.view.run_budget : this.view.session_budget;
  }

  // The card is built once per wait and then changed in place: the views that come every
  // few seconds while the run waits never take the focus or the typing from its inputs.
  render() {
    if (!this.waiting) {
      this.card = null;
      this.root.replaceChildren();
      this.root.hidden = true;
      return;
    }
    if (!this.card) this.card = this.buildCard();
    const { message, slot, button, error } = this.card;
    message.textContent = reachedText(this.waiting);
    if (!this.form && this.view) {
      this.form = this.buildForm();
      slot.replaceChildren(this.form.element);
    }
    button.disabled = !this.form || this.sending;
    button.textContent = this.sending ? t("Raising…") : t("Raise");
    error.textContent = this.error || "";
    error.hidden = !this.error;
    this.root.hidden = false;
  }

  buildCard() {
    const card = {
      message: el("div", { class: "budget-message" }),
      slot: el("div", { class: "budget-slot" }, el("div", { class: "budget-loading" }, t("Reading the budget…"))),
      button: el("button", { type: "button", class: "budget-raise", onclick: () => this.send() }, t("Raise")),
      error: el("div", { class: "budget-error", role: "alert", hidden: true }),
    };
    this.root.replaceChildren(el("div", { class: "budget-card", role: "group", "aria-label": t("Budget") },
      el("div", { class: "budget-head" }, t("Waits for a budget raise")),
      card.message,
      card.slot,
      el("div", { class: "budget-actions" }, card.button,
        el("span", { class: "budget-hint" }, t("An empty box removes that limit. Stop, in the header, ends the run."))),
      card.error));
    return card;
  }

  // One row of inputs per budget the run waits on, each limit of it at its current value.
  buildForm() {
    const groups = [];
    const inputs = []; // {scope, key, field, input}
    for (const scope of this.waiting.scopes) {
      const budget = this.budgetOf(scope) || {};
      const row = [];
      for (const field of FIELDS) {
        if (!isSet(budget[field.key])) continue;
        const input = el("input", {
          type: "number", min: "0", step: field.step, value: String(budget[field.key]),
          class: "budget-input", dataset: { scope, limit: field.key }, "aria-label": `${t(WHOSE[scope])}: ${t(field.label)}`,
        });
        input.addEventListener("keydown", (e) => { if (e.key === "Enter") this.send(); });
        inputs.push({ scope, field, input });
        row.push(el("label", { class: "budget-limit" }, t(field.label), input));
      }
      groups.push(el("div", { class: "budget-scope", dataset: { scope } },
        el("span", { class: "budget-whose" }, t(WHOSE[scope])), ...row));
    }
    return { element: el("div", { class: "budget-limits" }, ...groups), inputs };
  }

  // The whole new budget of each scope waited on: its shown limits as typed, the rest as
  // they were. A box that does not hold a number is named, and nothing is sent.
  newBudgets() {
    const budgets = new Map();
    for (const scope of this.waiting.scopes) budgets.set(scope, { ...(this.budgetOf(scope) || {}) });
    for (const { scope, field, input } of this.form.inputs) {
      if (input.validity.badInput) throw new Error(t("{whose}: {label} is not a number", { whose: t(WHOSE[scope]), label: t(field.label) }));
      const text = input.value.trim();
      budgets.get(scope)[field.key] = text === "" ? null : Number(text);
    }
    return budgets;
  }

  async send() {
    if (!this.waiting || !this.form || this.sending) return;
    const waiting = this.waiting;
    this.sending = true;
    this.error = null;
    this.render();
    try {
      for (const [scope, budget] of this.newBudgets()) {
        this.view = await this.raise(scope, budget);
      }
      if (this.waiting === waiting) this.forget(); // the budget_raised event follows
    } catch (error) {
      if (this.waiting === waiting) this.error = error.message;
    }
    this.sending = false;
    this.render();
  }
}
