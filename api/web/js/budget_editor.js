// The session budget's editor (domain/budgets.py): what all the session's runs together may
// spend, opened from the run header's "Budget" button or a budget stop's note, whether
// the session is idle or a run is going (a running run uses the new budget from its next
// model call). It shows each limit with what the session has spent next to it, so a
// person sees what they raise past; an empty box is no limit. "Save" puts the whole
// budget (PUT /budget), "Remove budget" puts none.
//
// A box that does not hold a number is named before anything is sent; the server's
// refusals (a limit of 0, a cost limit for a model without a price) show in the form,
// which keeps what was typed. The editor is built once per opening: the page's refreshes
// never take the typing from it.
//
// A run that waits for a raise has its own card above the composer. A budget saved here
// while it waits on the session's budget is a new session budget: the run goes on when no
// limit is reached any more (and its card goes), stops when the budget now says stop, and
// waits on otherwise.

import { costText } from "./cost.js";
import { el } from "./dom.js";
import { t } from "./i18n.js";

// Labels are catalogue keys (i18n.js), said with t() where shown.
const FIELDS = [
  {
    key: "max_turns", label: "Turns", integer: true,
    spent: (s) => (s.turns === 1 ? t("{n} turn spent", { n: s.turns }) : t("{n} turns spent", { n: s.turns })),
  },
  { key: "max_tokens", label: "Tokens", integer: true, spent: (s) => t("{n} tokens spent", { n: s.tokens.toLocaleString("en-US") }) },
  { key: "max_cost_usd", label: "Cost (US$)", spent: (s) => t("{cost} spent", { cost: costText(s.cost_usd) }) },
  { key: "max_wall_s", label: "Wall time (s)", spent: (s) => t("{s} s spent", { s: s.wall_s.toFixed(1) }) },
];
const LABELS = Object.fromEntries(FIELDS.map(({ key, label }) => [key, label]));
const ACTIONS = [
  { value: "stop", label: "stop the run" },
  { value: "ask", label: "wait for a raise" },
];

// The server names a refused field as FastAPI does ("budget.max_turns: Input should be
// greater than or equal to 1"); the form says it with the box's label ("Turns should be
// greater than or equal to 1") and marks that box. The rules a limit has (domain/budgets.py:
// at least 1, or more than 0) are said in the page's language; other refusals in the
// server's words.
const REFUSED_FIELD = /\bbudget\.(max_\w+): Input( should be (greater than or equal to|greater than) (-?[\d.]+))?/g;
const RULES = {
  "greater than or equal to": "{label} should be greater than or equal to {n}",
  "greater than": "{label} should be greater than {n}",
};

function refusal(message) {
  const keys = [...message.matchAll(REFUSED_FIELD)].map((m) => m[1]).filter((key) => key in LABELS);
  const text = message.replace(REFUSED_FIELD, (whole, key, rest, rule, n) => {
    if (!(key in LABELS)) return whole;
    const label = t(LABELS[key]);
    return rule ? t(RULES[rule], { label, n }) : `${label}${whole.slice(whole.indexOf(": Input") + 7)}`;
  });
  return { text, keys };
}

class Unsendable extends Error {
  constructor(message, key) {
    super(message);
    this.key = key;
  }
}

function isSet(value) {
  return value !== null && value !== undefined;
}

export class BudgetEditor {
  constructor(root, { load, save }) {
    this.root = root;
    this.load = load; // () -> Promise<BudgetView>
    this.save = save; // (budget | null) -> Promise<BudgetView>
    this.parts = null; // the open form's parts
    this.opening = null;
    this.saving = false;
    this.onToggle = () => {};
    root.replaceChildren();
    root.hidden = true;
  }

  get isOpen() {
    return !this.root.hidden;
  }

  toggle() {
    if (this.isOpen) this.close();
    else this.open();
  }

  // Opens the editor with the stored budget and spending (read afresh); open already, it
  // only takes the focus.
  async open() {
    if (this.isOpen) {
      if (this.parts) this.parts.inputs[0].input.focus();
      return;
    }
    this.root.replaceChildren(this.frame(el("div", { class: "budget-loading" }, t("Reading the budget…"))));
    this.root.hidden = false;
    this.onToggle(true);
    const opening = (this.opening = {});
    let view;
    try {
      view = await this.load();
    } catch (error) {
      if (this.opening !== opening) return;
      this.root.replaceChildren(this.frame(el("div", { class: "budget-error", role: "alert" }, error.message)));
      return;
    }
    if (this.opening !== opening || !this.isOpen) return;
    this.parts = this.buildForm(view);
    this.root.replaceChildren(this.parts.element);
    this.parts.inputs[0].input.focus();
  }

