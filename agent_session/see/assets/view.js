"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  let rows = data.rows;
  const ROW = 26;
  const list = document.getElementById("list");
  const holder = document.getElementById("rows");
  const detail = document.getElementById("detail");
  const detailText = document.getElementById("detail-text");
  const TRACK = 240;
  let lanes = [];  // per row: [its turn's start, its turn's span] (a turn is a lane in time)
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
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function ms(value) { return value === undefined || value === null ? "" : `${value} ms`; }
  function seconds(value) { return `+${(value / 1000).toFixed(3)} s`; }

  const head = document.getElementById("head");
  function heading(events) {
    head.replaceChildren();
    head.appendChild(el("strong", "", `session ${data.id}`));
    head.appendChild(el("span", "", ` — ${events} events, ${rows.length} rows`));
    if (data.parent) head.appendChild(el("div", "fork", `forked from session ${data.parent}`));
    const marks = el("div", "marks");
    const crashes = rows.filter((r) => r.k === "crash").length;
    const repaired = rows.filter((r) => r.repaired).length;
    const settled = rows.filter((r) => r.settled).length;
    const asked = rows.filter((r) => r.k === "asked").length;
    marks.appendChild(el("span", crashes ? "flag" : "", `crashes: ${crashes}`));
    marks.appendChild(el("span", repaired ? "flag" : "", `repaired calls: ${repaired}`));
    marks.appendChild(el("span", "", `settled calls: ${settled}`));
    marks.appendChild(el("span", "", `approvals asked: ${asked}`));
    head.appendChild(marks);
  }
  heading(data.events);

  function describe(r) {
    switch (r.k) {
      case "turn": return `turn ${r.turn} — ${new Date(r.at).toISOString()}`;
      case "step": {
        const parts = [`step ${r.step}`];
        if (r.modelMs !== undefined) parts.push(`model ${ms(r.modelMs)}`);
        if (r.firstToken !== undefined && r.firstToken !== null) {
          parts.push(`first token ${ms(r.firstToken - r.t)}`);
          if (r.modelMs !== undefined) parts.push(`decode ${ms(r.t + r.modelMs - r.firstToken)}`);
        }
        if (r.usage) parts.push(`${r.usage.inputTokens ?? 0} in / ${r.usage.outputTokens ?? 0} out tokens`);
        return parts.join(", ");
      }
      case "call": {
        let text = `${r.name}(${r.args}) [${r.id}]`;
        if (r.end !== undefined) text += ` ${ms(r.end - r.t)}`;
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

  function show(r) {
    detail.hidden = false;
    detailText.textContent =
      `${r.name} [${r.id}]\n\narguments:\n${r.args}\n\nresult${r.error ? " (error)" : ""}:\n${r.result ?? "(none)"}` +
      (r.repaired ? `\n\nrepaired: ${r.repaired}` : "") + (r.settled ? `\n\nsettled: ${r.settled}` : "");
  }

  function row(r, index) {
    const classes = ["row", r.k];
    if (r.repaired) classes.push("repaired");
    if (r.settled) classes.push("settled");
    if (r.error) classes.push("error");
    const node = el("div", classes.join(" "));
    node.style.top = `${index * ROW}px`;
    node.dataset.index = String(index);
    node.appendChild(el("span", "t", seconds(r.t)));
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
    if (r.k === "call") node.addEventListener("click", () => show(r));
    node.appendChild(el("span", "what", describe(r)));
    return node;
  }

  holder.style.height = `${rows.length * ROW}px`;
  let shown = [-1, -1];
  function paint() {
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 10);
    const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 10);
    if (first === shown[0] && last === shown[1]) return;
    shown = [first, last];
    const fragment = document.createDocumentFragment();
    for (let i = first; i < last; i++) fragment.appendChild(row(rows[i], i));
    holder.replaceChildren(fragment);
  }
  list.addEventListener("scroll", paint, { passive: true });
  window.addEventListener("resize", paint);
  paint();
  document.body.dataset.ready = "1";

  let events = data.events;
  async function follow() {  // a served page follows a session being written
    try {
      const response = await fetch(data.live, { cache: "no-store" });
      const fresh = await response.json();
      if (fresh.events !== events) {
        const atEnd = list.scrollTop + list.clientHeight >= holder.offsetHeight - ROW;
        events = fresh.events;
        rows = fresh.rows;
        measure();
        heading(events);
        holder.style.height = `${rows.length * ROW}px`;
        shown = [-1, -1];
        if (atEnd) list.scrollTop = holder.offsetHeight;
        paint();
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
