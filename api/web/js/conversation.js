// The conversation: display messages from the store, with the part of the current turn
// that is not stored yet built from run events (streamed text, running tools). A stored
// message replaces its live version (same id), so what a reload shows is what was shown.

import { withoutHeading } from "./budget.js";
import { turnCostAttrs } from "./cost.js";
import { duration, el, textOf } from "./dom.js";
import { GuidanceTrace } from "./guidance.js";
import { renderMarkdown } from "./markdown.js";
import { SubagentLinks } from "./subagents.js";
import { LANG, t } from "./i18n.js";

const FOLD_LINES = 12;
const FOLD_CHARS = 1500;
const LIVE_OUTPUT_CHARS = 100000;

// How a call refused before it ran begins (domain/approvals.py): a person denied it, the
// approval policy does, or no one approved it in time. It never ran: no failure.
const DENIALS = ["The user denied this tool call", "The approval policy denies this call", "Not run: no one approved this call"];

export function denied(result) {
  if (!result || !(result.details || {}).not_active) return false;
  const text = textOf(result.content);
  return DENIALS.some((start) => text.startsWith(start));
}

// Why, in short: the person's reason, the policy's rule, or the approval's timeout.
export function denialReason(result) {
  const text = textOf(result.content);
  if (text.startsWith(DENIALS[0])) return (text.split("Reason: ")[1] || "").trim();
  if (text.startsWith(DENIALS[1])) return (text.match(/\((.*)\)/) || [])[1] || "";
  return t("not approved in time");
}

// `byGuidance`: guidance says it interrupted the call. Guidance and Stop cancel a running
// call alike (the same result), so that is what tells them apart: a call guidance stopped
// keeps its state when the run is stopped later.
export function toolState(result, { started, aborted, byGuidance = false }) {
  if (result) {
    const details = result.details || {};
    const text = textOf(result.content);
    if (denied(result)) return "denied";
    if (details.runtime_guidance_replan || text.startsWith("Not run:")) return "skipped";
    if (details.interrupted) return "interrupted";
    if (text.startsWith("Aborted by the user")) return "aborted";
    if (byGuidance || text.startsWith("Stopped because the user sent guidance")) return "interrupted";
    if (details.cancelled) return aborted ? "aborted" : "interrupted";
    return result.is_error ? "error" : "done";
  }
  if (aborted) return "aborted";
  return started ? "running" : "planned";
}

const STATE_LABELS = {
  planned: "planned",
  running: "running",
  done: "done",
  error: "error",
  interrupted: "interrupted",
  aborted: "aborted",
  skipped: "skipped for replan",
  denied: "denied",
};

function argumentSummary(args) {
  const shown = args.command ?? args.path ?? args.pattern ?? args.url ?? args.name ?? args.prompt ?? "";
  return typeof shown === "string" ? shown : JSON.stringify(shown);
}

export class Conversation {
  constructor(root, { onLoadEarlier, approvals = null, questions = null, editBudget = () => {} }) {
    this.root = root;
    this.editBudget = editBudget; // opens the session budget's editor (a budget stop's note)
    this.approvals = approvals; // approvals.js: the cards of calls that wait for a person
    this.questions = questions; // questions.js: the cards of `ask_user` calls that wait for an answer
    this.list = el("div", { class: "messages" });
    this.earlierButton = el("button", { class: "earlier", hidden: true, onclick: () => onLoadEarlier() }, t("Load earlier messages"));
    this.retryNotice = el("div", { class: "retry-notice", hidden: true, role: "status" });
    this.subagents = new SubagentLinks();
    this.guidance = new GuidanceTrace({ describeCall: (callId, name) => this.describeCall(callId, name) });
    this.emptyNote = el("p", { class: "empty-state", hidden: true },
      t("Nothing here yet. Type below what the agent should do and press Enter: its replies and tool calls show here."));
    root.replaceChildren(this.subagents.parentNote, this.earlierButton, this.emptyNote, this.list, this.retryNotice);
    this.entries = new Map(); // id -> {id, seq, runId, message, arrival}
    this.elements = new Map(); // id -> element
    this.tools = new Map(); // tool call id -> {started, startedAt, output, durationMs, result, runId}
    this.cards = new Map(); // tool call id -> card element
    this.callOwner = new Map(); // tool call id -> assistant entry id
    this.abortedRuns = new Set();
    this.marks = [];
    this.retry = null;
    this.arrivals = 0;
  }

