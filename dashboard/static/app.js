// The walq dashboard page: polls api/stats, draws the figures and charts,
// lists messages by state, shows one message, and (when the service
// enables actions) requeues and purges dead letters by POST.
"use strict";

const $ = (id) => document.getElementById(id);
// listGen numbers the list's loads: only the last one asked for is shown.
// listEnded is the highest number of the loads that ended: the last one
// asked for runs while it is below listGen. statsGen and statsEnded number
// the loads of the figures the same way, detailGen the message views.
// pending holds the refs of the dead letters whose requeue or purge the
// service has not answered: every list drawn meanwhile draws their
// buttons disabled, so that no second action on them is sent.
const state = { tab: "ready", after: "", pages: [], actions: null, keys: null, listGen: 0, listEnded: 0,
  statsGen: 0, statsEnded: 0, detailGen: 0, pending: new Set() };
// listTimeout, statsTimeout and detailTimeout are how long a load of the
// list, of the figures and of a message waits for the service (ms): one
// that hangs ends as an error, and the timer loads the list and the
// figures again. actionTimeout is how long a requeue or purge waits: one
// that hangs ends as an error too, which says it may yet be done.
const listTimeout = 20000, statsTimeout = 10000, detailTimeout = 20000, actionTimeout = 20000;

async function api(path, opts) {
  const res = await fetch(path, Object.assign({ cache: "no-store", credentials: "same-origin" }, opts));
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// apiWithin is api with a timeout of ms: a request the service does not
// answer in time is aborted and fails saying so.
function apiWithin(path, ms, opts) {
  return api(path, Object.assign({ signal: AbortSignal.timeout(ms) }, opts))
    .catch((e) => { throw e.name === "TimeoutError" ? new Error("no answer in " + ms / 1000 + " s") : e; });
}

function fmtNum(n) { return Number(n).toLocaleString("en-US"); }
function fmtRate(r) { return r < 10 ? r.toFixed(1) : fmtNum(Math.round(r)); }
function fmtBytes(b) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + " " + u[i];
}
function fmtAge(s) {
  if (!s) return "–";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  if (s < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}
function fmtTime(t) {
  const d = new Date(t || 0);
  if (d.getUTCFullYear() < 1971) return ""; // Go's zero time: none
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v); else e[k] = v;
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

// rates returns per-second rates of a counter between consecutive samples.
function rates(h, field) {
  const out = [];
  for (let i = 1; i < h.length; i++) {
    const dt = (new Date(h[i].at) - new Date(h[i - 1].at)) / 1000;
    out.push({ at: h[i].at, v: dt > 0 ? Math.max(0, h[i][field] - h[i - 1][field]) / dt : 0 });
  }
  return out;
}

// chart draws one polyline per series into the svg, all on one scale.
function chart(svg, series) {
  svg.replaceChildren();
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return;
  const t0 = Math.min(...all.map((p) => +new Date(p.at))), t1 = Math.max(...all.map((p) => +new Date(p.at)));
  const top = Math.max(1, ...all.map((p) => p.v));
  const ns = "http://www.w3.org/2000/svg";
  for (const s of series) {
    const pts = s.points.map((p) => {
      const x = t1 > t0 ? ((+new Date(p.at) - t0) / (t1 - t0)) * 600 : 600;
      return x.toFixed(1) + "," + (146 - (p.v / top) * 136).toFixed(1);
    });
    if (pts.length === 1) pts.unshift("0," + pts[0].split(",")[1]);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("class", s.cls);
    svg.append(line);
  }
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", "4"); label.setAttribute("y", "12");
  label.textContent = fmtRate(top);
  svg.append(label);
  return (t1 - t0) / 1000;
}

function spanText(secs) { return secs ? "−" + fmtAge(secs) : ""; }

// refreshStats loads and draws the figures. A load that another followed
// while it ran is dropped when it ends, as the list's are.
async function refreshStats() {
  const gen = ++state.statsGen;
  let r;
  try {
    r = await apiWithin("api/stats", statsTimeout);
    if (gen !== state.statsGen) return;
    $("fetch-error").hidden = true;
  } catch (e) {
    if (gen !== state.statsGen) return;
    $("fetch-error").textContent = "Cannot read the queue: " + e.message;
    $("fetch-error").hidden = false;
    return;
  } finally {
    state.statsEnded = Math.max(state.statsEnded, gen);
  }
  const s = r.stats;
  document.title = r.title + " · walq";
  $("title").textContent = r.title;
  $("kind").textContent = s.kind;
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  for (const k of ["ready", "in_flight", "delayed", "dead"]) $("count-" + k.replace("_", "-")).textContent = fmtNum(s[k]);
  $("oldest-age").textContent = fmtAge(s.oldest_age_seconds);
  $("log-bytes").textContent = fmtBytes(s.log_bytes);
  $("live-bytes").textContent = fmtBytes(s.live_bytes) + " live";
  const bg = $("bg-error");
  bg.hidden = !s.background_error;
  bg.textContent = s.background_error ? "Background work failing since " + fmtTime(s.background_error_at) +
    " (" + s.background_errors + " failures): " + s.background_error : "";
  // counts_error: the log is poisoned and was not read back, so the
  // counts are the calls' (a failed enqueue included), not the log's.
  const ce = $("counts-error");
  ce.hidden = !s.counts_error;
  ce.textContent = s.counts_error ? "Counts not checked: the log could not be read back after a failed write; " +
    "the counts are those of the calls, failed ones included, not what the log holds: " + s.counts_error : "";
  // oldest_error: the oldest never-delivered message's stored record (a
  // log record, or a Redis queue's stored body) could not be read, so
  // the oldest message's age leaves it out.
  const oe = $("oldest-error");
  oe.hidden = !s.oldest_error;
  oe.textContent = s.oldest_error ? "Oldest message not read: its stored record could not be read, " +
    "so the age shown leaves it out: " + s.oldest_error : "";
  const h = r.history || [];
  const enq = rates(h, "enqueued"), ack = rates(h, "acked");
  $("rate-enqueued").textContent = enq.length ? fmtRate(enq[enq.length - 1].v) : "–";
  $("rate-acked").textContent = ack.length ? fmtRate(ack[ack.length - 1].v) : "–";
  const depth = (f) => h.map((p) => ({ at: p.at, v: p[f] }));
  $("depth-span").textContent = spanText(chart($("chart-depth"), [
    { cls: "delayed", points: depth("delayed") }, { cls: "dead", points: depth("dead") },
    { cls: "in-flight", points: depth("in_flight") }, { cls: "ready", points: depth("ready") }]));
  $("rates-span").textContent = spanText(chart($("chart-rates"), [
    { cls: "enqueued", points: enq }, { cls: "acked", points: ack }]));
  const changed = state.actions !== r.actions || state.keys !== r.keys;
  state.actions = r.actions; state.keys = r.keys;
  document.querySelector('[data-tab="keys"]').hidden = !r.keys;
  $("mode").textContent = r.actions ? "actions enabled" : "read-only";
  if (changed) await refreshList();
}

// columns are the list's columns per tab: a title and how to show a row.
// seqOf is the sequence number a ref starts with: a dead letter's ref adds
// "@" and its id ("~" and its id in hex when the id is not UTF-8; a sorted
// queue's dead value's, "@" and its publish time), which names it after a
// crash.
const seqOf = (ref) => String(ref).split(/[@~]/)[0];
// readable returns the message m with the fields the API sent in base64
// twins (id_base64, reason_base64, headers_base64: bytes that are not
// UTF-8) back in id, reason and headers, each bad byte shown as U+FFFD.
const fromBase64 = (b) => new TextDecoder().decode(Uint8Array.from(atob(b), (c) => c.charCodeAt(0)));
const readable = (m) => ({
  ...m,
  id: m.id_base64 ? fromBase64(m.id_base64) : m.id,
  reason: m.reason_base64 ? fromBase64(m.reason_base64) : m.reason,
  headers: Object.assign({}, m.headers,
    Object.fromEntries(Object.entries(m.headers_base64 || {}).map(([k, v]) => [fromBase64(k), fromBase64(v)]))),
});
const idCell = (m) => el("code", { title: m.id }, m.id.length > 20 ? m.id.slice(0, 8) + "…" : m.id);
const columns = {
  "ready": [["Seq", (m) => m.ref], ["ID", idCell], ["Enqueued", (m) => fmtTime(m.enqueued_at)], ["Deliveries", (m) => m.deliveries]],
  "in-flight": [["Seq", (m) => m.ref], ["ID", idCell], ["Enqueued", (m) => fmtTime(m.enqueued_at)], ["Deliveries", (m) => m.deliveries], ["Lease ends", (m) => fmtTime(m.due)]],
  "delayed": [["Seq", (m) => m.ref], ["ID", idCell], ["Enqueued", (m) => fmtTime(m.enqueued_at)], ["Due", (m) => fmtTime(m.due)]],
  "dead": [["Seq", (m) => seqOf(m.ref)], ["ID", idCell], ["Enqueued", (m) => fmtTime(m.enqueued_at)], ["Deliveries", (m) => m.deliveries], ["Reason", (m) => m.reason || ""]],
  "keys": [["Key", (k) => el("code", {}, k.key_base64 ? fromBase64(k.key_base64) : k.key)], ["Values", (k) => fmtNum(k.values)], ["First sort key", (k) => k.first], ["Oldest", (k) => fmtTime(k.oldest)]],
};

// refreshList loads the list of the tab and page chosen now. A load that
// another (a later choice, an action, the timer) followed while it ran is
// dropped when it ends: the list never shows a tab or page no longer
// chosen, nor the list from before an action.
async function refreshList() {
  const gen = ++state.listGen, tab = state.tab, after = state.after;
  try {
    const keys = tab === "keys";
    const q = new URLSearchParams({ limit: "50", after });
    if (!keys) q.set("state", tab);
    const r = await apiWithin((keys ? "api/keys?" : "api/messages?") + q, listTimeout);
    if (gen !== state.listGen) return;
    const cols = columns[tab];
    const rows = keys ? r.keys.map((k) => el("tr", {}, ...cols.map(([, f]) => el("td", {}, f(k)))))
      : r.messages.map((m) => messageRow(readable(m), cols, tab));
    const titles = cols.map(([t]) => el("th", {}, t));
    if (tab === "dead" && state.actions) titles.push(el("th", {}, ""));
    $("list-head").replaceChildren(el("tr", {}, ...titles));
    $("list-body").replaceChildren(...rows);
    $("empty").hidden = rows.length > 0;
    $("next").hidden = !r.next;
    $("next").dataset.after = r.next || "";
    $("first").hidden = after === "";
  } catch (e) {
    if (gen === state.listGen) $("list-body").replaceChildren(el("tr", {}, el("td", { colSpan: 7 }, "Cannot list: " + e.message)));
  } finally {
    state.listEnded = Math.max(state.listEnded, gen);
  }
}

function messageRow(m, cols, tab) {
  const tr = el("tr", { "data-ref": m.ref, "data-id": m.id },
    ...cols.map(([t, f]) => el("td", { class: "col-" + t.toLowerCase().replace(" ", "-") }, f(m))));
  if (tab === "dead" && state.actions) {
    const disabled = state.pending.has(m.ref);
    tr.append(el("td", { class: "actions" },
      el("button", { class: "requeue", "data-ref": m.ref, title: "Make it ready again", disabled }, "Requeue"),
      el("button", { class: "purge", "data-ref": m.ref, title: "Remove it for good", disabled }, "Purge")));
  }
  return tr;
}

// showMessage shows the message ref names; a view that ends after another
// message was chosen (or the detail closed) is dropped.
async function showMessage(ref) {
  const gen = ++state.detailGen;
  try {
    const m = readable(await apiWithin("api/message?ref=" + encodeURIComponent(ref), detailTimeout));
    if (gen !== state.detailGen) return;
    $("detail-id").textContent = m.id;
    const meta = [["Seq", seqOf(m.ref)], ["State", m.state], ["Enqueued", fmtTime(m.enqueued_at)],
      ["Deliveries", m.deliveries], ["Due", fmtTime(m.due)], ["Reason", m.reason || ""]];
    $("detail-meta").replaceChildren(...meta.filter((x) => x[1] !== "").flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    const hs = Object.entries(m.headers || {});
    $("detail-headers").tBodies[0].replaceChildren(...(hs.length ? hs.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))
      : [el("tr", {}, el("td", { class: "muted" }, "none"))]));
    $("detail-size").textContent = fmtBytes(m.payload_bytes) + (m.truncated ? ", preview" : "") + encodingText(m);
    $("detail-payload").textContent = m.payload_base64 || m.payload_text || "";
    $("detail").hidden = false;
  } catch (e) {
    if (gen !== state.detailGen) return;
    $("detail").hidden = true;
    alert("Cannot show the message: " + e.message);
  }
}

