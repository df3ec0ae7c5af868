// The activity area (docs/SPEC.md, the web page): run events as a readable timeline. Streamed
// deltas and tool output are left to the conversation; every other event is one line,
// named by its type, in seq order.

import { denialReason, denied } from "./conversation.js";
import { clockTime, duration, el, shortId } from "./dom.js";
import { pointWords } from "./guidance.js";
import { t } from "./i18n.js";

const MAX_ROWS = 1000;
const QUIET = new Set(["message_update", "message_start", "message_end", "tool_execution_update"]);
const LIMIT_NAMES = { turns: "turn", tokens: "token", cost: "cost", wall: "wall-time" };
const PHASES = { turn: "working", retry: "retrying the model call", awaiting_budget: "waiting for a budget raise", awaiting_host: "waiting for its machine", awaiting_input: "waiting for your answer", awaiting_approval: "waiting for approval" };
const ANSWERED = { answered: "answered", timeout: "not answered in time", withdrawn: "withdrawn" };
const QUEUES = { steering: "A steering message", follow_up: "A follow-up", next_turn: "A queued input" };
const RUN_ENDS = { completed: "completed", aborted: "stopped", error: "failed" };
const DECISIONS = { approve: "approved", always: "approved (always)", deny: "denied", timeout: "not approved in time", withdrawn: "withdrawn" };

// "1 turn", "2 turns": English says one or many, Chinese neither (its words carry no
// number); each form is a catalogue entry of its own.
function count(n, one, many) {
  return t(n === 1 ? one : many, { n: n.toLocaleString() });
}

function tokens(usage) {
  if (!usage) return 0;
  return Object.values(usage).reduce((sum, n) => sum + (typeof n === "number" ? n : 0), 0);
}

function shownArgs(args) {
  const shown = (args || {}).command ?? (args || {}).path ?? (args || {}).pattern ?? "";
  return typeof shown === "string" ? shown : JSON.stringify(shown);
}

function describe(type, p) {
  switch (type) {
    case "agent_start": return t("Run started");
    case "agent_end":
      return t("Run {status} after {turns}, {tokens}", {
        status: t(RUN_ENDS[p.status] || p.status),
        turns: count(p.turns, "{n} turn", "{n} turns"),
        tokens: count(tokens(p.usage), "{n} token", "{n} tokens"),
      }) + (p.error ? `: ${p.error}` : "");
    case "turn_start": return t("Turn {n} started", { n: p.turn });
    case "turn_end":
      return t("Turn {n} ended", { n: p.turn }) + (p.stop_reason ? ` (${p.stop_reason})` : "");
    case "save_point":
      return t("Save point after turn {turn}: {entries}", {
        turn: p.turn,
        entries: count(p.entries_committed, "{n} entry stored", "{n} entries stored"),
      }) + (p.pending_writes_flushed ? count(p.pending_writes_flushed, ", {n} pending write", ", {n} pending writes") : "");
    case "tool_execution_start": {
      const shown = shownArgs(p.args);
      return shown ? t("Tool {name} started: {what}", { name: p.tool_name, what: shown }) : t("Tool {name} started", { name: p.tool_name });
    }
    case "tool_execution_end": {
      if (denied(p.result)) {
        const why = denialReason(p.result);
        return t("Tool {name} denied, not run", { name: p.tool_name }) + (why ? `: ${why}` : "");
      }
      const details = p.result.details || {};
      const how = details.cancelled ? "stopped" : details.interrupted ? "interrupted" : p.result.is_error ? "failed" : "done";
      return t(`Tool {name} ${how} ({time})`, { name: p.tool_name, time: duration(p.duration_ms) });
    }
    case "approval_requested":
      return t("Tool {name} waits for approval: {what}", { name: p.tool_name, what: p.args_preview });
    case "approval_decided":
      return t("Tool call {decision}", { decision: t(DECISIONS[p.decision] || p.decision) })
        + (p.by ? t(" by {who}", { who: p.by }) : "") + (p.reason ? `: ${p.reason}` : "");
    case "question_asked": return t("The agent asks: {question}", { question: p.question });
    case "question_answered":
      return t("Question {status}", { status: t(ANSWERED[p.status] || p.status) })
        + (p.by ? t(" by {who}", { who: p.by }) : "") + (p.answer ? `: ${p.answer}` : "");
    case "retry_scheduled":
      return t("Model call failed ({error}); retry {attempt} in {delay}", { error: p.error, attempt: p.attempt, delay: duration(p.delay_ms) });
    case "phase_changed": return t("Phase: {phase}", { phase: t(PHASES[p.phase] || p.phase) });
    case "queue_consumed":
      return t("{what} reached the model (turn {turn})", { what: t(QUEUES[p.queue] || p.queue), turn: p.turn });
    case "run_aborted": {
      const cleared = p.cleared_steering.length + p.cleared_follow_ups.length;
      return t("Run stopped by the user in turn {turn}", { turn: p.turn })
        + (cleared ? count(cleared, "; {n} queued message dropped", "; {n} queued messages dropped") : "");
    }
    case "runtime_guidance_injected": {
      const extra = [];
      if (p.interrupted.length) extra.push(count(p.interrupted.length, "{n} running tool call interrupted", "{n} running tool calls interrupted"));
      if (p.skipped.length) extra.push(count(p.skipped.length, "{n} planned call skipped", "{n} planned calls skipped"));
      return t("Guidance reached the model {where} (turn {turn})", { where: pointWords(p.point), turn: p.turn })
        + (extra.length ? `${t("; ")}${extra.join(t(", "))}` : "");
    }
    case "runtime_guidance_replan_before_tools":
      return t("Guidance arrived before the planned tools ran: {calls}, the model re-plans", {
        calls: count(p.skipped.length, "{n} call not run", "{n} calls not run"),
      });
    case "compaction_start":
      return t("Compaction started ({reason}, {tokens})", { reason: p.reason, tokens: count(p.tokens_before, "{n} token", "{n} tokens") });
    case "compaction_end":
      return t("Context compacted: {tokens} into a summary of {chars}", {
        tokens: count(p.tokens_before, "{n} token", "{n} tokens"),
        chars: count(p.summary_chars, "{n} character", "{n} characters"),
      });
    case "branch_summary":
      return t("Branch summarised ({chars})", { chars: count(p.summary_chars, "{n} character", "{n} characters") });
    case "continued_as_new":
      return t("Continued as new after turn {turn} (history {events}, {kb} KB)", {
        turn: p.turn,
        events: count(p.history_events, "{n} event", "{n} events"),
        kb: Math.round(p.history_bytes / 1024),
      });
    case "budget_reached":
      return t(p.stopped ? "The {scope}'s {limit} limit is reached: the run stops" : "The {scope}'s {limit} limit is reached: the run waits for a raise", {
        scope: t(p.scope), limit: t(LIMIT_NAMES[p.limit] || p.limit),
      });
    case "budget_raised":
      return t("The {scope}'s budget was raised", { scope: t(p.scope) }) + (p.by ? t(" by {who}", { who: p.by }) : "");
    case "subagent_started": return t("Sub-agent {name} started in a session of its own", { name: p.name });
    default: return "";
  }
}