  get firstSeq() {
    let first = null;
    for (const entry of this.entries.values()) {
      if (entry.seq !== null && (first === null || entry.seq < first)) first = entry.seq;
    }
    return first;
  }

  setEarlier(earlier) {
    this.earlierButton.hidden = !earlier;
  }

  addDisplay(messages) {
    for (const shown of messages) {
      const known = this.entries.get(shown.id);
      this.entries.set(shown.id, {
        id: shown.id,
        seq: shown.seq,
        runId: shown.run_id,
        message: shown.message,
        turnCost: shown.turn_cost,
        arrival: known ? known.arrival : this.arrivals++,
      });
      if (shown.message.role === "custom" && shown.message.custom_type === "abort" && shown.run_id) {
        this.abortedRuns.add(shown.run_id);
      }
      this.noteMessage(shown.id, shown.message, shown.run_id);
      this.elements.delete(shown.id); // rendered again from the stored version
    }
    this.layout();
  }

  setMarks(marks) {
    this.marks = marks;
    this.layout();
  }

  // Where guidance reached the model (guidance.js): a note there, a link on what it stopped.
  setGuidance(marks) {
    if (!this.guidance.set(marks)) return;
    for (const callId of this.cards.keys()) this.updateCard(callId);
    this.layout();
  }

  describeCall(callId, name) {
    const card = this.cards.get(callId);
    const summary = card && card.call ? argumentSummary(card.call.arguments || {}) : "";
    return summary ? el("code", {}, summary) : name;
  }

  noteMessage(id, message, runId) {
    if (message.role === "assistant") {
      for (const block of message.content || []) {
        if (block.type === "toolCall" && block.id) this.callOwner.set(block.id, id);
      }
    } else if (message.role === "toolResult") {
      const tool = this.tool(message.tool_call_id, runId);
      tool.result = { content: message.content, details: message.details, is_error: message.is_error };
      this.updateCard(message.tool_call_id);
    }
  }

  tool(callId, runId) {
    if (!this.tools.has(callId)) {
      this.tools.set(callId, { started: false, startedAt: null, output: "", durationMs: null, result: null, runId });
    }
    const tool = this.tools.get(callId);
    if (runId && !tool.runId) tool.runId = runId;
    return tool;
  }

  // Run events ----------------------------------------------------------------------

  setLinks(links) {
    this.subagents.set(links);
    for (const callId of this.cards.keys()) this.updateCard(callId);
  }

  onEvent(event) {
    const p = event.payload;
    const linked = this.subagents.onEvent(event);
    if (linked) this.updateCard(linked);
    switch (event.type) {
      case "message_start":
        this.clearRetry();
        this.live(p.entry_id, event.run_id, p.message);
        break;
      case "message_update":
        this.clearRetry();
        this.delta(p, event.run_id);
        break;
      case "message_end":
        this.live(p.entry_id, event.run_id, p.message);
        break;
      case "tool_execution_start": {
        const tool = this.tool(p.tool_call_id, event.run_id);
        tool.started = true;
        tool.startedAt = event.created_at;
        this.updateCard(p.tool_call_id);
        break;
      }
      case "tool_execution_update": {
        const tool = this.tool(p.tool_call_id, event.run_id);
        tool.output = (tool.output + p.partial).slice(-LIVE_OUTPUT_CHARS);
        this.updateCard(p.tool_call_id);
        break;
      }
      case "tool_execution_end": {
        const tool = this.tool(p.tool_call_id, event.run_id);
        tool.started = true;
        tool.durationMs = p.duration_ms;
        tool.result = p.result;
        this.updateCard(p.tool_call_id);
        break;
      }
      case "retry_scheduled":
        this.retry = { until: event.created_at + p.delay_ms, attempt: p.attempt, error: p.error };
        this.tick();
        break;
      case "run_aborted":
        this.markAborted(event.run_id);
        break;
      case "runtime_guidance_injected":
        for (const callId of this.guidance.onEvent(event)) this.updateCard(callId);
        break;
      case "agent_end":
        this.clearRetry();
        if (p.status === "aborted") this.markAborted(p.run_id);
        break;
      default:
    }
    if (this.approvals) for (const callId of this.approvals.onEvent(event)) this.updateCard(callId);
    if (this.questions) for (const callId of this.questions.onEvent(event)) this.updateCard(callId);
  }

