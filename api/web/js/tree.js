// The session tree: branches, labels and compactions. Go to an entry (a user message's
// text comes back into the composer), fork a new session from it, or label it.

import { el } from "./dom.js";
import { t } from "./i18n.js";

const KINDS = { user: "you", assistant: "assistant", tool: "tool", custom: "note", compaction: "compaction", branch_summary: "branch summary", other: "entry" };

export class TreePanel {
  constructor(root, { goto, fork, label }) {
    this.root = root;
    this.actions = { goto, fork, label };
    this.list = el("ul", { class: "tree" });
    this.note = el("p", { class: "tree-note" });
    root.replaceChildren(this.note, this.list);
  }

  show(view) {
    const notes = [];
    if (!view.nodes.length) notes.push(t("The tree shows the session's messages once there are some: go back to one, fork from it, or label it."));
    if (view.truncated) notes.push(t("Showing the newest part of a large tree."));
    if (view.nodes.some((node) => node.folded)) {
      notes.push(t("Your messages, branches, labels and compactions are listed; “+N” counts the entries folded into the line above (the agent's replies and tool calls)."));
    }
    this.note.textContent = notes.join(" ");
    this.list.replaceChildren(...view.nodes.map((node) => this.row(node)));
  }

  row(node) {
    const labelled = node.label ? el("span", { class: "label" }, node.label) : null;
    const where = node.is_leaf ? el("span", { class: "leaf" }, t("current")) : null;
    const folded = node.folded
      ? el("span", { class: "folded", title: t("{n} more entries on this line (replies, tool calls), folded into it", { n: node.folded }) }, `+${node.folded}`)
      : null;
    const subagent = node.child_session_id
      ? el("a", { class: "subagent-link", href: `#/s/${node.child_session_id}` }, t("open sub-agent")) : null;
    const buttons = el("span", { class: "node-actions" },
      el("button", { type: "button", class: "goto", onclick: () => this.actions.goto(node) }, t("Go to")),
      el("button", { type: "button", class: "fork", onclick: () => this.actions.fork(node) }, t("Fork")),
      el("button", { type: "button", class: "set-label", onclick: () => this.editLabel(node, row) }, t("Label")));
    const row = el("li", {
      class: `node ${node.kind}${node.on_path ? " on-path" : ""}`,
      dataset: { id: node.id, kind: node.kind },
    },
    el("span", { class: "kind" }, KINDS[node.kind] || node.kind),
    el("span", { class: "preview", title: node.preview }, node.preview || t("(empty)")),
    labelled, where, folded, subagent, buttons);
    // Through the CSSOM: the page's policy refuses inline style attributes.
    row.style.setProperty("--depth", String(node.depth));
    return row;
  }

  editLabel(node, row) {
    const input = el("input", { class: "label-input", value: node.label || "", placeholder: t("label (empty clears it)"), "aria-label": t("Label") });
    const save = el("button", { type: "button", class: "save-label", onclick: () => this.actions.label(node, input.value) }, t("Save"));
    input.addEventListener("keydown", (event) => { if (event.key === "Enter") this.actions.label(node, input.value); });
    row.querySelector(".node-actions").replaceChildren(input, save);
    input.focus();
  }
}
