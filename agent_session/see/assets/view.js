"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  let rows = data.rows;
  const ROW = 26;
  const TRACK = 240;
  const list = document.getElementById("list");
  const holder = document.getElementById("rows");
  const detail = document.getElementById("detail");
  const detailBody = document.getElementById("detail-body");
  let lanes = [];  // per row: [its turn's start, its turn's span] (a turn is a lane in time)
  let selected = -1;

  function measure() {
    lanes = new Array(rows.length);
    let first = 0;
    const close = (end) => {
      const start = rows[first] ? rows[first].t : 0;
      let last = start;
      for (let i = first; i < end; i++) last = Math.max(last, rows[i].end ?? rows[i].t);
      for (let i = first; i < end; i++) lanes[i] = [start, Math.max(1, last - start)];
    };
    rows.forEach((r, i) => {
      if (r.k === "turn" && i > first) { close(i); first = i; }
    });
    close(rows.length);
  }
  measure();
  function spanOf(r) {
    if (r.k === "call") return r.end === undefined ? 0 : r.end - r.t;
    if (r.k === "step") return r.modelMs ?? 0;
    return null;
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function duration(value) {
    if (value === undefined || value === null) return "";
    if (value < 1000) return `${value} ms`;
    if (value < 60000) return `${(value / 1000).toFixed(1)} s`;
    const minutes = Math.floor(value / 60000);
    if (minutes < 60) return `${minutes} min ${Math.round((value % 60000) / 1000)} s`;
    return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  }
  const dates = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  function when(ms) { return typeof ms === "number" ? dates.format(new Date(ms)) : ""; }
  function offset(value) { return `+${(value / 1000).toFixed(3)} s`; }
  function money(value) {
    if (value === undefined || value === null) return "";
    return `${value < 0.01 ? value.toFixed(4) : value.toFixed(2)} ${data.currency}`;
  }
  function tokens(input, output) { return `${input ?? 0} in / ${output ?? 0} out tokens`; }
  function joined(parts) {  // (a part that is not there: "", null, undefined or false)
    return parts.filter((p) => p !== "" && p !== null && p !== undefined && p !== false)
      .join(" · ");
  }
  function counts(usage) {  // {"inputTokens": 120} as "input tokens 120"
    return Object.entries(usage).map(([key, value]) =>
      `${key.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`)} ${JSON.stringify(value)}`);
  }

  const title = (() => {
    const user = rows.find((r) => r.k === "user" && r.text);
    return user ? user.text.slice(0, 120) : `session ${data.id}`;
  })();
  document.title = `${title} — session ${data.id}`;

  const head = document.getElementById("head");
  function heading(events) {
    head.replaceChildren();
    if (data.back) {
      const back = el("a", "back", "← all sessions");
      back.href = data.back;
      head.appendChild(back);
    }
    head.appendChild(el("h1", "", title));
    const totals = data.totals;
    const models = [...new Set(data.headers.map((h) => h.model).filter(Boolean))];
    head.appendChild(el("div", "facts", joined([
      `session ${data.id}`, when(data.createdAt) && `started ${when(data.createdAt)}`,
      models.length ? `model ${models.join(", ")}` : "", `${events} events`,
    ])));
    head.appendChild(el("div", "totals", joined([
      `${totals.turns} turns`, `${totals.steps} steps`, `${totals.calls} tool calls`,
      `${duration(totals.dur)} in all`, `model ${duration(totals.modelMs)}`,
      `tools ${duration(totals.toolMs)}`, tokens(totals.tokensIn, totals.tokensOut),
      totals.cost === null ? "" : `cost ${money(totals.cost)}`,
    ])));
    if (data.parent) {  // a fork: where it branched, and the way to its parent
      const fork = el("div", "fork", "forked from session ");
      const name = data.parentUrl ? el("a", "parent", data.parent) : el("b", "", data.parent);
      if (data.parentUrl) name.href = data.parentUrl;
      fork.appendChild(name);
      if (data.seed !== null && data.seed !== undefined) {
        fork.appendChild(document.createTextNode(` after its first ${data.seed} events`));
      }
      if (!data.parentUrl) fork.appendChild(el("code", "", data.parentCommand));
      head.appendChild(fork);
    }
    const marks = el("div", "marks");
    const crashes = rows.filter((r) => r.k === "crash").length;
    const repaired = rows.filter((r) => r.repaired).length;
    const settled = rows.filter((r) => r.settled).length;
    const asked = rows.filter((r) => r.k === "asked").length;
    const compacted = rows.filter((r) => r.k === "compacted").length;
    marks.appendChild(el("span", crashes ? "flag" : "", `crashes: ${crashes}`));
    marks.appendChild(el("span", repaired ? "flag" : "", `repaired calls: ${repaired}`));
    marks.appendChild(el("span", "", `settled calls: ${settled}`));
    marks.appendChild(el("span", "", `approvals asked: ${asked}`));
    if (compacted) marks.appendChild(el("span", "", `compactions: ${compacted}`));
    const subagents = rows.filter((r) => r.k === "subagent").length;
    if (subagents) marks.appendChild(el("span", "", `subagents: ${subagents}`));
    head.appendChild(marks);
    const system = [...new Set(data.headers.map((h) => h.system).filter(Boolean))];
    if (system.length) {
      const box = el("details", "system");
      box.appendChild(el("summary", "", system.length > 1
        ? `system prompt (${system.length} in this session; the last one — each step shows its own)`
        : "system prompt"));
      box.appendChild(el("pre", "", system[system.length - 1]));
      head.appendChild(box);
    }
    waits();
  }

  function waits() {  // a parked session: what waits, why, and how to decide it
    const panel = document.getElementById("parked");
    panel.replaceChildren();
    panel.hidden = data.parked.length === 0;
    for (const call of data.parked) {
      const box = el("div", "wait");
      box.appendChild(el("h2", "", call.decided
        ? `decided ${call.decided}: tool ${call.tool} runs as decided when the agent resumes`
        : `waiting for approval: tool ${call.tool}`));
      box.appendChild(el("div", "", joined([
        `call ${call.callId}`, `asked ${when(call.askedAt)}`,
        call.expiresAt ? `expires ${when(call.expiresAt)}` : "no deadline",
      ])));
      if (call.reason) box.appendChild(el("div", "reason", `why: ${call.reason}`));
      box.appendChild(el("div", "label", "arguments it asks to run with:"));
      box.appendChild(el("pre", "arguments", call.arguments));
      if (!call.decided) {
        box.appendChild(el("div", "label", "to decide it:"));
        box.appendChild(el("pre", "command", `${call.approve}\n${call.reject}`));
      }
      panel.appendChild(box);
    }
  }
  heading(data.events);

  function describe(r) {
    switch (r.k) {
      case "turn": return joined([
        `turn ${r.turn}`, when(r.at), duration(r.dur), `model ${duration(r.modelMs)}`,
        `tools ${duration(r.toolMs)}`, tokens(r.tokensIn, r.tokensOut),
        r.cost === null || r.cost === undefined ? "" : money(r.cost),
      ]);
      case "step": {
        const parts = [`step ${r.step}`, r.model ?? ""];
        if (r.sent === undefined && r.modelMs !== undefined) parts.push("settled (no request)");
        if (r.modelMs !== undefined) parts.push(`model ${duration(r.modelMs)}`);
        if (r.firstToken !== undefined && r.firstToken !== null) {
          parts.push(`first token ${duration(r.firstToken - r.t)}`);
        }
        if (r.usage) parts.push(tokens(r.usage.inputTokens, r.usage.outputTokens));
        if (r.cost !== undefined) parts.push(money(r.cost));
        return joined(parts);
      }
      case "call": {
        let text = `${r.name}(${r.args}) [${r.id}]`;
        if (r.end !== undefined) text += ` ${duration(r.end - r.t)}`;
        if (r.repaired) text += ` REPAIRED: ${r.repaired}`;
        if (r.settled) text += ` SETTLED: ${r.settled}`;
        return text;
      }
      case "crash": return `CRASH — turn ${r.turn} cut after seq ${r.seq}`;
      case "asked": return `approval asked for ${r.text}`;
      case "decided": return `approval decided: ${r.text}`;
      case "end": return `end of turn ${r.turn}: ${r.text}`;
      default: return r.text;
    }
  }

  function section(name, text) {
    detailBody.appendChild(el("h3", "", name));
    detailBody.appendChild(el("pre", "", text));
  }
  function sentBy(r) {  // what a step's request was sent, rebuilt from the log
    const request = data.requests[String(r.sent)];
    if (!request) {
      section("sent", "nothing: this step recorded again an answer a crash cut (no request)");
      return;
    }
    const header = data.headers[request.h];
    section("sent to", joined([header.model, header.provider]) || "(the log names no model)");
    if (header.config !== "{}") section("parameters", header.config);
    if (header.system) section("system prompt", header.system);
    if (header.tools.length) {
      section("tools", header.tools.map((t) =>
        `${t.name}: ${t.description}\n  ${t.parameters}`).join("\n"));
    }
    detailBody.appendChild(el("h3", "", "messages"));
    for (const [first, end] of request.m) {
      for (let i = first; i < end; i++) {
        const message = data.messages[i];
        const node = el("div", `message ${message.role}`);
        node.appendChild(el("span", "role", `${message.role} (seq ${message.seq})`));
        node.appendChild(el("pre", "", message.text));
        detailBody.appendChild(node);
      }
    }
  }
  function show(index) {
    const r = rows[index];
    detail.hidden = false;
    detailBody.replaceChildren();
    detailBody.appendChild(el("h2", "", describe(r)));
    if (r.k === "step") {
      sentBy(r);
      section("came back", r.answer ?? "(no answer: the step was cut)");
      section("response", joined([
        r.finish && `finish reason ${r.finish}`, r.responseId && `id ${r.responseId}`,
        ...(r.usage ? counts(r.usage) : []), r.cost !== undefined ? money(r.cost) : "",
      ]) || "(the provider said nothing more)");
    } else if (r.k === "call") {
      section("arguments", r.args);
      section(`result${r.error ? " (error)" : ""}`, r.result ?? "(none)");
      if (r.repaired) section("repaired", r.repaired);
      if (r.settled) section("settled", r.settled);
    } else if (r.text !== undefined) {
      section(r.k, r.text);
    }
  }

  function row(r, index) {
    const classes = ["row", r.k];
    if (r.repaired) classes.push("repaired");
    if (r.settled) classes.push("settled");
    if (r.error) classes.push("error");
    if (index === selected) classes.push("selected");
    const node = el("div", classes.join(" "));
    node.style.top = `${index * ROW}px`;
    node.dataset.index = String(index);
    node.id = `row-${index}`;
    node.setAttribute("role", "option");
    node.setAttribute("aria-selected", index === selected ? "true" : "false");
    node.appendChild(el("span", "t", offset(r.t)));
    const span = spanOf(r);
    if (span !== null) {  // placed on its turn's lane: where in the turn, and how long
      const [start, width] = lanes[index];
      const track = el("span", "track");
      const bar = el("span", "bar");
      bar.style.left = `${Math.round(((r.t - start) / width) * TRACK)}px`;
      bar.style.width = `${Math.max(3, Math.round((span / width) * TRACK))}px`;
      track.appendChild(bar);
      node.appendChild(track);
    }
    node.addEventListener("click", () => { select(index); show(index); });
    node.appendChild(el("span", "what", describe(r)));
    return node;
  }

  holder.style.height = `${rows.length * ROW}px`;
  let shown = [-1, -1];
  function paint(force) {
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 10);
    const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 10);
    if (!force && first === shown[0] && last === shown[1]) return;
    shown = [first, last];
    const fragment = document.createDocumentFragment();
    for (let i = first; i < last; i++) fragment.appendChild(row(rows[i], i));
    holder.replaceChildren(fragment);
  }
  function select(index) {  // the keyboard's row: kept in view
    selected = Math.max(0, Math.min(rows.length - 1, index));
    const top = selected * ROW;
    if (top < list.scrollTop) list.scrollTop = top;
    else if (top + ROW > list.scrollTop + list.clientHeight) {
      list.scrollTop = top + ROW - list.clientHeight;
    }
    paint(true);
    list.setAttribute("aria-activedescendant", `row-${selected}`);
    document.body.dataset.selected = String(selected);
  }
  const page = () => Math.max(1, Math.floor(list.clientHeight / ROW) - 1);
  const keys = {
    ArrowDown: () => select(selected + 1), j: () => select(selected + 1),
    ArrowUp: () => select(selected - 1), k: () => select(selected - 1),
    PageDown: () => select(selected + page()), PageUp: () => select(selected - page()),
    Home: () => select(0), End: () => select(rows.length - 1),
    Enter: () => { if (selected >= 0) show(selected); },
    " ": () => { if (selected >= 0) show(selected); },
    Escape: () => { detail.hidden = true; list.focus(); },
  };
  document.addEventListener("keydown", (event) => {
    const act = keys[event.key];
    if (!act || event.altKey || event.ctrlKey || event.metaKey || !rows.length) return;
    if (event.target instanceof HTMLElement && event.target.closest("summary, a, pre")) {
      if (event.key !== "Escape") return;
    }
    event.preventDefault();
    act();
  });
  list.addEventListener("scroll", () => paint(false), { passive: true });
  window.addEventListener("resize", () => paint(false));
  paint(true);
  list.focus();
  document.body.dataset.ready = "1";

  let events = data.events;
  async function follow() {  // a served page follows a session being written
    try {
      const response = await fetch(data.live, { cache: "no-store" });
      const fresh = await response.json();
      if (fresh.events !== events) {
        const atEnd = list.scrollTop + list.clientHeight >= holder.offsetHeight - ROW;
        events = fresh.events;
        Object.assign(data, fresh);
        rows = fresh.rows;
        measure();
        heading(events);
        holder.style.height = `${rows.length * ROW}px`;
        if (atEnd) list.scrollTop = holder.offsetHeight;
        paint(true);
        document.body.dataset.events = String(events);
      }
    } catch (error) {
      document.body.dataset.followError = String(error);
    }
    setTimeout(follow, 1000);
  }
  if (data.live) {
    document.body.dataset.events = String(events);
    setTimeout(follow, 1000);
  }
})();