  markAborted(runId) {
    if (!runId) return;
    this.abortedRuns.add(runId);
    for (const [callId, tool] of this.tools) if (tool.runId === runId) this.updateCard(callId);
  }

  // message_start (again, when a model call is made again: what was shown of it goes) and
  // message_end both carry the whole message so far.
  live(id, runId, message) {
    const known = this.entries.get(id);
    if (known && known.seq !== null) return; // stored already: the store wins
    const copy = structuredClone(message);
    this.entries.set(id, { id, seq: null, runId, message: copy, arrival: known ? known.arrival : this.arrivals++ });
    this.noteMessage(id, copy, runId);
    this.elements.delete(id);
    this.layout();
  }

  delta(p, runId) {
    let entry = this.entries.get(p.entry_id);
    if (entry && entry.seq !== null) return;
    if (!entry) {
      // The stream began before what this page loaded: show what comes from here on.
      entry = { id: p.entry_id, seq: null, runId, message: { role: "assistant", content: [] }, arrival: this.arrivals++ };
      this.entries.set(p.entry_id, entry);
    }
    const content = entry.message.content;
    const fresh = !content[p.content_index];
    if (fresh) {
      content[p.content_index] =
        p.kind === "text" ? { type: "text", text: "" }
        : p.kind === "thinking" ? { type: "thinking", thinking: "" }
        : { type: "toolCall", id: "", name: p.tool_name || "tool", arguments: {}, partial: "" };
    }
    const block = content[p.content_index];
    if (block.type === "text") block.text += p.delta;
    else if (block.type === "thinking") block.thinking += p.delta;
    else block.partial = (block.partial || "") + p.delta;
    const element = this.elements.get(p.entry_id);
    const blockElement = element && element.querySelector(`[data-block="${p.content_index}"]`);
    if (!fresh && blockElement) {
      blockElement.replaceWith(this.renderBlock(entry, block, p.content_index));
    } else {
      this.elements.delete(p.entry_id);
      this.layout();
    }
  }

  // Retries -------------------------------------------------------------------------

  clearRetry() {
    if (!this.retry) return;
    this.retry = null;
    this.retryNotice.hidden = true;
  }

  tick() {
    const now = Date.now();
    if (this.retry) {
      const left = Math.max(0, Math.ceil((this.retry.until - now) / 1000));
      this.retryNotice.hidden = false;
      this.retryNotice.textContent =
        `The model call failed (${this.retry.error}). ` +
        (left > 0 ? `Retry ${this.retry.attempt} in ${left} s…` : `Retry ${this.retry.attempt} now…`);
    }
    for (const [callId, tool] of this.tools) {
      if (tool.started && !tool.result && tool.startedAt) {
        const card = this.cards.get(callId);
        const time = card && card.querySelector(".tool-time");
        if (time) time.textContent = duration(Math.max(0, now - tool.startedAt));
      }
    }
  }

  // Rendering -----------------------------------------------------------------------

  visible(entry) {
    const message = entry.message;
    if (message.role === "toolResult") return !this.callOwner.has(message.tool_call_id);
    if (message.role === "custom") return message.display !== false;
    return true;
  }

  layout() {
    // Hidden entries (a tool result drawn in its call's card) count too: a mark may follow one.
    const ordered = [...this.entries.values()]
      .sort((a, b) => {
        if (a.seq !== null && b.seq !== null) return a.seq - b.seq;
        if (a.seq !== null) return -1;
        if (b.seq !== null) return 1;
        return a.arrival - b.arrival;
      });
    const wanted = [];
    const marksAfter = new Map();
    const marks = [
      ...this.marks.map((mark) => ({ mark, draw: () => this.markElement(mark) })),
      ...this.guidance.list.map((mark) => ({ mark, draw: () => this.guidance.element(mark) })),
    ].sort((a, b) => a.mark.timestamp - b.mark.timestamp);
    for (const { mark, draw } of marks) {
      const key = mark.after_message_id || "";
      if (!marksAfter.has(key)) marksAfter.set(key, []);
      marksAfter.get(key).push(draw);
    }
    if (this.earlierButton.hidden) {
      // Nothing is earlier than the first message shown: a compaction before it goes first.
      for (const draw of marksAfter.get("") || []) wanted.push(draw());
    }
    for (const entry of ordered) {
      if (this.visible(entry)) {
        if (!this.elements.has(entry.id)) this.elements.set(entry.id, this.renderEntry(entry));
        wanted.push(this.elements.get(entry.id));
      }
      for (const draw of marksAfter.get(entry.id) || []) wanted.push(draw());
    }
    // Put the wanted elements in order, moving only those out of place.
    const atBottom = this.root.scrollHeight - this.root.scrollTop - this.root.clientHeight < 40;
    wanted.forEach((node, index) => {
      if (this.list.children[index] !== node) this.list.insertBefore(node, this.list.children[index] || null);
    });
    while (this.list.children.length > wanted.length) this.list.lastElementChild.remove();
    // A card moved or drawn anew lost its output's scroll: running ones show their tail again.
    for (const [callId, tool] of this.tools) {
      if (tool.started && !tool.result) this.followOutput(this.cards.get(callId));
    }
    this.emptyNote.hidden = wanted.length > 0;
    if (atBottom) this.root.scrollTop = this.root.scrollHeight;
  }

