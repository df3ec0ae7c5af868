// Sub-agents on the page: a delegate call's card links to the session that answers it
// (known from /state's links, the subagent_started event, or the stored result), and a
// sub-agent's page links back to the session whose call made it.

import { el, shortId } from "./dom.js";

export class SubagentLinks {
  constructor() {
    this.byCall = new Map(); // delegate call id -> {session_id, name}
    this.parentNote = el("div", { class: "subagent-parent", hidden: true });
  }

  set(links) {
    for (const child of (links && links.children) || []) this.byCall.set(child.tool_call_id, child);
    const parent = links && links.parent;
    this.parentNote.hidden = !parent;
    if (parent) {
      this.parentNote.replaceChildren("A sub-agent of ",
        el("a", { class: "subagent-parent-link", href: `#/s/${parent.session_id}` },
          parent.name || `Session ${shortId(parent.session_id)}`),
        ", answering its delegate call.");
    }
  }

  // The call id whose card gained a link, if the event brought one.
  onEvent(event) {
    if (event.type !== "subagent_started") return null;
    const p = event.payload;
    this.byCall.set(p.tool_call_id, { session_id: p.session_id, name: p.name });
    return p.tool_call_id;
  }

  link(callId, result) {
    const known = this.byCall.get(callId);
    const id = known ? known.session_id : result && result.details && result.details.child_session_id;
    if (!id) return null;
    const name = known && known.name;
    return el("a", { class: "subagent-link", href: `#/s/${id}`, dataset: { sessionId: id } },
      `Open sub-agent session: ${name || shortId(id)}`);
  }
}
