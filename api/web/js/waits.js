// A wait for a person, on the page: a tool call waiting on an approval (approvals.js) or
// an `ask_user` question waiting on an answer (questions.js). What waits is rebuilt from
// run events (the kind's `asked` event adds one; its `ended` event, or the end of its run,
// drops it), so a reload shows the same. A card sends the person's word; what the last
// attempt was told and what was typed so far are kept across redraws.

export class PersonWaits {
  constructor({ asked, ended }) {
    this.asked = asked; // the event type that makes a call wait
    this.ended = ended; // the event type that ends its wait, from this page or any other client
    this.waiting = new Map(); // call id -> what its card shows (`waitingFrom`), with its runId
    this.errors = new Map(); // call id -> what the last attempt was told
    this.drafts = new Map(); // call id -> the text typed so far
  }

  // What a card shows of a call that waits, from its `asked` event's payload.
  waitingFrom(payload) {
    return {};
  }

  // The tool call ids whose card changes with this event.
  onEvent(event) {
    const p = event.payload;
    if (event.type === this.asked) {
      this.waiting.set(p.call_id, { runId: event.run_id, ...this.waitingFrom(p) });
      return [p.call_id];
    }
    if (event.type === this.ended) return this.forget([p.call_id]);
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

  // A function that sends the person's word on `callId` (`word(...args) -> Promise`), then
  // redraws its card (`refresh`): gone once taken, else with what the attempt was told.
  sender(callId, refresh, word) {
    return async (...args) => {
      try {
        await word(...args);
        this.forget([callId]);
      } catch (error) {
        this.errors.set(callId, error.message);
      }
      refresh();
    };
  }

  // Keep what is typed in `input` for `callId`, and show what was typed before a redraw.
  keepDraft(callId, input) {
    input.value = this.drafts.get(callId) || "";
    input.addEventListener("input", () => this.drafts.set(callId, input.value));
  }
}
