// Fallback load generator when wrk is not installed: N concurrent keep-alive loops for S seconds.
//   bun bench/load.ts URL HEADERS_JSON SECONDS CONNECTIONS  -> {"rps":..., "errors":...}
const [url, headersJson, secs, conns] = process.argv.slice(2);
const headers = JSON.parse(headersJson ?? "{}") as Record<string, string>;
const end = performance.now() + Number(secs ?? 5) * 1000;
let n = 0, errors = 0;
await Promise.all(Array.from({ length: Number(conns ?? 64) }, async () => {
  while (performance.now() < end) {
    try { const r = await fetch(url!, { headers }); await r.arrayBuffer(); if (r.status === 200) n++; else errors++; } catch { errors++; }
  }
}));
console.log(JSON.stringify({ rps: n / Number(secs ?? 5), errors }));
