// A system's message topics: the topics with history (server-side search, sort, pages), a form
// to publish, and one topic: a live view of its last messages (bounded), publish, and its history
// over a time range. The live view asks the history route every 2 s for what came since the
// newest second it holds, so a quiet topic costs an empty list a poll.
import { useState } from "preact/hooks";
import { api, enc, literalPattern, queryParam } from "../api.ts";
import { ErrorBox, Tabs, usePoll } from "../components/bits.tsx";
import { ListView } from "../components/list.tsx";
import { DataTable } from "../components/table.tsx";
import { when } from "../format.ts";
import { LIVE_MAX, type Message, mergeLive } from "../liveView.ts";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Topic { topicid: string; message_count: number; last_published: number; concurrency: number }

const LIVE_MS = 2000;

export function Topics({ systemKey: sk, topic }: { systemKey: string; topic?: string }) {
  const sys = useSystemName(sk);
  useSystemTrail(sk, sys, ["Topics", href("s", sk, "topics")], ...(topic ? [[topic, href("s", sk, "topics", topic)] as [string, string]] : []));
  return <>
    <h1>{sys}</h1>
    <Tabs systemKey={sk} on="Topics" />
    {topic ? <TopicDetail systemKey={sk} topic={topic} /> : <>
      <h2>Topics with history</h2>
      <ListView<Topic> id="topics-table" label="Topics" initialSort={{ field: "topicid", desc: false }}
        load={async (q) => {
          const filters = q.search ? [{ RE: [{ topicid: literalPattern(q.search) }] }] : [];
          const [rows, n] = await Promise.all([
            api<Topic[]>("GET", `/api/v/4/message/${enc(sk)}/topics?${queryParam({ filters, sort: [q.sorting.field, q.sorting.desc ? "DESC" : "ASC"], pageSize: q.pageSize, page: q.page })}`),
            api<{ count: number }>("GET", `/api/v/4/message/${enc(sk)}/topics/count?${queryParam({ filters })}`),
          ]);
          return { rows, total: n.count };
        }}
        rowKey={(t) => t.topicid} rowAttrs={(t) => ({ "data-topic": t.topicid })}
        columns={[
          { label: "Topic", sort: "topicid", cell: (t) => <a href={href("s", sk, "topics", t.topicid)}>{t.topicid}</a> },
          { label: "Messages", cls: "num", sort: "message_count", cell: (t) => t.message_count },
          { label: "Last published", sort: "last_time", cell: (t) => when(t.last_published) },
          { label: "Subscribers", cls: "num", cell: (t) => t.concurrency },
        ]} />
      <h2>Publish</h2>
      <Publish systemKey={sk} onSent={(t) => go("s", sk, "topics", t)} />
    </>}
  </>;
}

