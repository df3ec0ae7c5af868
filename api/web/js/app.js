// The page: sign-in, the session list, and the open session (its id in the address,
// `#/s/<id>`, so a reload or a second tab opens the same one).

import { clockTime, el, shortId } from "./dom.js";
import { api, forgetToken, saveToken, savedToken, whenSignedOut } from "./http.js";
import { SessionView } from "./session_view.js";
import { t, translatePage } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const SESSIONS_POLL_MS = 5000;

let view = null;
let sessionsTimer = null;
const drafts = new Map(); // session id -> text typed but not sent

function showSignIn(message) {
  closeView();
  clearInterval(sessionsTimer);
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
  $("token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  try {
    await api("/api/session-summaries", { token });
  } catch (error) {
    $("sign-in-error").textContent = error.status === 401 ? t("That token is not valid.") : error.message;
    return;
  }
  saveToken(token, $("remember").checked);
  $("token").value = "";
  start();
}

async function start() {
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  clearInterval(sessionsTimer);
  sessionsTimer = setInterval(refreshSessions, SESSIONS_POLL_MS);
  // A session named in the address opens at once; the list loads beside it.
  const listed = refreshSessions();
  if (!currentId()) await listed;
  route();
}

function currentId() {
  const match = /^#\/s\/([A-Za-z0-9_-]+)$/.exec(location.hash);
  return match ? match[1] : null;
}

function route() {
  const id = currentId();
  if (id) showSession(id);
  else {
    const first = document.querySelector("#session-list li");
    if (first) location.hash = `#/s/${first.dataset.id}`;
    else {
      closeView();
      showPane("sessions");
    }
  }
}

// On a narrow screen one pane shows at a time (the style sheet decides which screens):
// the sessions, the open session's conversation, or its activity and tree.
function showPane(name) {
  $("app").dataset.pane = name;
  for (const button of document.querySelectorAll("#panes button")) {
    button.setAttribute("aria-pressed", String(button.dataset.pane === name));
  }
  if (name === "activity" && view && !$("activity").hidden) view.activity.shown();
}

async function refreshSessions() {
  let summaries;
  try {
    summaries = await api("/api/session-summaries");
  } catch {
    return;
  }
  const open = currentId();
  $("no-sessions").hidden = summaries.length > 0;
  $("session-list").replaceChildren(...withSubagentsBelow(summaries).map(({ session, status, latest_run: run }) => {
    const when = Math.max(session.updated_at, run ? run.updated_at : 0);
    const classes = [session.id === open ? "current" : "", session.parent_tool_call_id ? "subagent" : ""];
    return el("li", { dataset: { id: session.id, status }, class: classes.join(" ").trim() },
      el("a", { href: `#/s/${session.id}` },
        el("span", { class: "session-name" }, session.name || t("Session {id}", { id: shortId(session.id) })),
        el("span", { class: `status ${status}` }, t(status)),
        el("time", { class: "last-activity" }, clockTime(when))));
  }));
}

// A sub-agent's session is listed right below its parent (when the parent is listed),
// the others in the order given (most recently active first).
function withSubagentsBelow(summaries) {
  const listed = new Set(summaries.map(({ session }) => session.id));
  const below = new Map();
  for (const summary of summaries) {
    const parent = summary.session.parent_tool_call_id && summary.session.parent_session_id;
    if (parent && listed.has(parent)) {
      if (!below.has(parent)) below.set(parent, []);
      below.get(parent).push(summary);
    }
  }
  const ordered = [];
  const add = (summary) => {
    ordered.push(summary);
    for (const child of below.get(summary.session.id) || []) add(child);
  };
  for (const summary of summaries) {
    const parent = summary.session.parent_tool_call_id && summary.session.parent_session_id;
    if (!(parent && listed.has(parent))) add(summary);
  }
  return ordered;
}

function closeView() {
  if (view) {
    drafts.set(view.id, view.composer.text);
    view.close();
    view = null;
  }
  $("session").hidden = true;
  $("not-found").hidden = true;
  $("no-session").hidden = false;
  showSide("empty");
}

