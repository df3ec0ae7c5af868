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
