// The composer (never disabled) and the pending chips above it, one per input-queue item.
//
// Enter sends: an idle session starts a run, a busy one queues the text (the API decides,
// so two tabs never disagree). Shift+Enter is a new line. The menu beside Send offers
// guidance, steer and follow-up for a run in progress.

import { el } from "./dom.js";
import { pointWords } from "./guidance.js";
import { t } from "./i18n.js";

const LEAVE_AFTER_MS = 4000;

export class Composer {
  // `send(mode, text)` resolves true when the text was taken; `act(action, item)` handles
  // a chip's button (edit, guide, delete); `lookup(id)` reads an item from the store;
  // `sendQueued()` starts a run with the chips still queued once the session is idle.
  constructor(root, { send, act, lookup, sendQueued }) {
    this.send = send;
    this.act = act;
    this.lookup = lookup;
    this.idle = false;
    this.chips = new Map(); // item id -> {item, state, note, element}
    this.points = new Map(); // item id -> the injection point that took it
    this.runsSeen = new Set(); // runs whose events came: none of them is starting still
    this.chipList = el("div", { class: "chips", role: "list" });
    // Queued input outlives the run it was typed during (docs/SPEC.md): it waits for the
    // next prompt. Once the session is idle the page says so and offers to send it now.
    this.idleNote = el("div", { class: "queue-note", role: "status", hidden: true },
      el("span", {}, t("The run has ended and the agent has not seen these: they go with your next message, before it.")),
      el("button", { type: "button", class: "send-queued", onclick: () => sendQueued() }, t("Send them now")));
    this.box = el("textarea", {
      class: "box",
      rows: "3",
      placeholder: t("Message the agent (Enter to send, Shift+Enter for a new line)"),
      "aria-label": t("Message"),
      onkeydown: (event) => {
        if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
          event.preventDefault();
          this.submit("send");
        }
      },
    });
    this.error = el("p", { class: "error composer-error", role: "alert" });
    const option = (mode, label, title) =>
      el("button", { type: "button", class: "send-option", dataset: { mode }, title,
        onclick: (event) => { event.target.closest("details").open = false; this.submit(mode); } }, t(label));
    this.menu = el("details", { class: "send-menu" },
      el("summary", { title: t("More ways to send"), "aria-label": t("More ways to send") }, "▾"),
      el("div", { class: "menu" },
        option("guide", "Guide the run now", t("Guidance for the run in progress, taken at its next safe point")),
        option("steer", "Steer", t("Reaches the model after the current tool calls finish")),
        option("follow-up", "Follow-up", t("Delivered when the agent would otherwise stop")),
        option("queue", "Queue for the next run", t("Waits in the input queue"))));
    const sendButton = el("button", { type: "button", class: "send", onclick: () => this.submit("send") }, t("Send"));
    root.replaceChildren(this.idleNote, this.chipList, el("div", { class: "composer-row" }, this.box, sendButton, this.menu), this.error);
  }

  // The session's phase is idle (true) or a run is open.
  setIdle(idle) {
    if (idle === this.idle) return;
    this.idle = idle;
    this.render();
  }

  get text() {
    return this.box.value;
  }

  setText(text) {
    this.box.value = text;
    this.box.focus();
  }

  // `untilReachable`: the error says the server cannot be reached; `reachable()` clears it.
  showError(message, { untilReachable = false } = {}) {
    this.error.textContent = message || "";
    this.errorUntilReachable = Boolean(message) && untilReachable;
  }

  reachable() {
    if (this.errorUntilReachable) this.showError("");
  }

  // A message that started a run shows until the run's first event comes: a worker may
  // take a while to pick it up, or none may be answering.
  starting(runId, text) {
    if (this.runsSeen.has(runId)) return;
    this.chips.set(`run:${runId}`, {
      item: { id: `run:${runId}`, kind: "start", text }, state: "starting", note: t("sent: the run is starting…"),
    });
    this.render();
  }

  noWorker() {
    let changed = false;
    for (const chip of this.chips.values()) {
      if (chip.state === "starting") {
        chip.note = t("sent. No worker is answering yet: the run starts when one is back, nothing is lost.");
        changed = true;
      }
    }
    if (changed) this.render();
  }

  get waitingToStart() {
    return [...this.chips.values()].some((chip) => chip.state === "starting");
  }

  async submit(mode) {
    const text = this.box.value;
    if (!text.trim()) return;
    this.showError("");
    // Cleared at once so typing on is never blocked; put back if the server refused it.
    this.box.value = "";
    const taken = await this.send(mode, text);
    if (!taken && !this.box.value) this.box.value = text;
  }

  // Chips ---------------------------------------------------------------------------

  // The pending items as the store has them now.
  setQueue(items) {
    const pending = new Set(items.map((item) => item.id));
    for (const item of items) {
      const chip = this.chips.get(item.id);
      if (!chip) this.chips.set(item.id, { item, state: "pending", note: "" });
      else if (chip.state === "pending") chip.item = item;
    }
    for (const [id, chip] of this.chips) {
      if (chip.state === "pending" && !pending.has(id)) this.gone(id, chip);
    }
    this.render();
  }

  // An item left the queue (here or in another tab): the store says what became of it.
  async gone(id, chip) {
    chip.state = "leaving";
    const item = await this.lookup(id);
    if (chip.state !== "leaving") return; // settled meanwhile (Stop said what happened)
    if (!item) this.settle([id], "cancelled", t("gone"));
    else if (item.status === "cancelled") this.settle([id], "cancelled", chip.stopped ? t("cancelled by Stop") : t("withdrawn (edited or deleted)"));
    else if (item.kind === "guidance") {
      const point = this.points.get(id);
      this.settle([id], "consumed", point ? t("reached the agent {where}", { where: pointWords(point) }) : t("reached the agent"));
    } else this.settle([id], "consumed", t("sent with the next run"));
  }

  // A chip says what became of its item, then leaves.
  settle(ids, state, note) {
    for (const id of ids) {
      const chip = this.chips.get(id);
      if (!chip || (chip.state !== "pending" && chip.state !== "leaving")) continue;
      chip.state = state;
      chip.note = note;
      setTimeout(() => { this.chips.delete(id); this.render(); }, LEAVE_AFTER_MS);
    }
    this.render();
  }

  // Edit took the chip's text back into the box (the store cancels the item): the chip
  // says where its words went, not that they were thrown away.
  movedBack(id) {
    this.settle([id], "edited", t("moved back into the message box"));
  }

  onEvent(event) {
    const p = event.payload;
    if (event.run_id && !this.runsSeen.has(event.run_id)) {
      this.runsSeen.add(event.run_id);
      if (this.chips.delete(`run:${event.run_id}`)) this.render();
    }
    // A stopped run cancels the input waiting for it (docs/SPEC.md): Stop, not the person.
    if (event.type === "agent_end" && p.status === "aborted") for (const chip of this.chips.values()) chip.stopped = true;
    if (event.type === "runtime_guidance_injected") {
      for (const id of p.item_ids) this.points.set(id, p.point);
      this.settle(p.item_ids, "consumed", t("reached the agent {where}", { where: pointWords(p.point) }));
    } else if (event.type === "queue_consumed" && p.queue === "next_turn") {
      this.settle([p.entry_id], "consumed", t("sent with the next run"));
    }
  }

  render() {
    const nodes = [];
    for (const chip of this.chips.values()) {
      if (!chip.element) chip.element = el("div", { class: "chip", role: "listitem", dataset: { id: chip.item.id } });
      const item = chip.item;
      const kind = t(item.kind === "guidance" ? "guidance, waiting for a safe point" : "queued");
      // Whole, wrapped (a touch screen has no tooltip to read a cut one in).
      const parts = [el("span", { class: "chip-text" }, item.text)];
      if (chip.state === "starting") {
        parts.push(el("span", { class: "chip-note" }, chip.note));
      } else if (chip.state === "pending") {
        parts.push(
          el("span", { class: "chip-kind" }, kind),
          el("button", { type: "button", class: "edit", onclick: () => this.act("edit", item) }, t("Edit")),
          item.kind === "guidance" ? null
            : el("button", { type: "button", class: "guide", onclick: () => this.act("guide", item) }, t("Guide")),
          el("button", { type: "button", class: "delete", onclick: () => this.act("delete", item) }, t("Delete")));
      } else {
        parts.push(el("span", { class: "chip-note" }, chip.note));
      }
      chip.element.dataset.state = chip.state;
      chip.element.dataset.kind = item.kind;
      chip.element.replaceChildren(...parts.filter(Boolean));
      nodes.push(chip.element);
    }
    this.chipList.replaceChildren(...nodes);
    const queued = [...this.chips.values()].some((chip) => chip.state === "pending" && chip.item.kind === "next_turn");
    this.idleNote.hidden = !(this.idle && queued);
  }
}