// The side panel (the Details pane on a narrow screen): the open session's activity, tree
// and schedules ("session"); with none open, what to do first ("empty"); or, for a session
// that is not found, nothing ("none"): nothing there is about a session the page shows.
function showSide(state) {
  const side = document.querySelector(".side");
  side.dataset.state = state;
  $("side-empty").hidden = state !== "empty";
  if (state !== "session") for (const panel of ["activity", "tree", "schedules"]) $(panel).replaceChildren();
}

function showSession(id) {
  if (view && view.id === id) return;
  closeView();
  $("no-session").hidden = true;
  $("session").hidden = false;
  showSide("session");
  delete $("session-head").dataset.name; // a new name shows on one row again
  for (const li of document.querySelectorAll("#session-list li")) li.classList.toggle("current", li.dataset.id === id);
  view = new SessionView(id, {
    root: $("session"),
    header: $("run-header"),
    conversation: $("conversation"),
    budget: $("budget"),
    budgetEditor: $("budget-editor"),
    composer: $("composer"),
    activity: $("activity"),
    tree: $("tree"),
    schedules: $("schedules"),
  }, hooks);
  view.composer.box.value = drafts.get(id) || "";
  view.open();
}

const hooks = {
  connection(state) {
    const badge = $("connection");
    badge.dataset.state = state;
    badge.textContent = { live: t("live"), offline: t("offline") }[state] || t("reconnecting…");
  },
  notFound(id) {
    if (!view || view.id !== id) return;
    closeView();
    $("no-session").hidden = true;
    showSide("none");
    $("not-found").hidden = false;
    $("not-found").textContent = t("Session {id} does not exist (or is not yours).", { id });
  },
  sessionsChanged() {
    refreshSessions();
  },
  openSession(id) {
    location.hash = `#/s/${id}`;
    showPane("conversation");
    refreshSessions();
  },
};

async function newSession() {
  try {
    const created = await api("/api/sessions", { method: "POST", body: {} });
    await refreshSessions();
    location.hash = `#/s/${created.session.id}`;
    showPane("conversation");
  } catch (error) {
    $("not-found").hidden = false;
    $("not-found").textContent = error.message;
  }
}

// On a phone the session's header is one row (name, phase, Stop) until unfolded.
function toggleHeader() {
  const head = $("session-head");
  const expanded = head.dataset.expanded !== "true";
  head.dataset.expanded = String(expanded);
  $("head-toggle").setAttribute("aria-expanded", String(expanded));
}

// A long name ends in "…" on its row (its title holds it whole, for a pointer); a tap or a
// click on it shows it whole, another folds it again.
function toggleWholeName(event) {
  if (!event.target.closest(".name")) return;
  const head = $("session-head");
  if (head.dataset.name === "whole") delete head.dataset.name;
  else head.dataset.name = "whole";
}

function showTab(name) {
  for (const tab of document.querySelectorAll(".tabs button")) tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
  $("activity").hidden = name !== "activity";
  $("tree").hidden = name !== "tree";
  $("schedules").hidden = name !== "schedules";
  if (name === "tree" && view) view.loadTree();
  if (name === "schedules" && view) view.schedules.refresh();
  if (name === "activity" && view) view.activity.shown();
}

$("sign-in-form").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", () => { forgetToken(); showSignIn(); });
$("new-session").addEventListener("click", newSession);
$("head-toggle").addEventListener("click", toggleHeader);
$("run-header").addEventListener("click", toggleWholeName);
for (const button of document.querySelectorAll("#panes button")) button.addEventListener("click", () => showPane(button.dataset.pane));
// Choosing a session (the one open too) shows its conversation.
$("session-list").addEventListener("click", (event) => { if (event.target.closest("a")) showPane("conversation"); });
for (const tab of document.querySelectorAll(".tabs button")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
window.addEventListener("hashchange", route);
whenSignedOut(() => { forgetToken(); showSignIn(t("Signed out: the token was refused.")); });
translatePage();

if (savedToken()) start();
else showSignIn();