function Publish({ systemKey: sk, topic, onSent }: { systemKey: string; topic?: string; onSent?: (topic: string) => void }) {
  const [to, setTo] = useState(topic ?? "");
  const [payload, setPayload] = useState("");
  const [qos, setQos] = useState("0");
  const [retain, setRetain] = useState(false);
  const [problem, setProblem] = useState("");
  const [error, setError] = useState<unknown>();
  const [sent, setSent] = useState<string>();
  const send = async (e: Event) => {
    e.preventDefault();
    const t = to.trim();
    const p = !t ? "a topic is required" : /[+#]/.test(t) ? "one topic: no wildcards (+, #)" : "";
    setProblem(p);
    if (p) return;
    try {
      await api("POST", `/api/v/1/message/${enc(sk)}/publish`, { topic: t, body: payload, qos: Number(qos), retain });
      setError(undefined);
      setSent(new Date().toLocaleTimeString());
      setPayload("");
      onSent?.(t);
    } catch (err) { setError(err); }
  };
  return <form id="publish" class="card form" onSubmit={send} noValidate>
    {topic ? null : <div class="field">
      <label for="publish-topic">Topic<span aria-hidden="true"> *</span></label>
      <input id="publish-topic" value={to} aria-invalid={problem ? true : undefined} aria-describedby={problem ? "publish-topic-problem" : undefined} onInput={(e) => setTo(e.currentTarget.value)} />
      {problem ? <span class="problem" id="publish-topic-problem">{problem}</span> : null}
    </div>}
    <div class="field">
      <label for="publish-payload">Payload</label>
      <textarea id="publish-payload" rows={3} value={payload} onInput={(e) => setPayload(e.currentTarget.value)} />
    </div>
    <div class="inline-form">
      <div class="field"><label for="publish-qos">QoS</label>
        <select id="publish-qos" value={qos} onChange={(e) => setQos(e.currentTarget.value)}>{["0", "1", "2"].map((q) => <option key={q} value={q}>{q}</option>)}</select></div>
      <div class="field"><label><input type="checkbox" id="publish-retain" checked={retain} onChange={(e) => setRetain(e.currentTarget.checked)} /> Retain</label></div>
    </div>
    <ErrorBox error={error} />
    <div class="row"><button type="submit" class="primary">Publish</button>{sent ? <span role="status" id="published">published at {sent}</span> : null}</div>
  </form>;
}

const MESSAGE_COLUMNS = [
  { label: "Time", cell: (m: Message) => <span title={when(m.time)}>{new Date(m.time * 1000).toLocaleTimeString()}</span> },
  { label: "From", cell: (m: Message) => m.userid || "–" }, { label: "QoS", cls: "num", cell: (m: Message) => m.qos },
  { label: "Payload", cls: "payload", cell: (m: Message) => <pre class="payload">{m.payload}</pre> },
];

function TopicDetail({ systemKey: sk, topic }: { systemKey: string; topic: string }) {
  const path = `/api/v/1/message/${enc(sk)}?topic=${enc(topic)}`;
  const [live, setLive] = useState<Message[]>([]);
  const [since, setSince] = useState<number | null>(null);
  const [paused, setPaused] = useState(false);
  const [error, setError] = useState<unknown>();
  usePoll(LIVE_MS, async () => {
    if (paused) return;
    try {
      // the first ask: the last LIVE_MAX; then what came from the newest second held on
      const fresh = await api<Message[]>("GET", since === null ? `${path}&count=${LIVE_MAX}` : `${path}&count=${LIVE_MAX}&start=${since}`);
      const next = mergeLive(live, fresh, since);
      setLive(next);
      setSince(next[0]?.time ?? Math.floor(Date.now() / 1000));
      setError(undefined);
    } catch (e) { setError(e); }
  }, [sk, topic, paused]);
  return <>
    <h2>Topic {topic}</h2>
    <h3 id="live-title">Live: the last {LIVE_MAX} messages</h3>
    <div class="row">
      <button type="button" id="live-pause" aria-pressed={paused ? "true" : "false"} onClick={() => setPaused((p) => !p)}>{paused ? "Resume" : "Pause"}</button>
      <span class="muted" aria-live="polite" id="live-count">{live.length} shown{paused ? ", paused" : ""}</span>
    </div>
    <ErrorBox error={error} />
    <DataTable<Message> id="live-table" caption={`Live messages on ${topic}`} rows={live} rowKey={(m) => `${m.time}/${m.userid}/${m.payload}/${live.indexOf(m)}`}
      rowAttrs={(m) => ({ "data-payload": m.payload.slice(0, 200) })} columns={MESSAGE_COLUMNS} />
    <h3>Publish on {topic}</h3>
    <Publish systemKey={sk} topic={topic} />
    <h3>History</h3>
    <History path={path} topic={topic} />
  </>;
}

/** A local date-time input's value as epoch seconds (null: open). */
const seconds = (v: string) => (v ? Math.floor(new Date(v).getTime() / 1000) : null);

function History({ path, topic }: { path: string; topic: string }) {
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [count, setCount] = useState("100");
  const [rows, setRows] = useState<Message[]>();
  const [error, setError] = useState<unknown>();
  const read = async (e: Event) => {
    e.preventDefault();
    try {
      const start = seconds(from), stop = seconds(to);
      if (start !== null && stop !== null && stop < start) throw new Error("the end of the range is before its start");
      const n = Number(count);
      if (!Number.isInteger(n) || n < 1 || n > 1000) throw new Error("at most: a whole number from 1 to 1,000");
      setRows(await api<Message[]>("GET", `${path}&count=${n}&start=${start ?? -1}&stop=${stop ?? -1}`));
      setError(undefined);
    } catch (err) { setError(err); }
  };
  return <>
    <form class="card form inline-form" id="history-range" onSubmit={read}>
      <div class="field"><label for="history-from">From</label><input id="history-from" type="datetime-local" value={from} onInput={(e) => setFrom(e.currentTarget.value)} /></div>
      <div class="field"><label for="history-to">To</label><input id="history-to" type="datetime-local" value={to} onInput={(e) => setTo(e.currentTarget.value)} /></div>
      <div class="field"><label for="history-count">At most</label><input id="history-count" inputMode="numeric" size={6} value={count} onInput={(e) => setCount(e.currentTarget.value)} /></div>
      <button type="submit" class="primary">Read history</button>
    </form>
    <ErrorBox error={error} />
    {rows ? <DataTable<Message> id="history-table" caption={`History of ${topic}`} rows={rows} rowKey={(m) => `${m.time}/${m.userid}/${m.payload}/${rows.indexOf(m)}`}
      rowAttrs={(m) => ({ "data-payload": m.payload.slice(0, 200) })} columns={MESSAGE_COLUMNS} /> : null}
  </>;
}
