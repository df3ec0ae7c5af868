// The session's schedules (duragent schedule): prompts sent to it on a timetable. Each
// row shows its timetable, what a busy session does with a firing, when it fires next
// and when it last fired, with pause or resume, "run now" and delete; the form below
// adds one (an interval such as 1h, 30m, 90s, or a cron expression). Scheduled prompts
// show in the conversation marked as such.
//
// The form says what it takes before anything is sent (the forms, with examples) and
// checks the timetable as it is typed, the way the server checks it
// (domain/schedules.py: parse_every, check_cron): a refusal names what is wrong in the
// page's language, and what it cannot take is never sent.

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

const code = (text) => el("code", {}, text);

// A catalogue text with its {names} filled by nodes (code, mostly): the words translated,
// what the person typed and the forms shown as they are.
function said(text, values = {}) {
  return text.split(/(\{\w+\})/).filter(Boolean).map((part) => {
    const name = /^\{(\w+)\}$/.exec(part);
    if (!name || !(name[1] in values)) return part;
    const value = values[name[1]];
    return value instanceof Node ? value : String(value);
  });
}

// Intervals: whole numbers with a unit, largest first (parse_every).
const UNIT_SECONDS = { d: 86400, h: 3600, m: 60, s: 1 };
const MAX_EVERY_S = 366 * 86400;

function checkEvery(text) {
  const spec = text.toLowerCase();
  const parts = [...spec.matchAll(/(\d+)([dhms])/g)];
  if (!parts.length || parts.map((p) => p[0]).join("") !== spec) return null; // not an interval
  const units = parts.map((p) => p[2]);
  const order = units.map((u) => "dhms".indexOf(u));
  if (new Set(units).size !== units.length || order.some((n, i) => i && n <= order[i - 1])) {
    return said(t("“{text}”: each unit once, largest first, such as {example}."), { text: code(text), example: code("1h30m") });
  }
  const seconds = parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_SECONDS[p[2]], 0);
  if (seconds < 1 || seconds > MAX_EVERY_S) {
    return said(t("“{text}”: an interval is at least {min} and at most {max}."), { text: code(text), min: code("1s"), max: code("366d") });
  }
  return [];
}

// Cron as Temporal reads it (check_cron): 5 fields, 6 with a year, 7 with a second first.
const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
const DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];
const FIELD = {
  second: { name: "second", low: 0, high: 59 },
  minute: { name: "minute", low: 0, high: 59 },
  hour: { name: "hour", low: 0, high: 23 },
  day: { name: "day-of-month", low: 1, high: 31 },
  month: { name: "month", low: 1, high: 12, names: MONTHS, prefix: 3, first: 1, called: " or a month's name" },
  weekday: { name: "day-of-week", low: 0, high: 7, names: DAYS, prefix: 2, first: 0, called: " or a day's name" },
  year: { name: "year", low: 2000, high: 2100 },
};
const LAYOUTS = {
  5: [FIELD.minute, FIELD.hour, FIELD.day, FIELD.month, FIELD.weekday],
  6: [FIELD.minute, FIELD.hour, FIELD.day, FIELD.month, FIELD.weekday, FIELD.year],
  7: [FIELD.second, FIELD.minute, FIELD.hour, FIELD.day, FIELD.month, FIELD.weekday, FIELD.year],
};
const SHORTHANDS = ["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"];
const GO_DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;

function cronValue(field, text) {
  if (field.names && text.length >= field.prefix && /^[a-z]+$/i.test(text)) {
    const found = field.names.findIndex((name) => name.startsWith(text.toLowerCase()));
    return found < 0 ? null : found + field.first;
  }
  if (!/^\d+$/.test(text)) return null;
  const value = Number(text);
  return value >= field.low && value <= field.high ? value : null;
}

function cronFieldOk(field, text) {
  return text.split(",").every((part) => {
    const [base, step, more] = part.split("/");
    if (more !== undefined || (step !== undefined && !(/^\d+$/.test(step) && Number(step) >= 1))) return false;
    if (base === "*") return true;
    const [low, high, extra] = base.split("-");
    if (extra !== undefined) return false;
    const first = cronValue(field, low);
    if (first === null) return false;
    if (high === undefined) return true;
    const last = cronValue(field, high);
    return last !== null && last >= first;
  });
}

