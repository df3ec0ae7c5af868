// One open session: loads it from /state, follows its event stream, and sends what the
// person does to the API. Everything shown comes from the store (a reload rebuilds the
// same page); every request names this view's session, so input typed here never
// reaches another session, whatever the person opens meanwhile.

import { Activity } from "./activity.js";
import { Approvals } from "./approvals.js";
import { Questions } from "./questions.js";
import { BudgetCard } from "./budget.js";
import { BudgetEditor } from "./budget_editor.js";
import { Composer } from "./composer.js";
import { Conversation } from "./conversation.js";
import { api, EventStream } from "./http.js";
import { RunHeader } from "./header.js";
import { SchedulesPanel } from "./schedules.js";
import { TreePanel } from "./tree.js";
import { t } from "./i18n.js";

// Events after which the store holds new display messages, queue or run state.
const REFRESH_ON = new Set([
  "agent_start", "agent_end", "turn_start", "turn_end", "save_point", "queue_consumed",
  "run_aborted", "runtime_guidance_injected", "compaction_end", "branch_summary", "phase_changed",
  "budget_reached", "budget_raised",
]);
const STRUCTURE_ON = new Set(["agent_end", "compaction_end", "branch_summary"]);
const POLL_MS = 3000;
const STATUS_POLL_MS = 5000;
const PAGE = 200;

class Closed extends Error {}

export class SessionView {
  constructor(id, parts, app) {
    this.id = id;
    this.app = app;
    this.root = parts.root;
    this.closed = false;
    this.lastSeq = 0;
    this.applied = 0;
    this.messagesCursor = 0;
    this.phase = "idle";
    const approvals = new Approvals({
      decide: (callId, action, body) => this.call(`/approvals/${encodeURIComponent(callId)}/${action}`, { method: "POST", body }),
    });
    const questions = new Questions({
      answer: (callId, text) => this.call(`/questions/${encodeURIComponent(callId)}/answer`, { method: "POST", body: { answer: text } }),
    });
    this.budgetEditor = new BudgetEditor(parts.budgetEditor, {
      load: () => this.call("/budget"),
      save: (budget) => this.saveBudget(budget),
    });
    this.conversation = new Conversation(parts.conversation, {
      onLoadEarlier: () => this.loadEarlier(),
      approvals,
      questions,
      editBudget: () => this.budgetEditor.open(),
    });
    this.budget = new BudgetCard(parts.budget, {
      raise: (scope, budget) => this.call("/budget/raise", { method: "POST", body: { budget, scope } }),
    });
    this.activity = new Activity(parts.activity);
    this.composer = new Composer(parts.composer, {
      send: (mode, text) => this.send(mode, text),
      act: (action, item) => this.chipAction(action, item),
      lookup: (id) => this.attempt(() => this.call(`/input-queue/${encodeURIComponent(id)}`), { quiet: true }),
      sendQueued: () => this.sendQueued(),
    });
    this.header = new RunHeader(parts.header, {
      stop: () => this.stop(),
      rename: (name) => this.rename(name),
      compact: () => this.compact(),
      editBudget: () => this.budgetEditor.toggle(),
    });
    this.budgetEditor.onToggle = (open) => this.header.budgetButton.setAttribute("aria-expanded", String(open));
    this.tree = new TreePanel(parts.tree, {
      goto: (node) => this.goto(node),
      fork: (node) => this.fork(node),
      label: (node, text) => this.label(node, text),
    });
    this.schedules = new SchedulesPanel(parts.schedules, {
      list: () => this.call("/schedules"),
      add: (body) => this.call("/schedules", { method: "POST", body }),
      act: (id, action) => api(`/api/schedules/${encodeURIComponent(id)}/${action}`, { method: "POST" }),
      remove: (id) => api(`/api/schedules/${encodeURIComponent(id)}`, { method: "DELETE" }),
    });
    this.onScroll = () => {
      if (parts.conversation.scrollTop < 80 && !this.conversation.earlierButton.hidden) this.loadEarlier();
    };
    parts.conversation.addEventListener("scroll", this.onScroll);
    this.scroller = parts.conversation;
    this.root.dataset.session = id;
    this.root.dataset.loaded = "false";
  }

