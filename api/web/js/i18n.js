// The page's labels in the reader's language: the browser's first language the page has
// (English or Chinese), English otherwise. A label is in one language, never both.
//
// `t("English text", { name: value })` gives the text in the page's language, with
// `{name}` filled in. The English text is the key: a text with no translation reads in
// English. Elements of index.html marked `data-i18n` are translated once, at start
// (`data-i18n-label` for the aria-label).

const ZH = {
  // Sign-in, the top bar, the panes and tabs
  "Sign in": "登录",
  "Sign out": "退出登录",
  "Use an API token of this server": "使用本服务器的 API 令牌",
  "or the one": "或",
  "printed": "打印出的那个",
  "API token": "API 令牌",
  "Remember on this device": "在此设备上记住",
  "That token is not valid.": "这个令牌无效。",
  "Signed out: the token was refused.": "已退出：令牌被拒绝。",
  "live": "已连接",
  "reconnecting…": "正在重新连接…",
  "Panes": "窗格",
  "Sessions": "会话",
  "Conversation": "对话",
  "Activity": "活动",
  "Tree": "树",
  "Details": "详情",
  "Show the whole header": "显示完整的标题栏",
  "Activity, tree and schedules": "活动、树和定时",
  "Where to begin:": "从这里开始：",
  "Press “New session”.": "点“新建会话”。",
  "Type what the agent should do and press Enter.": "写下智能体该做什么，然后按 Enter。",
  "Follow its work here: each step it takes, the tree of its messages, and its schedules.":
    "在这里跟进它的工作：它的每一步、它的消息树，以及它的定时任务。",
  "New session": "新建会话",
  "Session {id}": "会话 {id}",
  "Session {id} does not exist (or is not yours).": "会话 {id} 不存在（或不属于你）。",
  "No sessions yet: “New session” starts one.": "还没有会话：点“新建会话”开始一个。",
  "No session is open. Choose one in the list, or start one with “New session”.":
    "没有打开的会话。在列表中选一个，或点“新建会话”开始一个。",
  "A session is one task for the agent: type what it should do, and it works on it with its tools. While it works you can queue more, guide it, or stop it.":
    "一个会话是交给智能体的一项任务：写下它该做什么，它会用工具去做。它工作时，你可以继续排队输入、引导它，或停止它。",
  "running": "运行中",
  "idle": "空闲",
  // The composer and its chips
  "Message the agent (Enter to send, Shift+Enter for a new line)": "给智能体发消息（Enter 发送，Shift+Enter 换行）",
  "Message": "消息",
  "Send": "发送",
  "More ways to send": "更多发送方式",
  "Guide the run now": "立即引导本次运行",
  "Guidance for the run in progress, taken at its next safe point": "给进行中运行的引导，在下一个安全点被采纳",
  "Steer": "转向",
  "Reaches the model after the current tool calls finish": "在当前工具调用结束后送达模型",
  "Follow-up": "后续",
  "Delivered when the agent would otherwise stop": "在智能体本要停下时送达",
  "Queue for the next run": "排队到下一次运行",
  "Waits in the input queue": "在输入队列中等待",
  "Edit": "编辑",
  "Guide": "引导",
  "Delete": "删除",
  "queued": "已排队",
  "guidance, waiting for a safe point": "引导，等待安全点",
  "gone": "已不存在",
  "cancelled by Stop": "已被停止取消",
  "withdrawn (edited or deleted)": "已撤回（编辑或删除）",
  "moved back into the message box": "已移回输入框",
  "sent with the next run": "已随下一次运行发送",
  "sent as the new run's prompt": "已作为新运行的提示发送",
  "reached the agent": "已送达智能体",
  "reached the agent {where}": "已送达智能体：{where}",
  "sent: the run is starting…": "已发送：运行正在启动…",
  "sent. No worker is answering yet: the run starts when one is back, nothing is lost.":
    "已发送。目前没有 worker 响应：有 worker 恢复后运行就会开始，不会丢失任何内容。",
  "The run has ended and the agent has not seen these: they go with your next message, before it.":
    "运行已结束，智能体还没有看到这些：它们会在你的下一条消息之前一起发送。",
  "Send them now": "现在发送",
  // The run header
  "Rename": "重命名",
  "Session name": "会话名称",
  "Budget": "预算",
  "What the session's runs together may spend": "本会话所有运行合计可花费的上限",
  "Compact": "压缩",
  "Compacting…": "正在压缩…",
  "Stop": "停止",
  "Stopping…": "正在停止…",
  "turn {n}": "第 {n} 轮",
  "{n} tokens": "{n} 个 token",
  "offline model (scripted)": "离线模型（脚本）",
  "No worker is answering for this run: it is paused, nothing is lost, and it goes on when a worker is back.":
    "没有 worker 响应本次运行：它已暂停，不会丢失任何内容，worker 恢复后继续。",
  "working": "工作中",
  "waiting for a budget raise": "等待提高预算",
  "waiting for approval": "等待批准",
  "waiting for your answer": "等待你的回答",
  "waiting for its machine": "等待其机器",
  "retrying the model call": "正在重试模型调用",
  "compacting": "压缩中",
  "summarising a branch": "总结分支中",
  // The conversation
  "You": "你",
  "Assistant": "助手",
  "Load earlier messages": "加载更早的消息",
  "Nothing here yet. Type below what the agent should do and press Enter: its replies and tool calls show here.":
    "这里还没有内容。在下方写下智能体该做什么并按 Enter：它的回复和工具调用会显示在这里。",
  "arguments": "参数",
  "Thinking": "思考",
  "Thinking (redacted)": "思考（已隐去）",
  "planning…": "规划中…",
  "planned": "已计划",
  "done": "完成",
  "error": "出错",
  "interrupted": "已中断",
  "aborted": "已中止",
  "skipped for replan": "为重新规划而跳过",
  "awaiting approval": "等待批准",
  "awaiting your answer": "等待你的回答",
  "Show all output ({lines}, {chars} characters)": "显示全部输出（{lines}，{chars} 个字符）",
  "Fold output": "折叠输出",
  "Stopped.": "已停止。",
  "The run was stopped here.": "运行在这里被停止。",
  "Change budget": "修改预算",
  "Budget reached": "已达预算",
  "Your guidance": "你的引导",
  "Interrupted by your guidance": "被你的引导中断",
  "Not run because of your guidance": "因你的引导而未运行",
  "Show the guidance where the agent received it": "显示智能体收到引导的位置",
  "It reached the agent while a tool ran and interrupted the running ": "它在工具运行时送达智能体，并中断了正在运行的 ",
  " (its output so far is kept).": "（已保留到此为止的输出）。",
  "It reached the agent after the running tool finished.": "它在正在运行的工具结束后送达智能体。",
  "It reached the agent after the running tools finished.": "它在正在运行的工具结束后送达智能体。",
  "It reached the agent before the tools it had planned ran: the agent planned again.":
    "它在计划的工具运行前送达智能体：智能体重新做了计划。",
  "It reached the agent {where}.": "它送达智能体：{where}。",
  " Not run because of it: ": " 因它而未运行：",
  "before its next model call": "在下一次模型调用之前",
  "before the tools it had planned ran": "在计划的工具运行之前",
  "while a tool ran, and interrupted it": "在工具运行时，并中断了它",
  "after the running tool finished": "在正在运行的工具结束之后",
  "as it was about to finish": "在它即将结束时",
  "at a safe point": "在一个安全点",
  // Approvals and budgets
  "Approve": "批准",
  "Always": "总是允许",
  "Deny": "拒绝",
  "Question": "问题",
  "The agent asks you:": "智能体问你：",
  "Your answer": "你的回答",
  "Or answer in your own words": "或用你自己的话回答",
  "Answer": "回答",
  "Raise": "提高",
  "Raising…": "正在提高…",
  "Save": "保存",
  "Close": "关闭",
  "Remove budget": "移除预算",
  // The activity and the tree
  "The run's events show here as the agent works: turns, tool calls, guidance, save points.":
    "智能体工作时，运行事件会显示在这里：轮次、工具调用、引导、保存点。",
  "Go to": "跳转",
  "Fork": "分叉",
  "Label": "标签",
  "current": "当前",
  "open sub-agent": "打开子智能体",
  "label (empty clears it)": "标签（留空则清除）",
  "(empty)": "（空）",
  "The tree shows the session's messages once there are some: go back to one, fork from it, or label it.":
    "有消息后，树会显示会话的消息：可以回到某条、从它分叉，或给它加标签。",
  "Showing the newest part of a large tree.": "只显示大树中最新的部分。",
  "Your messages, branches, labels and compactions are listed; “+N” counts the entries folded into the line above (the agent's replies and tool calls).":
    "这里列出你的消息、分支、标签和压缩；“+N”表示折叠进上一行的条目数（智能体的回复和工具调用）。",
  "{n} more entries on this line (replies, tool calls), folded into it": "此行还折叠了 {n} 个条目（回复、工具调用）",
  "The page cannot reach the server: it or the network is down. Try again once the connection is back (the badge above says live).":
    "页面无法连接服务器：服务器或网络不可用。连接恢复后（上方标记显示“已连接”）再试。",
  // Schedules (schedules.js) and a scheduled prompt in the conversation
  "Schedules": "定时",
  "Scheduled": "定时发送",
  "Sent by schedule {id} for {when}": "由定时任务 {id} 按 {when} 发送",
  "Prompt to send": "要发送的提示",
  "1h, 30m, 90s or a cron expression": "1h、30m、90s 或 cron 表达式",
  "Every (or cron)": "间隔（或 cron）",
  "time zone (default UTC)": "时区（默认 UTC）",
  "Time zone": "时区",
  "When the session is busy": "会话忙时",
  "When the session is busy:": "会话忙时：",
  "queue as a follow-up": "作为后续消息排队",
  "skip": "跳过",
  "run in a new session": "在新会话中运行",
  "a new session each time": "每次新建会话",
  "Add schedule": "添加定时任务",
  "New schedule": "新建定时任务",
  "No schedules: add one below to send this session a prompt on a timetable.": "没有定时任务：在下面添加一个，按时间表给这个会话发送提示。",
  "every {every}": "每 {every}",
  "next {when}": "下次 {when}",
  "last fired {when}": "上次 {when}",
  "busy: {what}": "忙时：{what}",
  "paused": "已暂停",
  "active": "生效中",
  "Resume": "恢复",
  "Pause": "暂停",
  "Run now": "立即运行",
  // The run header's figures (header.js) and what model calls cost (cost.js)
  "tokens and cost come with the model's first reply": "token 数和费用在模型第一次回复后显示",
  "cost counted when this turn ends": "费用在本轮结束时计入",
  "run {cost} before this turn": "本轮之前运行花费 {cost}",
  "run {cost}": "本次运行 {cost}",
  "session {cost}": "会话 {cost}",
  "The session: {n} tokens": "会话：{n} 个 token",
  "{n}% cache hits": "缓存命中\u00a0{n}%",
  "{s} s": "{s} 秒",
  "{m} min {s} s": "{m} 分 {s} 秒",
  "model": "模型",
  "cost unknown (no price for model {models})": "费用未知（没有模型 {models} 的价格）",
  "{input} in, {output} out, {read} cache read, {write} cache write tokens":
    "输入 {input}，输出 {output}，缓存读取 {read}，缓存写入 {write} 个 token",
  "No API key is set for {model}: a local scripted model answers in its place. Its replies are not the model's.":
    "没有为 {model} 设置 API 密钥：由本地的脚本模型代替它回答。这些回复不是该模型给出的。",
  "offline": "离线",
  "the server answered {status}": "服务器返回了 {status}",
  // Approval cards (approvals.js)
  "Approval": "批准",
  "Waits for your approval": "等待你的批准",
  "your approval policy asks about calls no rule of it covers": "你的批准策略对没有规则覆盖的调用都会询问",
  "asked by the rule": "询问它的规则：",
  "asked by": "询问者：",
  "Reason for denying": "拒绝的理由",
  "Reason for denying, read by the model (optional)": "拒绝的理由，模型会读到（可不填）",
  "Approve, and allow this tool (for bash: this exact command) from now on": "批准，并从此允许这个工具（对 bash：这条完全相同的命令）",
  // Budgets: the header's line, the card of a run that waits (budget.js) and the editor
  // (budget_editor.js)
  "budget: {used}": "预算：{used}",
  "run budget: {used}": "运行预算：{used}",
  "session budget: {used}": "会话预算：{used}",
  "{spent} of {limit} turn": "{spent}/{limit} 轮",
  "{spent} of {limit} turns": "{spent}/{limit} 轮",
  "{spent} of {limit} tokens": "{spent}/{limit} 个 token",
  "{spent} of {limit}": "{spent}/{limit}",
  "{spent} of {limit} s": "{spent}/{limit} 秒",
  "{n} turn": "{n} 轮",
  "{n} turns": "{n} 轮",
  "; ": "；",
  ". ": "。",
  "the run's": "本次运行的",
  "the session's": "会话的",
  "turn limit": "轮数上限",
  "token limit": "token 上限",
  "cost limit": "费用上限",
  "wall-time limit": "耗时上限",
  "{whose} {limit} ({allowed}) is reached: {spent} spent": "{whose}{limit}（{allowed}）已达到：已用 {spent}",
  "The run waits for the budget to be raised.": "运行在等待提高预算。",
  "the run waits for a raise": "运行会等待提高预算",
  "the run stops": "运行会停止",
  " (no price for {models}: not counted in cost)": "（没有 {models} 的价格：不计入费用）",
  "{whose}: when a limit is reached, {then}{unpriced}.": "{whose}：达到上限时，{then}{unpriced}。",
  "The run's budget": "本次运行的预算",
  "The session's budget": "会话的预算",
  "Turns": "轮数",
  "Tokens": "token 数",
  "Cost (US$)": "费用（US$）",
  "Wall time (s)": "耗时（秒）",
  "Reading the budget…": "正在读取预算…",
  "Waits for a budget raise": "等待提高预算",
  "An empty box removes that limit. Stop, in the header, ends the run.": "留空的框会移除该上限。标题栏中的“停止”会结束运行。",
  "{whose}: {label} is not a number": "{whose}：{label}不是数字",
  "Session budget": "会话预算",
  "what all the session's runs together may spend": "会话所有运行合计可花费的上限",
  "no limit": "不限",
  "{n} turn spent": "已用 {n} 轮",
  "{n} turns spent": "已用 {n} 轮",
  "{n} tokens spent": "已用 {n} 个 token",
  "{cost} spent": "已花费 {cost}",
  "{s} s spent": "已用 {s} 秒",
  "stop the run": "停止运行",
  "wait for a raise": "等待提高预算",
  "When a limit is reached:": "达到上限时：",
  "No price for {models}: its turns count nothing toward cost.": "没有 {models} 的价格：它的轮次不计入费用。",
  "An empty box is no limit. A running run uses the new budget from its next model call.":
    "留空即不限。正在进行的运行从下一次模型调用起使用新预算。",
  "{label}: \"{text}\" is not a number (leave the box empty for no limit)": "{label}：“{text}”不是数字（不限请留空）",
  "{label}: \"{text}\" is not a whole number": "{label}：“{text}”不是整数",
  "{label} should be greater than or equal to {n}": "{label}应不小于 {n}",
  "{label} should be greater than {n}": "{label}应大于 {n}",
  "Not saved: {why}": "未保存：{why}",
  // The Schedules form's forms and checks (schedules.js)
  "Every: {a}, {b}, {c}, {d} or {e} (whole numbers with a unit d, h, m or s, largest first).":
    "间隔：{a}、{b}、{c}、{d} 或 {e}（整数加单位 d、h、m 或 s，大单位在前）。",
  "Or cron, five fields (minute hour day-of-month month day-of-week): {a} is 9:00 on weekdays, {b} every 15 minutes; or {c}, {d}, {e}, {f}.":
    "或 cron，五个字段（分 时 日 月 星期）：{a} 是工作日 9:00，{b} 是每 15 分钟；或 {c}、{d}、{e}、{f}。",
  "cron {cron}": "cron {cron}",
  "Say when: an interval or a cron expression (see above).": "请写明时间：一个间隔或一个 cron 表达式（见上）。",
  "“{text}” is not a form the schedule reads: write {every} (or the cron {cron}).":
    "定时任务不认识“{text}”这种写法：请写 {every}（或 cron {cron}）。",
  "“{text}” is not a form the schedule reads: write {every}.": "定时任务不认识“{text}”这种写法：请写 {every}。",
  "“{text}” is not an interval: an interval is whole numbers, each with a unit d, h, m or s, largest first, such as {a}, {b} or {c}; a cron expression has five fields, such as {cron}.":
    "“{text}”不是间隔：间隔是整数加单位 d、h、m 或 s，大单位在前，例如 {a}、{b} 或 {c}；cron 表达式有五个字段，例如 {cron}。",
  "“{text}”: each unit once, largest first, such as {example}.": "“{text}”：每个单位只写一次，大单位在前，例如 {example}。",
  "“{text}”: an interval is at least {min} and at most {max}.": "“{text}”：间隔至少 {min}，至多 {max}。",
  "“{text}”: {every} needs an interval after it, such as {example}.": "“{text}”：{every} 后面要跟一个间隔，例如 {example}。",
  "“{text}”: the shorthands are {list}, and {every} followed by an interval, such as {example}.":
    "“{text}”：可用的简写有 {list}，以及 {every} 加一个间隔，例如 {example}。",
  "“{text}” has {n} fields; a cron expression has five: minute hour day-of-month month day-of-week, such as {hourly} (every hour) or {weekdays} (9:00 on weekdays).":
    "“{text}”有 {n} 个字段；cron 表达式有五个：分 时 日 月 星期，例如 {hourly}（每小时）或 {weekdays}（工作日 9:00）。",
  "“{text}”: the {field} field {value} is not within {range}{names}; a field is {any}, a value, a range ({range_example}), a list ({list}) or any of these with a step ({step}).":
    "“{text}”：{field}字段 {value} 不在 {range} 之内{names}；一个字段可以是 {any}、一个值、一个范围（{range_example}）、一个列表（{list}），或它们加上步长（{step}）。",
  "second": "秒",
  "minute": "分",
  "hour": "时",
  "day-of-month": "日",
  "month": "月",
  "day-of-week": "星期",
  "year": "年",
  " or a month's name": "，也不是月份的名称",
  " or a day's name": "，也不是星期的名称",
};

function chosen() {
  for (const tag of navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"]) {
    const base = tag.toLowerCase().split("-")[0];
    if (base === "zh" || base === "en") return base;
  }
  return "en";
}

export const LANG = chosen();
const TABLE = LANG === "zh" ? ZH : {};

export function t(text, values = {}) {
  const found = TABLE[text] ?? text;
  return found.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

// index.html's own labels, once.
export function translatePage(root = document) {
  document.documentElement.lang = LANG === "zh" ? "zh-Hans" : "en";
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.textContent.trim().replace(/\s+/g, " "));
  for (const node of root.querySelectorAll("[data-i18n-label]")) node.setAttribute("aria-label", t(node.getAttribute("aria-label")));
}
