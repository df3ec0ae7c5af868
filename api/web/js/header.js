// The run header: the session's name, the phase, turn, tokens and elapsed time of the
// latest run, what it and the whole session cost (and the prompt cache's hit rate), what
// the budget allows and what is spent when there is one, the model, the Budget button (the
// session budget's editor), and the Stop button.

import { budgetUse } from "./budget.js";
import { costText, rateText } from "./cost.js";
import { el, shortId } from "./dom.js";
import { t } from "./i18n.js";

// Phases as the header says them (the others by their name).
const PHASE_TEXT = {
  turn: "working",
  retry: "retrying the model call",
  compaction: "compacting",
  branch_summary: "summarising a branch",
  awaiting_approval: "waiting for approval",
  awaiting_input: "waiting for your answer",
  awaiting_host: "waiting for its machine",
  awaiting_budget: "waiting for a budget raise",
};

// Every token of a usage once: reasoning tokens are counted in the output tokens already.
function totalTokens(usage) {
  if (!usage) return 0;
  return ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
    .reduce((sum, key) => sum + (typeof usage[key] === "number" ? usage[key] : 0), 0);
}

function elapsedText(ms) {
  const s = ms / 1000;
  if (s < 60) return t("{s} s", { s: s.toFixed(1) });
  const m = Math.floor(s / 60);
  return t("{m} min {s} s", { m, s: Math.round(s - m * 60) });
}

export class RunHeader {
  constructor(root, { stop, rename, compact, editBudget }) {
    this.name = el("h2", { class: "name" });
    this.renameButton = el("button", { type: "button", class: "rename", onclick: () => this.startRename() }, t("Rename"));
    this.phase = el("span", { class: "phase", dataset: { phase: "idle" } }, t("idle"));
    this.turn = el("span", { class: "turn" });
    this.tokens = el("span", { class: "tokens" });
    this.elapsed = el("span", { class: "elapsed" });
    this.cost = el("span", { class: "cost" });
    this.budget = el("span", { class: "budget" });
    this.model = el("span", { class: "model" });
    this.budgetButton = el("button", {
      type: "button", class: "edit-budget", "aria-expanded": "false", title: t("What the session's runs together may spend"),
      onclick: () => editBudget(),
    }, t("Budget"));
    this.compactButton = el("button", { type: "button", class: "compact", onclick: () => compact() }, t("Compact"));
    this.stopButton = el("button", { type: "button", class: "stop", onclick: () => stop() }, t("Stop"));
    this.workerBanner = el("div", { class: "banner worker-down", role: "status", hidden: true },
      t("No worker is answering for this run: it is paused, nothing is lost, and it goes on when a worker is back."));
    this.onRename = rename;
    root.replaceChildren(
      el("div", { class: "run-header" },
        el("div", { class: "title" }, this.name, this.renameButton),
        el("div", { class: "figures" }, this.phase, this.turn, this.tokens, this.elapsed, this.cost, this.budget, this.model),
        el("div", { class: "actions" }, this.budgetButton, this.compactButton, this.stopButton)),
      this.workerBanner);
    this.run = null;
    this.currentTurn = null;
    this.turnRun = null; // the run whose turn `currentTurn` counts
    // The model's replies that came (message_end) before their turn is stored: entry id ->
    // {runId, turn, usage}. The store's figures change at save points; these show at once.
    this.streamed = new Map();
    this.costs = { run: null, session: null };
  }

  setSession(session) {
    this.session = session;
    if (!this.renaming) this.name.textContent = session.name || t("Session {id}", { id: shortId(session.id) });
    this.name.title = this.name.textContent; // whole, where a long one ends in "…"
    if (this.offline === undefined) this.model.textContent = session.config.model;
  }

  setStatus(status) {
    this.offline = status.offline_model;
    this.model.textContent = this.offline ? t("offline model (scripted)") : status.model;
    this.model.title = this.offline
      ? t("No API key is set for {model}: a local scripted model answers in its place. Its replies are not the model's.", { model: status.model })
      : "";
    this.workerBanner.hidden = status.worker_answering !== false;
  }

  setRun(run) {
    // A run's own phases end with it: once the store has its outcome the session is idle,
    // even while its workflow takes its last step.
    const over = run.latest && run.latest.status !== "running";
    this.setPhase(over && (run.phase === "turn" || run.phase === "retry") ? "idle" : run.phase);
    this.run = run.latest;
    const latest = this.run;
    // The counter is the turn of the run the events speak of: the store's latest run may
    // still be the one before while a new run's first events arrive.
    if (latest && latest.run_id === this.turnRun) {
      this.currentTurn = latest.status === "running" ? Math.max(latest.turns, this.currentTurn || 0) : latest.turns;
    } else if (latest && (!this.turnRun || latest.status === "running")) {
      this.turnRun = latest.run_id;
      this.currentTurn = latest.turns;
    }
    this.tick();
  }

  // The latest run's cost and the session's, from /state: they change at save points.
  setCost(runCost, sessionCost) {
    this.costs = { run: runCost || null, session: sessionCost || null };
    this.tick();
  }