  path(suffix = "") {
    return `/api/sessions/${encodeURIComponent(this.id)}${suffix}`;
  }

  async call(suffix, options) {
    const result = await api(this.path(suffix), options);
    if (this.closed) throw new Closed();
    return result;
  }

  // Runs `work`; a failure of what the person did is shown to them. Background reads
  // (`quiet`) fail silently: the next event or poll repeats them, and a dropped
  // connection already shows as "reconnecting".
  async attempt(work, { quiet = false } = {}) {
    try {
      return await work();
    } catch (error) {
      if (error instanceof Closed || this.closed) return undefined;
      if (error.status === 404 && error.message.startsWith("session ")) this.app.notFound(this.id);
      else if (!quiet) this.composer.showError(error.message, { untilReachable: error.unreachable });
      return undefined;
    }
  }

  async open() {
    await this.attempt(async () => {
      const state = await this.call("/state");
      this.conversation.addDisplay(state.messages);
      this.conversation.setEarlier(Boolean(state.messages_earlier));
      this.conversation.setLinks(state.links);
      this.messagesCursor = state.messages_cursor;
      for (const event of await this.withLiveTurn(state)) this.apply(event);
      this.composer.setQueue(state.input_queue);
      this.setRun(state.run);
      this.header.setCost(state.run.cost, state.session_cost);
      this.showBudget(state, { rebuild: true });
      this.root.dataset.loaded = "true";
      this.scroller.scrollTop = this.scroller.scrollHeight;
      this.stream = new EventStream(this.id, {
        cursor: () => this.lastSeq,
        onEvent: (event) => this.apply(event),
        onState: (connection) => {
          this.app.connection(connection);
          if (connection === "live") {
            this.composer.reachable();
            this.refresh();
          }
        },
      }).start();
      this.timers = [
        setInterval(() => { this.header.tick(); this.conversation.tick(); }, 1000),
        setInterval(() => { if (this.phase !== "idle") this.refresh(); }, POLL_MS),
        setInterval(() => { if (this.phase !== "idle" || this.composer.waitingToStart) this.loadStatus(); }, STATUS_POLL_MS),
      ];
      this.loadStatus();
      this.loadMarks();
      this.loadGuidance();
      this.loadTree();
      this.schedules.refresh();
    });
  }

  close() {
    this.closed = true;
    if (this.stream) this.stream.stop();
    for (const timer of this.timers || []) clearInterval(timer);
    this.scroller.removeEventListener("scroll", this.onScroll);
    this.activity.close();
  }

  // The newest page of events may begin inside the turn in progress; its start is read
  // too, so the streamed text and running tools show whole.
  async withLiveTurn(state) {
    const events = state.activity_events;
    const running = state.run.latest && state.run.latest.status === "running";
    const first = events.length ? events[0].seq : 0;
    if (!running || first <= 1 || events.some((e) => e.type === "turn_start" || e.type === "agent_start")) {
      return events;
    }
    const from = Math.max(0, first - 1 - 2000);
    const older = await this.call(`/state?events_after=${from}&events_limit=2000&messages_after=${this.messagesCursor}&messages_limit=1`);
    return [...older.activity_events.filter((e) => e.seq < first), ...events];
  }