  markElement(mark) {
    if (!mark.element) {
      mark.element = el("div", { class: "compaction-mark", dataset: { entryId: mark.entry_id } },
        `Context compacted here (${mark.tokens_before} tokens summarised): from this point the model works from a summary of what is above. The full history stays shown.`);
    }
    return mark.element;
  }

  renderEntry(entry) {
    const message = entry.message;
    const role = message.role;
    const node = el("article", { class: `msg ${role}`, dataset: { id: entry.id, role } });
    if (entry.seq === null) node.dataset.live = "";
    if (role === "user") {
      // A schedule's prompt says so (and which schedule, when it fired for).
      const scheduled = message.scheduled;
      const who = scheduled
        ? el("div", { class: "who scheduled", title: t("Sent by schedule {id} for {when}", { id: scheduled.schedule_id, when: new Date(scheduled.scheduled_at).toLocaleString([], { hour12: false }) }) }, t("Scheduled"))
        : el("div", { class: "who" }, t("You"));
      if (scheduled) node.dataset.scheduled = scheduled.schedule_id;
      node.append(who, el("div", { class: "text plain" }, textOf(message.content)));
    } else if (role === "assistant") {
      node.append(el("div", { class: "who", ...turnCostAttrs(entry.turnCost, message.usage) }, t("Assistant")));
      (message.content || []).forEach((block, index) => node.append(this.renderBlock(entry, block, index)));
      if (!(message.content || []).length && entry.seq === null) node.append(el("div", { class: "typing" }, "…"));
      if (message.stop_reason === "error") node.append(el("div", { class: "error" }, `Model error: ${message.error_message || "unknown"}`));
      if (message.stop_reason === "aborted") node.append(el("div", { class: "note" }, t("Stopped.")));
    } else if (role === "toolResult") {
      node.append(this.card({ id: message.tool_call_id, name: message.tool_name, arguments: {} }, entry.runId));
    } else if (message.custom_type === "budget") {
      // The note a budget stop leaves (domain/budgets.py): said to the model as well, so
      // it begins "Budget reached: "; the person reads that as the note's heading.
      node.classList.add("notice", "budget-note");
      // "Raise the budget to go on": its button opens the session budget's editor.
      node.append(el("div", { class: "who" }, t("Budget reached")),
        el("div", { class: "text plain" }, withoutHeading(textOf(message.content))),
        el("button", { type: "button", class: "change-budget", onclick: () => this.editBudget() }, t("Change budget")));
    } else {
      const text = message.custom_type === "abort" ? t("The run was stopped here.") : textOf(message.content);
      node.classList.add("notice");
      node.append(el("div", { class: "text plain" }, text));
    }
    return node;
  }

  renderBlock(entry, block, index) {
    const data = { block: String(index) };
    if (block.type === "text") {
      return el("div", { class: "text md", dataset: data }, renderMarkdown(block.text));
    }
    if (block.type === "thinking") {
      return el("details", { class: "thinking", dataset: data },
        el("summary", {}, t(block.redacted ? "Thinking (redacted)" : "Thinking")),
        el("div", { class: "text plain" }, block.thinking));
    }
    if (block.type === "toolCall" && !block.id) {
      return el("div", { class: "tool", dataset: { ...data, state: "planned" } },
        el("div", { class: "tool-head" }, el("span", { class: "tool-name" }, block.name), el("span", { class: "tool-state" }, t("planning…"))),
        el("pre", { class: "tool-args-live" }, block.partial || ""));
    }
    if (block.type === "toolCall") {
      const card = this.card(block, entry.runId);
      card.dataset.block = String(index);
      return card;
    }
    return el("div", { dataset: data });
  }