  close() {
    this.opening = null;
    this.parts = null;
    this.root.replaceChildren();
    this.root.hidden = true;
    this.onToggle(false);
  }

  frame(...children) {
    return el("form", { class: "budget-editor", "aria-label": t("Session budget"), novalidate: true },
      el("div", { class: "budget-head" }, t("Session budget"),
        el("span", { class: "budget-hint" }, " · ", t("what all the session's runs together may spend"))),
      ...children);
  }

  buildForm(view) {
    const budget = view.session_budget || {};
    const spent = view.session_spent;
    const inputs = [];
    const rows = FIELDS.map((field) => {
      const input = el("input", {
        type: "text", inputmode: field.integer ? "numeric" : "decimal", class: "budget-input",
        value: isSet(budget[field.key]) ? String(budget[field.key]) : "", placeholder: t("no limit"),
        dataset: { limit: field.key }, "aria-label": `${t("Session budget")}: ${t(field.label)}`,
      });
      inputs.push({ field, input });
      return el("label", { class: "budget-limit", dataset: { limit: field.key } },
        el("span", { class: "budget-label" }, t(field.label)), input,
        el("span", { class: "budget-spent" }, spent ? field.spent(spent) : ""));
    });
    const current = budget.on_exceed || "stop";
    const radios = ACTIONS.map(({ value, label }) => {
      const radio = el("input", { type: "radio", name: "on_exceed", value, checked: value === current });
      return { value, radio, element: el("label", { class: "budget-choice" }, radio, t(label)) };
    });
    const unpriced = spent && spent.unpriced_models && spent.unpriced_models.length
      ? el("div", { class: "budget-hint" }, t("No price for {models}: its turns count nothing toward cost.", { models: spent.unpriced_models.join(", ") }))
      : null;
    const error = el("div", { class: "budget-error", role: "alert", hidden: true });
    const saveButton = el("button", { type: "submit", class: "budget-save" }, t("Save"));
    const removeButton = el("button", { type: "button", class: "budget-remove", disabled: !view.session_budget, onclick: () => this.send(null) }, t("Remove budget"));
    const closeButton = el("button", { type: "button", class: "budget-close", onclick: () => this.close() }, t("Close"));
    const element = this.frame(
      el("div", { class: "budget-rows" }, ...rows),
      el("div", { class: "budget-when" }, el("span", {}, t("When a limit is reached:")), ...radios.map((r) => r.element)),
      unpriced,
      el("div", { class: "budget-actions" }, saveButton, removeButton, closeButton,
        el("span", { class: "budget-hint" }, t("An empty box is no limit. A running run uses the new budget from its next model call."))),
      error);
    element.addEventListener("submit", (event) => { event.preventDefault(); this.send(this.typed()); });
    element.addEventListener("keydown", (event) => { if (event.key === "Escape") this.close(); });
    return { element, inputs, radios, error, saveButton, removeButton, hasBudget: Boolean(view.session_budget) };
  }

  // The budget as typed; a box that holds no number (or turns or tokens that are not
  // whole) is named, and an Error thrown before anything is sent.
  typed() {
    const budget = {};
    for (const { field, input } of this.parts.inputs) {
      const text = input.value.trim();
      if (text === "") {
        budget[field.key] = null;
        continue;
      }
      const value = Number(text);
      const values = { label: t(field.label), text };
      if (!Number.isFinite(value)) return new Unsendable(t("{label}: \"{text}\" is not a number (leave the box empty for no limit)", values), field.key);
      if (field.integer && !Number.isInteger(value)) return new Unsendable(t("{label}: \"{text}\" is not a whole number", values), field.key);
      budget[field.key] = value;
    }
    budget.on_exceed = this.parts.radios.find((r) => r.radio.checked).value;
    return budget;
  }

  async send(budget) {
    const parts = this.parts;
    if (!parts || this.saving) return;
    if (budget instanceof Unsendable) {
      this.showError(parts, budget.message, [budget.key]);
      return;
    }
    this.saving = true;
    this.showError(parts, null);
    parts.saveButton.disabled = true;
    parts.removeButton.disabled = true;
    try {
      await this.save(budget);
      if (this.parts === parts) this.close();
    } catch (error) {
      const { text, keys } = refusal(error.message);
      if (this.parts === parts) this.showError(parts, t("Not saved: {why}", { why: text }), keys);
    }
    this.saving = false;
    if (this.parts === parts) {
      parts.saveButton.disabled = false;
      parts.removeButton.disabled = !parts.hasBudget;
    }
  }

  // The error under the form; the boxes it names are marked (aria-invalid), the others not.
  showError(parts, message, keys = []) {
    parts.error.textContent = message || "";
    parts.error.hidden = !message;
    for (const { field, input } of parts.inputs) {
      if (keys.includes(field.key)) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    }
  }
}