  // The usage of the replies that came in the open run and are not stored yet (their
  // turn is after the store's last), and the latest run's usage with them.
  unstored() {
    const run = this.run;
    if (!run || run.status !== "running") return 0;
    let usage = 0;
    for (const reply of this.streamed.values()) {
      if (reply.runId === run.run_id && reply.turn > (run.turns || 0)) usage += totalTokens(reply.usage);
    }
    return usage;
  }

  // What is known, said as it is known: before the run's first reply, that its figures
  // come with it (never "0 tokens · $0.0000"); a reply not yet stored shows its tokens at
  // once, its cost when its turn is saved (the price is the server's).
  showFigures() {
    const run = this.run;
    const running = Boolean(run) && run.status === "running";
    const waiting = this.unstored();
    const stored = run ? totalTokens(run.usage) : 0;
    if (running && !stored && !waiting) this.tokens.textContent = t("tokens and cost come with the model's first reply");
    else this.tokens.textContent = run ? t("{n} tokens", { n: (stored + waiting).toLocaleString() }) : "";
    const { run: runCost, session: sessionCost } = this.costs;
    const parts = [];
    const spent = (cost) => Boolean(cost) && totalTokens(cost.usage) > 0;
    if (running && waiting) {
      parts.push(spent(runCost)
        ? t("run {cost} before this turn", { cost: costText(runCost.cost_usd, runCost.unpriced_models) })
        : t("cost counted when this turn ends"));
    } else if (runCost && (spent(runCost) || !running)) {
      parts.push(t("run {cost}", { cost: costText(runCost.cost_usd, runCost.unpriced_models) }));
    }
    if (sessionCost && (spent(sessionCost) || !running)) {
      parts.push(t("session {cost}", { cost: costText(sessionCost.cost_usd, sessionCost.unpriced_models) }));
    }
    if (spent(runCost) && rateText(runCost.cache_hit_rate)) parts.push(rateText(runCost.cache_hit_rate));
    this.cost.textContent = parts.join(" · ");
    const sessionRate = sessionCost ? rateText(sessionCost.cache_hit_rate) : "";
    this.cost.title = spent(sessionCost)
      ? t("The session: {n} tokens", { n: totalTokens(sessionCost.usage).toLocaleString() }) + (sessionRate ? `, ${sessionRate}` : "")
      : "";
  }

  // What the budget allows and what is spent, from /state's budget view.
  setBudget(view) {
    const { text, title } = budgetUse(view);
    this.budget.textContent = text;
    this.budget.title = title;
  }

  setPhase(phase) {
    this.phase.textContent = t(PHASE_TEXT[phase] || phase);
    this.phase.dataset.phase = phase;
    this.stopButton.disabled = phase === "idle";
    if (phase === "idle") this.workerBanner.hidden = true;
  }

  onEvent(event) {
    const p = event.payload;
    const message = p.message;
    if ((event.type === "message_start" || event.type === "message_end") && message && message.role === "assistant") {
      // A reply made again (a retry) starts again: only its last ending counts.
      this.streamed.delete(p.entry_id);
      if (event.type === "message_end" && message.usage) {
        this.streamed.set(p.entry_id, { runId: event.run_id || this.turnRun, turn: this.currentTurn || 1, usage: message.usage });
      }
    }
    if (event.type === "turn_start") {
      this.currentTurn = p.turn;
      this.turnRun = event.run_id || this.turnRun;
    } else if (event.type === "phase_changed") this.setPhase(p.phase);
    else if (event.type === "agent_start") {
      this.streamed.clear(); // the runs before are stored whole
      this.setPhase("turn");
      this.currentTurn = 0; // a new run counts its turns from 1
      this.turnRun = event.run_id || p.run_id;
    }
    else if (event.type === "agent_end" && this.run && this.run.run_id === p.run_id) {
      this.run = { ...this.run, status: p.status, turns: p.turns, usage: p.usage, ended_at: event.created_at };
      this.setPhase("idle");
    }
    this.tick();
  }

  tick() {
    const run = this.run;
    this.turn.textContent = this.currentTurn ? t("turn {n}", { n: this.currentTurn }) : "";
    this.showFigures();
    if (run) {
      const end = run.ended_at || (run.status === "running" ? Date.now() : run.updated_at);
      this.elapsed.textContent = elapsedText(Math.max(0, end - run.started_at));
    } else {
      this.elapsed.textContent = "";
    }
  }

  startRename() {
    if (this.renaming) return;
    this.renaming = true;
    const input = el("input", { class: "rename-input", value: this.name.textContent, "aria-label": t("Session name") });
    const finish = async (save) => {
      if (!this.renaming) return;
      this.renaming = false;
      const name = input.value.trim();
      input.replaceWith(this.name);
      if (save && name && name !== this.name.textContent) {
        this.name.textContent = name;
        await this.onRename(name);
      }
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") finish(true);
      if (event.key === "Escape") finish(false);
    });
    input.addEventListener("blur", () => finish(true));
    this.name.replaceWith(input);
    input.focus();
    input.select();
  }
}
