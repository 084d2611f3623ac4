// The web console: a client of the public API like any other (api.ts). Preact renders every
// page from records as text, never as HTML markup, so nothing a record holds can run in the page.
// On an edge it shows that edge and its own system's pages (what the platform sent read-only); on a
// platform, its systems and their fleets and resources.
import type { ComponentChildren } from "preact";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, forget, serverMode, session, signedIn, whenSignedOut } from "./api.ts";
import { ErrorBox } from "./components/bits.tsx";
import { Collections } from "./pages/collections.tsx";
import { Devices } from "./pages/devices.tsx";
import { EdgePage } from "./pages/edge.tsx";
import { EdgeSelf } from "./pages/edgeSelf.tsx";
import { Fleet } from "./pages/fleet.tsx";
import { Messages } from "./pages/messages.tsx";
import { Services } from "./pages/services.tsx";
import { Systems } from "./pages/systems.tsx";
import { Throttling } from "./pages/throttling.tsx";
import { Users } from "./pages/users.tsx";
// pages: deployments, caches, files, libraries, running code, sessions, audit (pagesb)
import { Audit } from "./pages/audit.tsx";
import { Caches } from "./pages/caches.tsx";
import { Deployments } from "./pages/deployments.tsx";
import { Files } from "./pages/files.tsx";
import { Libraries } from "./pages/libraries.tsx";
import { Running } from "./pages/running.tsx";
import { Sessions } from "./pages/sessions.tsx";
import { useRoute } from "./router.ts";
// pages: roles, triggers, timers, webhooks, adapters, topics (pagesa)
import { Adapters } from "./pages/adapters.tsx";
import { Roles } from "./pages/roles.tsx";
import { Timers } from "./pages/timers.tsx";
import { Topics } from "./pages/topics.tsx";
import { Triggers } from "./pages/triggers.tsx";
import { Webhooks } from "./pages/webhooks.tsx";
import { showTrailWith } from "./trail.ts";
// pages: details (pagesc)
import { DevicePage } from "./pages/device.tsx";
import { SystemSettingsPage } from "./pages/systemSettings.tsx";
import { UserPage } from "./pages/user.tsx";
import { EdgeScopeContext } from "./components/owned.tsx";
import { EDGE_PAGES, type EdgeScope, scopeOf } from "./edgeScope.ts";

function Header({ trail, onSignOut }: { trail: [string, string][]; onSignOut: () => void }) {
  return <header id="bar">
    <a class="brand" href="#/">Outpost</a>
    <nav id="where" aria-label="Breadcrumb">{trail.map(([text, to], i) => <span key={to}>{i ? " / " : ""}<a href={to}>{text}</a></span>)}</nav>
    <span id="who">{session.token ? [<span key="e">{session.email ?? ""}</span>, <button key="b" type="button" id="signout" onClick={onSignOut}>Sign out</button>] : null}</span>
  </header>;
}