  apply(event) {
    if (this.closed || event.seq <= this.lastSeq) return; // each event once, in order
    this.lastSeq = event.seq;
    this.applied += 1;
    this.root.dataset.lastSeq = String(event.seq);
    this.root.dataset.applied = String(this.applied);
    this.conversation.onEvent(event);
    this.activity.add(event);
    this.composer.onEvent(event);
    this.budget.onEvent(event);
    this.header.onEvent(event);
    this.phase = this.header.phase.dataset.phase;
    this.composer.setIdle(this.phase === "idle");
    if (event.type === "agent_start" || event.type === "agent_end") this.app.sessionsChanged();
    if (event.type === "agent_end") this.loadStatus(); // a name the run stored, say
    if (REFRESH_ON.has(event.type)) this.refresh();
    if (event.type === "compaction_end") this.loadMarks();
    // The save point that gives the model guidance stores it and writes this event in one
    // transaction: the trace is there to read as the model receives it.
    if (event.type === "runtime_guidance_injected") this.loadGuidance();
    if (STRUCTURE_ON.has(event.type)) this.loadTree();
    // A run may be a schedule's firing: its "last fired" changes (read only when shown).
    if (event.type === "agent_start") this.schedules.refresh();
  }

  setRun(run) {
    this.header.setRun(run);
    this.phase = this.header.phase.dataset.phase;
    this.composer.setIdle(this.phase === "idle");
  }

  showBudget(state, { rebuild = false } = {}) {
    const runId = state.run.latest ? state.run.latest.run_id : null;
    this.budget.setView(state.budget, { rebuild: rebuild && state.run.phase === "awaiting_budget", runId });
    this.header.setBudget(state.budget);
  }

  // New display messages, queue and run state since the cursors. Calls that come while
  // one is in flight are folded into one more round.
  refresh() {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = this.attempt(async () => {
      do {
        this.refreshAgain = false;
        const state = await this.call(
          `/state?messages_after=${this.messagesCursor}&events_after=${this.lastSeq}&messages_limit=${PAGE}`);
        this.conversation.addDisplay(state.messages);
        this.messagesCursor = state.messages_cursor;
        for (const event of state.activity_events) this.apply(event);
        this.composer.setQueue(state.input_queue);
        this.setRun(state.run);
        this.header.setCost(state.run.cost, state.session_cost);
        this.showBudget(state);
        if (state.messages_more) this.refreshAgain = true;
      } while (this.refreshAgain && !this.closed);
    }, { quiet: true }).finally(() => { this.refreshing = null; });
    return this.refreshing;
  }

  async loadEarlier() {
    const before = this.conversation.firstSeq;
    if (this.loadingEarlier || before === null) return;
    this.loadingEarlier = true;
    await this.attempt(async () => {
      const page = await this.call(`/messages?before=${before}&limit=${PAGE}`);
      const height = this.scroller.scrollHeight;
      this.conversation.addDisplay(page.messages);
      this.conversation.setEarlier(page.earlier);
      this.conversation.layout();
      this.scroller.scrollTop += this.scroller.scrollHeight - height; // stay where the reader was
    });
    this.loadingEarlier = false;
  }

  async loadStatus() {
    await this.attempt(async () => {
      const status = await this.call("/status");
      this.header.setSession(status.session);
      this.header.setStatus(status);
      if (status.worker_answering === false) this.composer.noWorker();
    }, { quiet: true });
  }

  async loadMarks() {
    await this.attempt(async () => this.conversation.setMarks(await this.call("/compactions")), { quiet: true });
  }

  async loadGuidance() {
    await this.attempt(async () => this.conversation.setGuidance(await this.call("/guidance")), { quiet: true });
  }

  // The tree covers the whole session (thousands of entries in a long one): it is read
  // only while its tab is shown, and again when the tab is opened.
  async loadTree() {
    if (this.tree.root.hidden) return;
    await this.attempt(async () => this.tree.show(await this.call("/tree")), { quiet: true });
  }

  // What the person does --------------------------------------------------------------

