// syncledger dashboard: renders /api/events (server-sent events), falling back
// to polling /api/state. Every value from the ledger is set as text, never as
// HTML: host names, messages and paths come from other machines.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function ago(iso, now) {
  const t = Date.parse(iso);
  if (!t) return "–";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return Math.floor(s / 86400) + " d ago";
}

function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function render(st) {
  const now = Date.now();
  document.body.dataset.version = st.version;
  document.body.dataset.caughtUp = st.caughtUp;
  $("ledger").textContent = st.ledger;
  $("uuid").textContent = st.uuid ? "uuid " + st.uuid : "";
  $("head").textContent = st.head;
  $("first").textContent = st.first;
  $("rate-per-minute").textContent = st.rate.perMinute.toFixed(1);
  $("rate-last-minute").textContent = st.rate.lastMinute;
  $("partition-count").textContent = st.partitionCount;
  $("catch-up").textContent = st.caughtUp ? "read up to seq " + st.read : "reading… seq " + st.read;
  $("updated").textContent = new Date(st.updated).toLocaleTimeString();
  const err = $("error");
  err.hidden = !st.error;
  err.textContent = st.error ? "Reading the ledger failed: " + st.error : "";
  const full = $("server-full");
  const sv = st.server;
  full.hidden = !(sv && sv.full);
  full.textContent = "";
  if (sv && sv.full) {
    let t = "The server's disk is full: every write is refused";
    if (sv.dir) {
      t += ". " + sv.dir + " has " + bytes(sv.free || 0) + " free; the server takes writes again at " + bytes(sv.resume || 0) + " free";
      const need = (sv.resume || 0) - (sv.free || 0);
      if (need > 0) t += ": free " + bytes(need) + " there";
    } else {
      t += " (its store holds " + bytes(sv.stored || 0) + ")";
    }
    full.textContent = t + ". Writes resume by themselves, nothing to restart.";
  }

  const rows = st.hosts || [];
  const hosts = rows.filter((h) => !h.error); // an error row is a key holding no heartbeat
  $("host-count").textContent = hosts.length;
  $("hosts-behind").textContent = hosts.filter((h) => h.behind > 0).length;
  $("hosts-empty").hidden = rows.length > 0 || !!st.hostsError;
  const herr = $("hosts-error");
  herr.hidden = !st.hostsError;
  herr.textContent = st.hostsError ? "Hosts unavailable: " + st.hostsError : "";
  fill(document.querySelector("#hosts tbody"), rows.map((h) => {
    const tr = el("tr");
    tr.dataset.host = h.host;
    if (h.error) {
      tr.classList.add("bad");
      const why = el("td", "error", "skipped, not a heartbeat: " + h.error + " (syncledger hosts forget KEY removes it)");
      why.colSpan = 5;
      tr.append(el("td", "host", h.host), why);
      return tr;
    }
    if (h.behind > 0) tr.classList.add("behind");
    if (now - Date.parse(h.lastSeen) > 120000) tr.classList.add("stale");
    tr.append(el("td", "host", h.host), el("td", "num hwm", h.hwm), el("td", "num behind", h.behind),
      el("td", "last-seen", ago(h.lastSeen, now)), el("td", "command", h.command || ""), el("td", "version", h.version || ""));
    tr.lastElementChild.previousElementSibling.previousElementSibling.title = h.lastSeen;
    return tr;
  }));

  const commits = st.commits || [];
  $("commits-empty").hidden = commits.length > 0;
  $("commits").replaceChildren(...commits.map((c) => {
    const li = el("li");
    li.dataset.seq = c.seq;
    const head = el("div", "head");
    head.append(el("span", "seq", "#" + c.seq), el("span", "host", c.host),
      el("span", "when muted", ago(c.at, now)),
      el("span", "files", "+" + c.files + " −" + c.deleted + " files" + (c.unresolved ? " (+ manifest)" : "")),
      el("span", "bytes muted", bytes(c.bytes)));
    li.append(head);
    li.append(el("div", "partitions", (c.partitions || []).join(", ")));
    if (c.message) li.append(el("div", "message", c.message));
    if (c.paths && c.paths.length) {
      const more = c.files + c.deleted - c.paths.length;
      li.append(el("div", "paths", c.paths.join("  ") + (more > 0 ? "  … and " + more + " more" : "")));
    }
    li.title = "commit " + c.commit + " at " + c.at;
    return li;
  }));

  const parts = st.partitions || [];
  fill(document.querySelector("#partitions tbody"), parts.map((p) => {
    const tr = el("tr");
    tr.dataset.partition = p.partition;
    tr.append(el("td", "partition", p.partition), el("td", "num model-seq", p.modelSeq), el("td", "num seq", p.seq),
      el("td", "host", p.host), el("td", "at muted", ago(p.at, now)));
    return tr;
  }));
  const more = $("partitions-more");
  more.hidden = st.partitionCount <= parts.length;
  more.textContent = "… and " + (st.partitionCount - parts.length) + " more partitions (the most recently extended are shown).";
}

function setConn(text, cls) {
  const c = $("conn");
  c.textContent = text;
  c.className = "pill " + cls;
}

let pollTimer = null;

async function poll() {
  try {
    const r = await fetch("api/state", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    render(await r.json());
    setConn("live (polling)", "live");
  } catch (e) {
    setConn("disconnected", "down");
  }
}

function startPolling() {
  if (pollTimer) return;
  poll();
  pollTimer = setInterval(poll, 2000);
}

function start() {
  if (!window.EventSource) { startPolling(); return; }
  const es = new EventSource("api/events");
  es.addEventListener("state", (ev) => {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
    render(JSON.parse(ev.data));
    setConn("live", "live");
  });
  es.onerror = () => {
    setConn("reconnecting…", "down");
    // EventSource reconnects by itself; poll meanwhile.
    startPolling();
  };
}

start();