// encodingText labels the payload by payload_encoding, the whole
// payload's: a payload binary past its preview may have a preview sent as
// text, and one whose preview is cut inside a character, in base64.
function encodingText(m) {
  if (m.payload_encoding === "base64" && !m.payload_base64) {
    return m.truncated ? ", binary: the preview shows its start as text" : ", binary, shown as text";
  }
  if (m.payload_encoding === "base64") return ", binary (base64)";
  return m.payload_base64 ? ", text (the preview in base64)" : "";
}

// act requeues or purges the dead letter ref. Its buttons are disabled
// while the service has not answered, for actionTimeout at most: those
// shown now, and those of every list drawn meanwhile (state.pending).
async function act(action, ref) {
  if (state.pending.has(ref)) return;
  state.pending.add(ref);
  setButtons(ref, true);
  try {
    await apiWithin("api/dead/" + action, actionTimeout,
      { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ref }) });
  } catch (e) {
    const late = e.message.startsWith("no answer") ? " (the service may yet do it: the list shows what it did)" : "";
    alert("Cannot " + action + ": " + e.message + late);
  } finally {
    state.pending.delete(ref);
  }
  setButtons(ref, false);
  await refreshList();
  await refreshStats();
}

// setButtons disables (or enables) the action buttons of ref in the list.
function setButtons(ref, disabled) {
  for (const b of $("list-body").querySelectorAll("button[data-ref]")) if (b.dataset.ref === ref) b.disabled = disabled;
}

