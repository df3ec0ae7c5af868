// The session's schedules (duragent schedule): prompts sent to it on a timetable. Each
// row shows its timetable, what a busy session does with a firing, when it fires next
// and when it last fired, with pause or resume, "run now" and delete; the form below
// adds one (an interval such as 1h, 30m, 90s, or a cron expression). Scheduled prompts
// show in the conversation marked as such.

import { el } from "./dom.js";
import { t } from "./i18n.js";

const BUSY = {
  queue: "queue as a follow-up",
  skip: "skip",
  new_session: "run in a new session",
};

function when(iso) {
  return new Date(iso).toLocaleString([], { hour12: false });
}

export class SchedulesPanel {
  constructor(root, { list, add, act, remove }) {
    this.root = root;
    this.actions = { list, add, act, remove };
    this.list = el("ul", { class: "schedules" });
    this.note = el("p", { class: "schedules-note" });
    this.error = el("p", { class: "error", role: "alert" });
    this.form = this.buildForm();
    root.replaceChildren(this.note, this.list, this.form, this.error);
  }

  buildForm() {
    this.prompt = el("textarea", { class: "schedule-prompt", rows: "2", placeholder: t("Prompt to send"), "aria-label": t("Prompt to send") });
    this.timing = el("input", { class: "schedule-timing", placeholder: t("1h, 30m, 90s or a cron expression"), "aria-label": t("Every (or cron)") });
    this.timezone = el("input", { class: "schedule-timezone", placeholder: t("time zone (default UTC)"), "aria-label": t("Time zone") });
    this.busy = el("select", { class: "schedule-busy", "aria-label": t("When the session is busy") },
      ...Object.entries(BUSY).map(([value, label]) => el("option", { value }, t(label))));
    this.newSession = el("input", { type: "checkbox", class: "schedule-new-session" });
    const submit = el("button", { type: "submit" }, t("Add schedule"));
    const form = el("form", { class: "schedule-form" },
      el("h3", {}, t("New schedule")),
      this.prompt,
      this.timing,
      this.timezone,
      el("label", {}, t("When the session is busy:"), " ", this.busy),
      el("label", {}, this.newSession, " ", t("a new session each time")),
      submit);
    form.addEventListener("submit", (event) => { event.preventDefault(); this.submit(); });
    return form;
  }

  async submit() {
    const timing = this.timing.value.trim();
    // An interval is a number with a unit (1h30m); anything with a space is cron.
    const body = {
      prompt: this.prompt.value,
      busy: this.busy.value,
      new_session: this.newSession.checked,
      ...(/\s/.test(timing) ? { cron: [timing] } : { every: timing }),
      ...(this.timezone.value.trim() ? { timezone: this.timezone.value.trim() } : {}),
    };
    if (await this.run(() => this.actions.add(body))) {
      this.prompt.value = "";
      this.timing.value = "";
    }
  }

  async run(work) {
    try {
      await work();
      this.error.textContent = "";
      await this.refresh();
      return true;
    } catch (error) {
      this.error.textContent = error.message;
      return false;
    }
  }

  async refresh() {
    if (this.root.hidden) return;
    try {
      this.show(await this.actions.list());
    } catch (error) {
      this.error.textContent = error.message;
    }
  }

  show(schedules) {
    this.note.textContent = schedules.length ? "" : t("No schedules: add one below to send this session a prompt on a timetable.");
    this.list.replaceChildren(...schedules.map((schedule) => this.row(schedule)));
  }

  row(schedule) {
    const timetable = schedule.every ? t("every {every}", { every: schedule.every }) : `cron ${schedule.cron.join(" | ")}`;
    const zone = schedule.timezone ? ` (${schedule.timezone})` : "";
    const next = !schedule.paused && schedule.next_runs.length ? t("next {when}", { when: when(schedule.next_runs[0]) }) : "";
    const last = schedule.recent.length ? t("last fired {when}", { when: when(schedule.recent[schedule.recent.length - 1].scheduled_at) }) : "";
    const id = schedule.id;
    return el("li", { class: `schedule${schedule.paused ? " paused" : ""}`, dataset: { id } },
      el("div", { class: "schedule-head" },
        el("span", { class: "schedule-state" }, schedule.paused ? t("paused") : t("active")),
        el("span", { class: "schedule-when" }, timetable + zone)),
      el("div", { class: "schedule-prompt-text", title: schedule.prompt }, schedule.prompt),
      el("div", { class: "schedule-meta" },
        [schedule.new_session ? t("a new session each time") : t("busy: {what}", { what: t(BUSY[schedule.busy]) }), next, last]
          .filter(Boolean).join(" · ")),
      el("span", { class: "schedule-actions" },
        schedule.paused
          ? el("button", { type: "button", class: "resume", onclick: () => this.run(() => this.actions.act(id, "resume")) }, t("Resume"))
          : el("button", { type: "button", class: "pause", onclick: () => this.run(() => this.actions.act(id, "pause")) }, t("Pause")),
        el("button", { type: "button", class: "trigger", onclick: () => this.run(() => this.actions.act(id, "trigger")) }, t("Run now")),
        el("button", { type: "button", class: "delete", onclick: () => this.run(() => this.actions.remove(id)) }, t("Delete"))));
  }
}
