// The console's edge page shows its link's log (headless Chromium, the kit of consoleBrowser.ts):
// empty before the edge ever connects, then each event as it happens without a reload (the
// section reads again every 5 s): connected, disconnected and why, refused and why, in words.
// At 1366 and 390 px (no sideways overflow, a screenshot, axe-core).
import t from "tap";
import WebSocket from "ws";
import { checkPage, done, launch, newPage, signIn, skip, stops, text, waitRows } from "./consoleBrowser.ts";
import { devWithSystem, must, startOutpost, type Outpost } from "./harness.ts";

t.test("an edge's page: the link's latest events, refreshed while it is open", skip, async (t) => {
  const o: Outpost = await startOutpost();
  stops.push(() => o.stop());
  await launch();
  const s = await devWithSystem(o, "pages-d");
  const SK = s.systemKey;
  await must(s.dev.post(`/admin/edges/${SK}/gw-1`, { token: "gw-1-token-123" }), "edge gw-1");
  const page = await newPage();
  await signIn(page, o.url, s.email, s.password);
  await page.goto(`${o.url}/console#/s/${SK}/edge/gw-1`, { waitUntil: "load" });
  await page.waitForSelector("#edge-link-empty");
  t.pass("no events yet: said so");

  /** a link played by a WebSocket: its hello's first answer, and its socket */
  const hello = async (token: string) => {
    const ws = new WebSocket(o.url.replace("http:", "ws:") + "/api/v/4/sync");
    const first = new Promise<any>((r) => ws.once("message", (d) => r(JSON.parse(String(d)))));
    const closed = new Promise((r) => ws.on("close", r));
    await new Promise((r) => ws.once("open", r));
    ws.send(JSON.stringify({ t: "hello", systemKey: SK, edge: "gw-1", token, cursor: 0, version: "9.1.0", os: "linux", arch: "arm64" }));
    return { ws, closed, answer: await first };
  };
  const link = await hello("gw-1-token-123");
  t.equal(link.answer.t, "welcome", "the edge is welcomed");
  await waitRows(page, "edge-link-table", "data-event", ["connected"]);
  t.match(await text(page, '#edge-link-table tr[data-event="connected"]'), /build 9\.1\.0, linux\/arm64; sent a full snapshot/, "the connect in words: build, OS, a full snapshot");
  link.ws.close(1000, "edge stopping");
  await link.closed;
  await waitRows(page, "edge-link-table", "data-event", ["disconnected", "connected"]);
  t.match(await text(page, '#edge-link-table tr[data-event="disconnected"]'), /closed by the edge \(edge stopping\) after \d+ s/, "the disconnect: why, and how long the link lasted");
  const wrong = await hello("not-the-token");
  t.equal(wrong.answer.t, "error", "a wrong token is refused");
  await waitRows(page, "edge-link-table", "data-event", ["refused", "disconnected", "connected"]);
  t.match(await text(page, '#edge-link-table tr[data-event="refused"]'), /wrong token/, "the refusal: why");
  await checkPage(t, page, "edge-link", '#edge-link-table tr[data-event="refused"]');
  await done(t, page);
});
