// Simulated edges: thousands of edges that speak the real sync protocol from one process, with no
// database each. Each keeps what a real edge keeps of its link (its cursor, whether a snapshot
// completed, its record's incarnation), acknowledges what it gets at once, pings, gives up an
// open that takes longer than a real edge waits (3 s) and reconnects after a drop as a real edge
// does (0.25 s doubling to 2 s, with jitter). It runs in a process of its own, so the platform and
// it do not share an event loop; bench/edgesim.ts drives it with JSON lines on stdin and reads the
// answers on stdout.
//
// Changes are recognised by the `sensor` value of their rows: "<group>/<n>". For each group the
// driver said it expects, the time each edge has all its rows is noted on arrival (never polled).
//
// Mode "ack" (the baseline of bench/fleet.ts, a bare server with no protocol): a link says no
// hello and sends no pings; it answers every frame with one line, "ack", and counts as welcomed
// once open. Frames are recognised by the same "sensor" marker.

import { readFileSync } from "node:fs";

/** `urls`: the platform nodes' sync URLs; edge i opens urls[i % urls.length] (a cluster's edges spread over its nodes) */
interface Config { urls: string[]; systemKey: string; names: string[]; token: string; pingMs: number; mode: "sync" | "ack" }
const cfg = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as Config;
const OPEN_TIMEOUT_MS = 3_000;

interface Edge { name: string; ws: WebSocket | null; cursor: number; synced: boolean; incarnation: string; welcomed: boolean; backoff: number; fresh: boolean }
const edges: Edge[] = cfg.names.map((name) => ({ name, ws: null, cursor: 0, synced: false, incarnation: "", welcomed: false, backoff: 250, fresh: true }));

/** what happened since the driver last reset the counters */
const counts = { opens: 0, openTimeouts: 0, closes: 0, welcomes: 0, fullSnapshots: 0, lastWelcomeAt: 0, lastSyncedAt: 0 };
/** where an edge's time goes since the last reset: each open until the platform took it (the
 *  WebSocket's upgrade answered), each hello until its welcome (ms) */
const waits = { open: [] as number[], welcome: [] as number[] };
/** per group: rows expected, rows seen per edge, when each edge had them all (0: not yet) */
const groups = new Map<string, { rows: number; seen: Uint16Array; doneAt: Float64Array }>();

function open(i: number) {
  const e = edges[i]!;
  counts.opens++;
  const ws = new WebSocket(cfg.urls[i % cfg.urls.length]!);
  const openedAt = Date.now();
  let helloAt = 0;
  e.ws = ws;
  e.welcomed = false;
  const timer = setTimeout(() => { if (ws.readyState !== WebSocket.OPEN) { counts.openTimeouts++; ws.close(); } }, OPEN_TIMEOUT_MS);
  ws.onopen = () => {
    clearTimeout(timer);
    helloAt = Date.now();
    waits.open.push(helloAt - openedAt);
    if (cfg.mode === "ack") { helloAt = 0; welcome(e, false); return; }
    ws.send(JSON.stringify({ t: "hello", systemKey: cfg.systemKey, edge: e.name, token: cfg.token, cursor: e.cursor, synced: e.synced, incarnation: e.incarnation,
      fresh: e.fresh, pingMs: cfg.pingMs, protocol: 2, version: "simulated" }));
    e.fresh = false;
  };
  ws.onmessage = (ev) => {
    const text = typeof ev.data === "string" ? ev.data : Buffer.from(ev.data as ArrayBuffer).toString("utf8");
    if (cfg.mode === "ack") { noteMarkers(i, text); ws.send("ack"); return; }
    if (helloAt && text.startsWith('{"t":"welcome"')) { waits.welcome.push(Date.now() - helloAt); helloAt = 0; }
    onMessage(i, ws, text);
  };
  ws.onclose = () => {
    clearTimeout(timer);
    if (e.ws !== ws) return;
    e.ws = null;
    counts.closes++;
    const delay = e.backoff * (0.5 + Math.random() / 2);
    e.backoff = Math.min(2_000, e.backoff * 2);
    setTimeout(() => open(i), delay);
  };
  ws.onerror = () => { /* onclose follows */ };
}

const MARKER = /"sensor":"([^"/]+)\/\d+"/g;

/** notes the rows of expected groups a frame carries; an edge with all of a group's has it now */
function noteMarkers(i: number, text: string) {
  const at = Date.now();
  for (const m of text.matchAll(MARKER)) {
    const g = groups.get(m[1]!);
    if (g && ++g.seen[i]! === g.rows) g.doneAt[i] = at;
  }
}

function welcome(e: Edge, snapshot: boolean) {
  e.welcomed = true;
  e.backoff = 250;
  counts.welcomes++;
  counts.lastWelcomeAt = Date.now();
  if (snapshot) { counts.fullSnapshots++; e.synced = false; }
  else counts.lastSyncedAt = Date.now();
}

function onMessage(i: number, ws: WebSocket, text: string) {
  const e = edges[i]!;
  if (text.startsWith('{"t":"batch"')) {
    // a batch is acknowledged without parsing it whole: its position is its last field but one
    noteMarkers(i, text);
    const k = text.lastIndexOf('"upTo":');
    const upTo = parseInt(text.slice(k + 7), 10);
    const snapshot = text.endsWith('"snapshot":true}');
    ws.send(`{"t":"ack","upTo":${upTo},"snapshot":${snapshot},"results":[]}`);
    if (!snapshot && upTo > e.cursor) e.cursor = upTo;
    return;
  }
  const m = JSON.parse(text) as { t: string; seq?: number; snapshot?: boolean; incarnation?: string };
  if (m.t === "welcome") {
    e.incarnation = m.incarnation ?? "";
    welcome(e, m.snapshot === true);
  } else if (m.t === "snapshot_end") {
    ws.send(JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true, results: [] }));
    e.cursor = m.seq!;
    e.synced = true;
    counts.lastSyncedAt = Date.now();
  }
}

function stats() {
  let welcomed = 0, synced = 0;
  for (const e of edges) { if (e.ws && e.welcomed) welcomed++; if (e.ws && e.welcomed && e.synced) synced++; }
  return { edges: edges.length, welcomed, synced, ...counts };
}

// one ping per edge per period, spread over the period
let turn = 0;
const PING_SLICES = 20;
if (cfg.mode === "sync") setInterval(() => {
  for (let i = turn; i < edges.length; i += PING_SLICES) { const ws = edges[i]!.ws; if (ws?.readyState === WebSocket.OPEN && edges[i]!.welcomed) ws.send('{"t":"ping"}'); }
  turn = (turn + 1) % PING_SLICES;
}, cfg.pingMs / PING_SLICES);

for (let i = 0; i < edges.length; i++) open(i);

let buf = "";
process.stdin.on("data", (d) => {
  buf += d;
  for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    const c = JSON.parse(line) as { id: number; cmd: string; group?: string; rows?: number };
    let out: unknown = null;
    if (c.cmd === "stats") out = stats();
    else if (c.cmd === "reset") { for (const k of Object.keys(counts) as (keyof typeof counts)[]) counts[k] = 0; waits.open = []; waits.welcome = []; out = stats(); }
    else if (c.cmd === "waits") out = waits;
    else if (c.cmd === "expect") { groups.set(c.group!, { rows: c.rows!, seen: new Uint16Array(edges.length), doneAt: new Float64Array(edges.length) }); out = true; }
    else if (c.cmd === "group") out = [...(groups.get(c.group!)?.doneAt ?? [])];
    process.stdout.write(JSON.stringify({ id: c.id, out }) + "\n");
  }
});