function init() {
  $("tabs").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-tab]");
    if (!b) return;
    document.querySelectorAll("#tabs button").forEach((x) => x.classList.toggle("active", x === b));
    state.tab = b.dataset.tab; state.after = ""; state.pages = [];
    state.detailGen++; $("detail").hidden = true;
    refreshList();
  });
  $("list-body").addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (b && b.classList.contains("requeue")) { act("requeue", b.dataset.ref); return; }
    if (b && b.classList.contains("purge")) {
      if (!b.classList.contains("confirm")) { b.classList.add("confirm"); b.textContent = "Confirm purge"; return; }
      act("purge", b.dataset.ref); return;
    }
    const tr = e.target.closest("tr[data-ref]");
    if (tr) showMessage(tr.dataset.ref);
  });
  $("next").addEventListener("click", () => { state.pages.push(state.after); state.after = $("next").dataset.after; refreshList(); });
  $("first").addEventListener("click", () => { state.after = ""; state.pages = []; refreshList(); });
  $("detail-close").addEventListener("click", () => { state.detailGen++; $("detail").hidden = true; });
  refreshStats();
  // The figures' timer skips its load while the last one asked for runs:
  // loads of a service that hangs never pile up, and one that hangs ends
  // after statsTimeout.
  setInterval(() => { if (state.statsEnded === state.statsGen) refreshStats(); }, 2000);
  // A list slower than the timer is let finish, not dropped by the next
  // tick; only the last load asked for is waited for: one it replaced
  // that never ends does not stop the refresh.
  setInterval(() => { if (state.after === "" && state.listEnded === state.listGen) refreshList(); }, 5000);
}

init();