function SignIn({ done }: { done: () => void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<unknown>();
  const send = async (e: Event) => {
    e.preventDefault();
    try {
      const r = await api<{ dev_token: string }>("POST", "/admin/auth", { email, password });
      signedIn(r.dev_token, email);
      done();
    } catch (err) { setError(err); }
  };
  return <form class="signin card" id="signin" onSubmit={send}>
    <h1>Sign in</h1>
    <label for="email">Email</label>
    <input type="email" name="email" id="email" autocomplete="username" required autoFocus value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
    <label for="password">Password</label>
    <input type="password" name="password" id="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
    <ErrorBox error={error} />
    <button type="submit" class="primary">Sign in</button>
  </form>;
}

function Platform({ route }: { route: string[] }) {
  const [a, sk, page, ...rest] = route;
  if (a !== "s" || !sk) return <Systems />;
  // pages: details (pagesc)
  if (page === "users" && rest[0]) return <UserPage systemKey={sk} id={rest[0]} key={rest[0]} />;
  if (page === "devices" && rest[0]) return <DevicePage systemKey={sk} name={rest[0]} key={rest[0]} />;
  if (page === "settings") return <SystemSettingsPage systemKey={sk} />;
  switch (page) {
    case "edge": return rest[0] ? <EdgePage systemKey={sk} edge={rest[0]} key={rest[0]} /> : <Fleet systemKey={sk} />;
    case "throttling": return <Throttling systemKey={sk} />;
    case "messages": return <Messages systemKey={sk} topic={rest[0]} key={rest[0] ?? ""} />;
    case "collections": return <Collections systemKey={sk} id={rest[0]} key={rest[0] ?? ""} />;
    case "services": return <Services systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "users": return <Users systemKey={sk} />;
    case "devices": return <Devices systemKey={sk} />;
    // pages: roles, triggers, timers, webhooks, adapters, topics (pagesa)
    case "roles": return <Roles systemKey={sk} id={rest[0]} key={rest[0] ?? ""} />;
    case "triggers": return <Triggers systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "timers": return <Timers systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "webhooks": return <Webhooks systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "adapters": return <Adapters systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "topics": return <Topics systemKey={sk} topic={rest[0]} key={rest[0] ?? ""} />;
    // pages: deployments, caches, files, libraries, running code, sessions, audit (pagesb)
    case "deployments": return <Deployments systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "caches": return <Caches systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "files": return <Files systemKey={sk} kind={rest[0]} name={rest[1]} key={`${rest[0] ?? ""}/${rest[1] ?? ""}`} />;
    case "libraries": return <Libraries systemKey={sk} name={rest[0]} key={rest[0] ?? ""} />;
    case "running": return <Running systemKey={sk} />;
    case "sessions": return <Sessions systemKey={sk} />;
    case "audit": return <Audit systemKey={sk} />;
    default: return <Fleet systemKey={sk} />;
  }
}

/** An edge's console: its status, and the pages of its system that it serves, told which assets
 *  the platform owns there. */
function Edge({ route }: { route: string[] }) {
  const [scope, setScope] = useState<EdgeScope>();
  const [error, setError] = useState<unknown>();
  // read again with each page: what the platform sent or took back since shows as it is
  useEffect(() => { api("GET", "/api/v/4/edge/status").then((st) => { setScope(scopeOf(st)); setError(undefined); }, setError); }, [route.join("/")]);
  if (!scope) return error ? <ErrorBox error={error} /> : <p class="muted">Loading…</p>;
  const [a, sk, page] = route;
  return <EdgeScopeContext.Provider value={scope}>
    {a === "s" && sk === scope.systemKey && page && EDGE_PAGES.has(page) ? <Platform route={route} /> : <EdgeSelf />}
  </EdgeScopeContext.Provider>;
}

function App() {
  const route = useRoute();
  const [, setSession] = useState(0);
  const [trail, setT] = useState<[string, string][]>([]);
  const [mode, setMode] = useState<"edge" | "platform">();
  const [error, setError] = useState<unknown>();
  showTrailWith(setT);
  const changed = () => setSession((n) => n + 1);
  useEffect(() => whenSignedOut(() => { setT([]); changed(); }), []);
  useEffect(() => { if (session.token && !mode) serverMode().then(setMode, setError); }, [session.token]);
  const signOut = async () => {
    try { await api("POST", "/admin/logout"); } catch { /* the session is dropped here either way */ }
    forget();
    setT([]);
    location.hash = "#/";
    changed();
  };
  let body: ComponentChildren;
  if (!session.token) body = <SignIn done={changed} />;
  else if (error) body = <ErrorBox error={error} />;
  else if (!mode) body = <p class="muted">Loading…</p>;
  else body = mode === "edge" ? <Edge route={route} /> : <Platform route={route} />;
  return <>
    <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>Skip to content</a>
    <Header trail={session.token ? trail : []} onSignOut={signOut} />
    <main id="main" tabIndex={-1}>{body}</main>
  </>;
}

const root = document.getElementById("app")!;
// the page's "Loading…" goes: Preact renders into an empty element
root.replaceChildren();
render(<App />, root);