  async send(mode, text) {
    const taken = await this.attempt(async () => {
      if (mode === "send") {
        const sent = await this.call("/input", { method: "POST", body: { text } });
        if (sent.action === "started") {
          this.composer.starting(sent.run_id, text);
          this.loadStatus();
        }
      }
      else if (mode === "guide") await this.call("/input", { method: "POST", body: { text, guidance: true } });
      else if (mode === "queue") await this.call("/input-queue", { method: "POST", body: { text } });
      else if (mode === "steer") await this.call("/steer", { method: "POST", body: { text } });
      else if (mode === "follow-up") await this.call("/follow-up", { method: "POST", body: { text } });
      return true;
    });
    if (taken) await this.refresh();
    return Boolean(taken);
  }

  // The chips still queued on an idle session, sent now: the last one's text is the prompt
  // of a new run, which takes the others before it (in their order), as any prompt does.
  async sendQueued() {
    await this.attempt(async () => {
      const queued = (await this.call("/input-queue")).filter((item) => item.kind === "next_turn");
      const last = queued[queued.length - 1];
      if (!last) return;
      const taken = await this.call(`/input-queue/${encodeURIComponent(last.id)}`, { method: "PATCH", body: { action: "edit" } });
      this.composer.settle([last.id], "consumed", t("sent as the new run's prompt"));
      try {
        const sent = await this.call("/input", { method: "POST", body: { text: taken.text } });
        if (sent.action === "started") this.composer.starting(sent.run_id, taken.text);
      } catch (error) {
        this.composer.setText(taken.text); // not lost: back in the box to send again
        throw error;
      }
    });
    await this.refresh();
  }

  async chipAction(action, item) {
    await this.attempt(async () => {
      const where = `/input-queue/${encodeURIComponent(item.id)}`;
      if (action === "edit") {
        const result = await this.call(where, { method: "PATCH", body: { action: "edit" } });
        const current = this.composer.text;
        this.composer.setText(current ? `${current}\n${result.text}` : result.text);
        this.composer.movedBack(item.id);
      } else if (action === "guide") {
        await this.call(where, { method: "PATCH", body: { action: "guide" } });
      } else {
        await this.call(where, { method: "DELETE" });
      }
    });
    await this.refresh();
  }

  async stop() {
    this.header.stopButton.textContent = t("Stopping…");
    // The chips it cancels say so once their items leave the queue (composer.js): the
    // answer names what it cancelled by text only.
    await this.attempt(async () => this.call("/stop", { method: "POST" }));
    this.header.stopButton.textContent = t("Stop");
    await this.refresh();
  }

  async rename(name) {
    await this.attempt(async () => {
      this.header.setSession(await this.call("", { method: "PATCH", body: { name } }));
      this.app.sessionsChanged();
    });
  }

  // The session's budget (null: none), from its editor; a refusal is the editor's to show.
  async saveBudget(budget) {
    const view = await this.call("/budget", { method: "PUT", body: { budget } });
    this.refresh();
    return view;
  }

  async compact() {
    this.header.compactButton.textContent = t("Compacting…");
    await this.attempt(async () => {
      const result = await this.call("/compact", { method: "POST", body: {} });
      if (!result.compacted) this.composer.showError(`Nothing compacted: ${result.reason}`);
    });
    this.header.compactButton.textContent = t("Compact");
    this.loadMarks();
    this.loadTree();
    await this.refresh();
  }

  async goto(node) {
    await this.attempt(async () => {
      const result = await this.call("/goto", { method: "POST", body: { entry_id: node.id } });
      if (result.edit_text) this.composer.setText(result.edit_text);
    });
    this.loadTree();
  }

  async fork(node) {
    await this.attempt(async () => {
      const created = await this.call("/fork", { method: "POST", body: { entry_id: node.id } });
      this.app.openSession(created.id);
    });
  }

  async label(node, text) {
    await this.attempt(async () => {
      await this.call(`/labels/${encodeURIComponent(node.id)}`, { method: "PUT", body: { label: text.trim() || null } });
    });
    this.loadTree();
  }
}
