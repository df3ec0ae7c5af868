// The activity area (docs/SPEC.md, the web page): run events as a readable timeline. Streamed
// deltas and tool output are left to the conversation; every other event is one line,
// named by its type, in seq order.

import { clockTime, duration, el, shortId } from "./dom.js";
import { pointWords } from "./guidance.js";
import { t } from "./i18n.js";

const MAX_ROWS = 1000;
const QUIET = new Set(["message_update", "message_start", "message_end", "tool_execution_update"]);
const LIMIT_NAMES = { turns: "turn", tokens: "token", cost: "cost", wall: "wall-time" };
const PHASES = { turn: "working", retry: "retrying the model call", awaiting_budget: "waiting for a budget raise", awaiting_host: "waiting for its machine", awaiting_input: "waiting for your answer" };
const ANSWERED = { answered: "answered", timeout: "not answered in time", withdrawn: "withdrawn" };
const QUEUES = { steering: "A steering message", follow_up: "A follow-up", next_turn: "A queued input" };

function tokens(usage) {
  if (!usage) return 0;
  return Object.values(usage).reduce((sum, n) => sum + (typeof n === "number" ? n : 0), 0);
}

function describe(type, p) {
  switch (type) {
    case "agent_start": return "Run started";
    case "agent_end":
      return `Run ${p.status} after ${p.turns} turn(s), ${tokens(p.usage)} tokens${p.error ? `: ${p.error}` : ""}`;
    case "turn_start": return `Turn ${p.turn} started`;
    case "turn_end": return `Turn ${p.turn} ended${p.stop_reason ? ` (${p.stop_reason})` : ""}`;
    case "save_point":
      return `Save point after turn ${p.turn}: ${p.entries_committed} entries stored` +
        (p.pending_writes_flushed ? `, ${p.pending_writes_flushed} pending writes` : "");
    case "tool_execution_start": {
      const shown = p.args.command ?? p.args.path ?? p.args.pattern ?? "";
      return `Tool ${p.tool_name} started${shown ? `: ${typeof shown === "string" ? shown : JSON.stringify(shown)}` : ""}`;
    }
    case "tool_execution_end": {
      const details = p.result.details || {};
      const how = details.cancelled ? "stopped" : details.interrupted ? "interrupted" : p.result.is_error ? "failed" : "done";
      return `Tool ${p.tool_name} ${how} (${duration(p.duration_ms)})`;
    }
    case "question_asked": return `The agent asks: ${p.question}`;
    case "question_answered":
      return `Question ${ANSWERED[p.status] || p.status}${p.by ? ` by ${p.by}` : ""}${p.answer ? `: ${p.answer}` : ""}`;
    case "retry_scheduled":
      return `Model call failed (${p.error}); retry ${p.attempt} in ${duration(p.delay_ms)}`;
    case "phase_changed": return `Phase: ${PHASES[p.phase] || p.phase}`;
    case "queue_consumed": return `${QUEUES[p.queue] || p.queue} reached the model (turn ${p.turn})`;
    case "run_aborted": {
      const cleared = p.cleared_steering.length + p.cleared_follow_ups.length;
      return `Run stopped by the user in turn ${p.turn}${cleared ? `; ${cleared} queued message(s) dropped` : ""}`;
    }
    case "runtime_guidance_injected": {
      const extra = [];
      if (p.interrupted.length) extra.push(`${p.interrupted.length} running tool call(s) interrupted`);
      if (p.skipped.length) extra.push(`${p.skipped.length} planned call(s) skipped`);
      return `Guidance reached the model ${pointWords(p.point)} (turn ${p.turn})${extra.length ? `; ${extra.join(", ")}` : ""}`;
    }
    case "runtime_guidance_replan_before_tools":
      return `Guidance arrived before the planned tools ran: ${p.skipped.length} call(s) not run, the model re-plans`;
    case "compaction_start": return `Compaction started (${p.reason}, ${p.tokens_before} tokens)`;
    case "compaction_end": return `Context compacted: ${p.tokens_before} tokens into a ${p.summary_chars}-character summary`;
    case "branch_summary": return `Branch summarised (${p.summary_chars} characters)`;
    case "continued_as_new":
      return `Continued as new after turn ${p.turn} (history ${p.history_events} events, ${Math.round(p.history_bytes / 1024)} KB)`;
    case "budget_reached":
      return `The ${p.scope}'s ${LIMIT_NAMES[p.limit] || p.limit} limit is reached: the run ${p.stopped ? "stops" : "waits for a raise"}`;
    case "budget_raised": return `The ${p.scope}'s budget was raised${p.by ? ` by ${p.by}` : ""}`;
    case "subagent_started": return `Sub-agent ${p.name} started in a session of its own`;
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
    const row = el("li", { dataset: { seq: String(event.seq), type: event.type }, class: `event ${event.type}` },
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