function checkCron(text) {
  let spec = text.trim();
  if (/^(CRON_)?TZ=/.test(spec)) spec = spec.split(/\s+/).slice(1).join(" ");
  spec = spec.split("#")[0].trim();
  const quoted = code(text);
  if (spec.startsWith("@every")) {
    const [interval, phase] = spec.slice("@every".length).trim().split("/");
    if ([interval, ...(phase === undefined ? [] : [phase])].every((part) => GO_DURATION.test(part))) return [];
    return said(t("“{text}”: {every} needs an interval after it, such as {example}."), { text: quoted, every: code("@every"), example: code("@every 1h30m") });
  }
  if (spec.startsWith("@")) {
    if (SHORTHANDS.includes(spec)) return [];
    return said(t("“{text}”: the shorthands are {list}, and {every} followed by an interval, such as {example}."),
      { text: quoted, list: code(SHORTHANDS.join(" ")), every: code("@every"), example: code("@every 1h30m") });
  }
  const fields = spec.split(/\s+/).filter(Boolean);
  const layout = LAYOUTS[fields.length];
  if (!layout) {
    return said(t("“{text}” has {n} fields; a cron expression has five: minute hour day-of-month month day-of-week, such as {hourly} (every hour) or {weekdays} (9:00 on weekdays)."),
      { text: quoted, n: fields.length, hourly: code("0 * * * *"), weekdays: code("0 9 * * 1-5") });
  }
  for (let i = 0; i < layout.length; i += 1) {
    const field = layout[i];
    if (cronFieldOk(field, fields[i])) continue;
    const range = `${field.low}–${field.high}`;
    return said(t("“{text}”: the {field} field {value} is not within {range}{names}; a field is {any}, a value, a range ({range_example}), a list ({list}) or any of these with a step ({step})."), {
      text: quoted, field: t(field.name), value: code(fields[i]), range, names: field.called ? t(field.called) : "",
      any: code("*"), range_example: code("1-5"), list: code("1,15"), step: code("*/15"),
    });
  }
  return [];
}

// People write timetables in words: the form says what to write instead.
const WORDS = /^(every|each)\s+(\d+\s*)?(second|sec|minute|min|hour|hr|day|week)s?$|^(\d+)\s*(seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?)$|^(hourly|daily|weekly|monthly|yearly)$/i;
const IN_UNITS = { sec: "s", second: "s", min: "m", minute: "m", hr: "h", hour: "h", day: "d", week: "w" };
const CRON_OF = { h: "0 * * * *", d: "0 0 * * *", w: "0 0 * * 0", m: "* * * * *" };

function inWords(text) {
  const found = WORDS.exec(text.trim());
  if (!found) return null;
  if (found[6]) return { every: `@${found[6].toLowerCase()}` };
  const count = Number((found[2] || found[4] || "1").trim());
  const word = (found[3] || found[5]).toLowerCase().replace(/s$/, "");
  let unit = IN_UNITS[word] || IN_UNITS[word.replace(/s$/, "")];
  let n = count;
  if (unit === "w") { unit = "d"; n = count * 7; }
  const weekly = IN_UNITS[word] === "w";
  const cron = count === 1 ? CRON_OF[weekly ? "w" : unit] : null;
  return { every: `${n}${unit}`, cron };
}