  card(call, runId) {
    let card = this.cards.get(call.id);
    if (!card) {
      card = el("div", { class: "tool", dataset: { callId: call.id } });
      this.cards.set(call.id, card);
    }
    card.call = call.arguments && Object.keys(call.arguments).length ? call : card.call || call;
    this.tool(call.id, runId);
    this.fillCard(card);
    return card;
  }

  updateCard(callId) {
    const card = this.cards.get(callId);
    if (card) this.fillCard(card);
  }

  fillCard(card) {
    const call = card.call;
    const tool = this.tools.get(call.id);
    const aborted = this.abortedRuns.has(tool.runId);
    const state = toolState(tool.result, { started: tool.started, aborted, byGuidance: this.guidance.interrupted(call.id) });
    card.dataset.state = state;
    // A denied call never ran: its reason is a note, not output, and it took no time.
    const refusal = state === "denied" ? textOf(tool.result.content) : "";
    const output = refusal ? "" : tool.result ? textOf(tool.result.content) : tool.output;
    const ticking = state === "running" && tool.startedAt;
    const time = refusal ? ""
      : tool.durationMs !== null ? duration(tool.durationMs)
      : ticking ? duration(Math.max(0, Date.now() - tool.startedAt)) : "";
    const head = el("div", { class: "tool-head" },
      el("span", { class: "tool-name" }, call.name),
      el("code", { class: "tool-summary" }, argumentSummary(call.arguments || {})),
      el("span", { class: `tool-state ${state}` }, t(STATE_LABELS[state])),
      el("span", { class: "tool-time", dataset: ticking ? { ticking: "" } : {} }, time));
    const parts = [head, this.guidance.link(call.id)].filter(Boolean);
    const approval = this.approvals && this.approvals.card(call.id, call.arguments, () => this.fillCard(card));
    card.dataset.approval = approval ? "waiting" : "";
    if (approval) {
      head.querySelector(".tool-state").textContent = t("awaiting approval");
      parts.push(approval);
    }
    const question = this.questions && this.questions.card(call.id, () => this.fillCard(card));
    card.dataset.question = question ? "waiting" : "";
    if (question) {
      head.querySelector(".tool-state").textContent = t("awaiting your answer");
      parts.push(question);
    }
    if (refusal) parts.push(el("div", { class: "note tool-denied" }, refusal));
    const child = this.subagents.link(call.id, tool.result);
    if (child) parts.push(child);
    if (call.arguments && Object.keys(call.arguments).length) {
      parts.push(el("details", { class: "tool-args" }, el("summary", {}, t("arguments")),
        el("pre", {}, JSON.stringify(call.arguments, null, 2))));
    }
    if (output) {
      const lines = output.replace(/\n$/, "").split("\n"); // a last line's newline starts none
      const long = lines.length > FOLD_LINES || output.length > FOLD_CHARS;
      const lineCount = LANG === "zh" ? `${lines.length} 行` : `${lines.length} line${lines.length === 1 ? "" : "s"}`;
      const wasOpen = card.querySelector(".tool-output.open");
      // Whole output open and scrolled up by the reader: it stays where they read.
      card.readFrom = wasOpen && wasOpen.scrollHeight - wasOpen.scrollTop - wasOpen.clientHeight > 20 ? wasOpen.scrollTop : null;
      const pre = el("pre", { class: `tool-output${long && !wasOpen ? " folded" : ""}${wasOpen ? " open" : ""}` }, output);
      parts.push(pre);
      if (long) {
        parts.push(el("button", {
          class: "fold",
          onclick: (e) => {
            const open = pre.classList.toggle("open");
            pre.classList.toggle("folded", !open);
            e.target.textContent = open ? t("Fold output") : t("Show all output ({lines}, {chars} characters)", { lines: lineCount, chars: output.length });
          },
        }, wasOpen ? t("Fold output") : t("Show all output ({lines}, {chars} characters)", { lines: lineCount, chars: output.length })));
      }
    }
    card.replaceChildren(...parts);
    if (state === "running") this.followOutput(card);
  }

  // A running call's output shows its newest lines (what a person watches), folded or not;
  // "Show all output" opens the whole of it. Scrolling works only on a shown element.
  followOutput(card) {
    const pre = card && card.isConnected && card.querySelector(".tool-output");
    if (pre) pre.scrollTop = card.readFrom ?? pre.scrollHeight;
  }
}