export class Activity {
  constructor(root) {
    this.root = root;
    this.list = el("ol", { class: "activity" });
    this.empty = el("p", { class: "empty-state" },
      t("The run's events show here as the agent works: turns, tool calls, guidance, save points."));
    root.replaceChildren(this.empty, this.list);
    // Whether the reader follows the newest events: kept while the panel is hidden (a
    // hidden panel has no scroll position to read). Scrolling up stops it, scrolling back
    // to the bottom starts it again; rows added below the reader move nothing.
    this.following = true;
    this.autoTop = 0; // where the page last scrolled the panel to
    this.onScroll = () => {
      if (!root.clientHeight) return;
      if (root.scrollHeight - root.scrollTop - root.clientHeight < 40) this.following = true;
      else if (root.scrollTop < this.autoTop - 1) this.following = false;
      this.autoTop = Math.min(this.autoTop, root.scrollTop);
    };
    root.addEventListener("scroll", this.onScroll);
  }

  close() {
    this.root.removeEventListener("scroll", this.onScroll);
  }

  // The panel is shown again (its tab, or its pane on a narrow screen).
  shown() {
    if (this.following) this.toBottom();
  }

  toBottom() {
    this.root.scrollTop = this.root.scrollHeight;
    this.autoTop = this.root.scrollTop;
  }

  add(event) {
    if (QUIET.has(event.type)) return;
    this.empty.hidden = true;
    const callId = event.payload.tool_call_id;
    // A denied call never started: its "started" row said what did not happen.
    if (event.type === "tool_execution_end" && denied(event.payload.result)) {
      for (const started of this.list.querySelectorAll("li.tool_execution_start")) {
        if (started.dataset.callId === callId) started.remove();
      }
    }
    const row = el("li", { dataset: { seq: String(event.seq), type: event.type, ...(callId ? { callId } : {}) }, class: `event ${event.type}` },
      el("time", {}, clockTime(event.created_at)),
      el("code", { class: "type" }, event.type),
      el("span", { class: "what" }, describe(event.type, event.payload)),
      event.run_id ? el("span", { class: "run", title: `run ${event.run_id}` }, shortId(event.run_id)) : null);
    this.keepAtBottom();
    this.list.append(row);
    while (this.list.children.length > MAX_ROWS) this.list.firstElementChild.remove();
  }

  // The scroll is set once per frame, after its last row: setting it after every row
  // would lay out the whole list again per event (seconds for a long session's page).
  keepAtBottom() {
    if (this.scrollPending || !this.following) return;
    this.scrollPending = true;
    requestAnimationFrame(() => {
      this.scrollPending = false;
      if (this.following) this.toBottom();
    });
  }
}