// What the form sends for a timetable, or what is wrong with it: {body} or {problem}.
export function readTiming(raw) {
  const text = raw.trim();
  if (!text) return { problem: [t("Say when: an interval or a cron expression (see above).")] };
  const words = inWords(text);
  if (words) {
    const values = { text: code(text), every: code(words.every), cron: code(words.cron || "") };
    return {
      problem: said(words.cron
        ? t("“{text}” is not a form the schedule reads: write {every} (or the cron {cron}).")
        : t("“{text}” is not a form the schedule reads: write {every}."), values),
    };
  }
  // An interval is a number with a unit (1h30m); anything with a space or an @ is cron.
  if (!/\s/.test(text) && !text.startsWith("@")) {
    const wrong = checkEvery(text);
    if (wrong === null) {
      return {
        problem: said(t("“{text}” is not an interval: an interval is whole numbers, each with a unit d, h, m or s, largest first, such as {a}, {b} or {c}; a cron expression has five fields, such as {cron}."),
          { text: code(text), a: code("1h"), b: code("30m"), c: code("1h30m"), cron: code("0 9 * * 1-5") }),
      };
    }
    return wrong.length ? { problem: wrong } : { body: { every: text } };
  }
  const wrong = checkCron(text);
  return wrong.length ? { problem: wrong } : { body: { cron: [text] } };
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
    this.timing = el("input", {
      class: "schedule-timing", placeholder: t("1h, 30m, 90s or a cron expression"), "aria-label": t("Every (or cron)"),
      "aria-describedby": "schedule-help schedule-check", autocapitalize: "off", autocomplete: "off", spellcheck: "false",
    });
    this.check = el("p", { class: "schedule-check", id: "schedule-check", "aria-live": "polite" });
    this.timing.addEventListener("input", () => this.checkTiming({ quietWhileEmpty: true }));
    this.timezone = el("input", { class: "schedule-timezone", placeholder: t("time zone (default UTC)"), "aria-label": t("Time zone") });
    this.busy = el("select", { class: "schedule-busy", "aria-label": t("When the session is busy") },
      ...Object.entries(BUSY).map(([value, label]) => el("option", { value }, t(label))));
    this.newSession = el("input", { type: "checkbox", class: "schedule-new-session" });
    const submit = el("button", { type: "submit" }, t("Add schedule"));
    const form = el("form", { class: "schedule-form", novalidate: true },
      el("h3", {}, t("New schedule")),
      this.prompt,
      this.timing,
      this.check,
      this.help(),
      this.timezone,
      el("label", {}, t("When the session is busy:"), " ", this.busy),
      el("label", {}, this.newSession, " ", t("a new session each time")),
      submit);
    form.addEventListener("submit", (event) => { event.preventDefault(); this.submit(); });
    return form;
  }

  // The forms a timetable takes, each with an example, shown before anything is typed.
  help() {
    return el("div", { class: "schedule-help", id: "schedule-help" },
      el("div", {}, ...said(t("Every: {a}, {b}, {c}, {d} or {e} (whole numbers with a unit d, h, m or s, largest first)."),
        { a: code("90s"), b: code("30m"), c: code("1h"), d: code("1h30m"), e: code("2d") })),
      el("div", {}, ...said(t("Or cron, five fields (minute hour day-of-month month day-of-week): {a} is 9:00 on weekdays, {b} every 15 minutes; or {c}, {d}, {e}, {f}."),
        { a: code("0 9 * * 1-5"), b: code("*/15 * * * *"), c: code("@hourly"), d: code("@daily"), e: code("@weekly"), f: code("@monthly") })));
  }

  // Says what is wrong with the timetable typed (nothing once it is right); returns what
  // to send, or null.
  checkTiming({ quietWhileEmpty = false } = {}) {
    const read = quietWhileEmpty && !this.timing.value.trim() ? { body: null } : readTiming(this.timing.value);
    this.check.replaceChildren(...(read.problem || []));
    if (read.problem) this.timing.setAttribute("aria-invalid", "true");
    else this.timing.removeAttribute("aria-invalid");
    return read.body || null;
  }

  async submit() {
    const timing = this.checkTiming();
    if (!timing) {
      this.timing.focus();
      return;
    }
    const body = {
      prompt: this.prompt.value,
      busy: this.busy.value,
      new_session: this.newSession.checked,
      ...timing,
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
    const timetable = schedule.every
      ? said(t("every {every}"), { every: code(schedule.every) })
      : said(t("cron {cron}"), { cron: code(schedule.cron.join(" | ")) });
    const zone = schedule.timezone ? [" (", code(schedule.timezone), ")"] : [];
    const next = !schedule.paused && schedule.next_runs.length ? t("next {when}", { when: when(schedule.next_runs[0]) }) : "";
    const last = schedule.recent.length ? t("last fired {when}", { when: when(schedule.recent[schedule.recent.length - 1].scheduled_at) }) : "";
    const id = schedule.id;
    return el("li", { class: `schedule${schedule.paused ? " paused" : ""}`, dataset: { id } },
      el("div", { class: "schedule-head" },
        el("span", { class: "schedule-state" }, schedule.paused ? t("paused") : t("active")),
        el("span", { class: "schedule-when" }, ...timetable, ...zone)),
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
