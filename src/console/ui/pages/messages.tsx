// A system's message history: one topic's last messages, refreshed while shown.
import { useState } from "preact/hooks";
import { api, enc } from "../api.ts";
import { ErrorBox, Tabs, useLoad, usePoll } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { when } from "../format.ts";
import { go, href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Message { topicid: string; time: number; payload: string; userid: string; qos: number }

export function Messages({ systemKey: sk, topic }: { systemKey: string; topic?: string }) {
  const name = useSystemName(sk);
  useSystemTrail(sk, name, ["Messages", href("s", sk, "messages")]);
  const [typed, setTyped] = useState(topic ?? "");
  const [rows, setRows] = useState<Message[]>();
  const [error, setError] = useState<unknown>();
  // the list of topics is a convenience: no error of its own
  const topics = useLoad(() => api<string[]>("GET", `/api/v/1/message/${enc(sk)}/currentTopics`).catch(() => []), [sk]);
  usePoll(3000, async () => {
    if (!topic) return;
    try { setRows(await api<Message[]>("GET", `/api/v/1/message/${enc(sk)}?topic=${enc(topic)}&count=50`)); setError(undefined); } catch (e) { setError(e); }
  }, [sk, topic]);
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Messages" />
    <form class="row" id="topic-form" onSubmit={(e) => { e.preventDefault(); go("s", sk, "messages", typed.trim()); }}>
      <label for="topic">Topic</label>
      <input id="topic" placeholder="exact, no wildcards" value={typed} size={40} onInput={(e) => setTyped(e.currentTarget.value)} />
      <button type="submit" class="primary">Show</button>
    </form>
    {topics.data?.length ? <nav class="row" id="topics" aria-label="Current topics"><span class="muted">Topics:</span>
      {topics.data.slice(0, 50).map((t) => <a key={t} href={href("s", sk, "messages", t)}>{t}</a>)}</nav> : null}
    <ErrorBox error={error} />
    {topic && rows ? <DataTable<Message> id="history-table" caption={`Messages on ${topic}`} rows={rows} rowKey={(m) => `${m.time}-${m.userid}-${m.payload}`}
      columns={[
        { label: "Time", cell: (m) => <span title={when(m.time)}>{new Date(m.time * 1000).toLocaleTimeString()}</span> },
        { label: "User", cell: (m) => m.userid }, { label: "QoS", cls: "num", cell: (m) => m.qos },
        { label: "Payload", cell: (m) => <pre class="payload">{m.payload}</pre> },
      ]} /> : null}
  </>;
}
