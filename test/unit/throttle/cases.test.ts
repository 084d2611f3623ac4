// Case validation and matching without a server.
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { ANY, BUILT_IN_CASES, compileCase, EACH, emailKey, EXACT, matchCase, parseCase, parseConsumer, type Subject } from "../../../src/throttle/cases.ts";

const body = (b: Record<string, unknown>) => ({ case_name: "c", system_key: "*", consumer: "*", resource: "*", limiter_type: "frequency", max_num: 1, duration: 60, priority: 1, ...b });
const subject = (s: Partial<Omit<Subject, "email">> & { email?: string } = {}): Subject => ({ systemKey: s.systemKey ?? "sys1", resource: s.resource ?? "/a", ip: s.ip ?? "1.2.3.4", email: () => s.email ?? "" });
const caseOf = (b: Record<string, unknown>, throttler: "HTTP Requests" | "MQTT Connections" | "MQTT Publishes" = "HTTP Requests") => compileCase(parseCase(throttler, body(b)));

describe("parseCase", () => {
  test("defaults: max_num 0 when omitted; duration kept for concurrency but not required", () => {
    expect(parseCase("HTTP Requests", body({ max_num: undefined })).max_num).toBe(0);
    expect(parseCase("HTTP Requests", body({ limiter_type: "concurrency", duration: undefined })).duration).toBeNull();
  });
  test("MQTT Connections: resource must be empty", () => {
    expect(parseCase("MQTT Connections", body({ resource: undefined })).resource).toBe("");
    expect(() => parseCase("MQTT Connections", body({ resource: "/x" }))).toThrow(ApiError);
  });
  test("an update keeps what it does not send", () => {
    const base = parseCase("HTTP Requests", body({ max_num: 9 }));
    const next = parseCase("HTTP Requests", { priority: 4 }, base);
    expect(next).toMatchObject({ max_num: 9, priority: 4, case_name: "c", created_at: base.created_at });
  });
  test("refusals", () => {
    for (const b of [{ priority: 0 }, { max_num: -2 }, { duration: -1 }, { limiter_type: "x" }, { consumer: "email" + "=" }, { resource: "/a/*/b" }, { extra: 1 }])
      expect(() => parseCase("HTTP Requests", body(b))).toThrow(ApiError);
  });
});

describe("consumers", () => {
  test("typed form: slots left out are ignored", () => {
    expect(parseConsumer("email=a@b.c")).toMatchObject({ typed: true, email: { kind: EXACT, value: "a@b.c" }, ip: { kind: ANY } });
    expect(parseConsumer("ip_address=?")).toMatchObject({ typed: true, email: { kind: ANY }, ip: { kind: EACH } });
    expect(parseConsumer("?")).toMatchObject({ typed: false, legacy: { kind: EACH } });
  });
  test("legacy exact matches the email or the IP address", () => {
    expect(matchCase(caseOf({ consumer: "a@b.c" }), subject({ email: "a@b.c" }))).not.toBeNull();
    expect(matchCase(caseOf({ consumer: "1.2.3.4" }), subject({ email: "a@b.c" }))).not.toBeNull();
    expect(matchCase(caseOf({ consumer: "x@b.c" }), subject({ email: "a@b.c" }))).toBeNull();
  });
  test("legacy ?: the email, or the IP address when there is none; different consumers, different buckets", () => {
    const c = caseOf({ consumer: "?" });
    const k1 = matchCase(c, subject({ email: "a@b.c" })), k2 = matchCase(c, subject({ email: "z@b.c" })), k3 = matchCase(c, subject({}));
    expect(new Set([k1, k2, k3]).size).toBe(3);
    expect(k3).toContain("1.2.3.4");
  });
  test("typed email=? needs an email", () => {
    expect(matchCase(caseOf({ consumer: "email=?" }), subject({}))).toBeNull();
  });
  test("the address is read only by a case whose consumer looks at it (reading it costs a lookup)", () => {
    let reads = 0;
    const counting = (email: string): Subject => ({ systemKey: "sys1", resource: "/a", email: () => email, get ip() { reads++; return "1.2.3.4"; } });
    for (const consumer of ["*", "email=a@b.c", "email=?", "email=*"]) expect(matchCase(caseOf({ consumer }), counting("a@b.c"))).not.toBeNull();
    expect(matchCase(caseOf({ consumer: "email=x@b.c" }), counting("a@b.c"))).toBeNull();
    expect(reads).toBe(0);
    for (const consumer of ["ip_address=1.2.3.4", "email=a@b.c,ip_address=?", "1.2.3.4"]) expect(matchCase(caseOf({ consumer }), counting("a@b.c"))).not.toBeNull();
    expect(reads).toBe(3);
  });
});

describe("system and resource", () => {
  test("? gives each system its own key, * one key, exact only that system", () => {
    const each = caseOf({ system_key: "?" }), all = caseOf({ system_key: "*" }), one = caseOf({ system_key: "sys1" });
    expect(matchCase(each, subject({ systemKey: "s1" }))).not.toBe(matchCase(each, subject({ systemKey: "s2" })));
    expect(matchCase(all, subject({ systemKey: "s1" }))).toBe(matchCase(all, subject({ systemKey: "s2" })));
    expect(matchCase(one, subject({ systemKey: "sys2" }))).toBeNull();
    expect(matchCase(each, subject({ systemKey: "" }))).toBeNull();
  });
  test("route patterns: {param} one element, trailing * the rest; one bucket per pattern", () => {
    const c = caseOf({ resource: "/api/v/1/code/{systemKey}/*" });
    const k1 = matchCase(c, subject({ resource: "/api/v/1/code/abc/svc" }));
    expect(k1).not.toBeNull();
    expect(matchCase(c, subject({ resource: "/api/v/1/code/def/other/x" }))).toBe(k1);
    expect(matchCase(c, subject({ resource: "/api/v/1/data/abc" }))).toBeNull();
    const exact = caseOf({ resource: "/api/v/1/user/auth" });
    expect(matchCase(exact, subject({ resource: "/api/v/1/user/auth" }))).not.toBeNull();
    expect(matchCase(exact, subject({ resource: "/api/v/1/user/auth2" }))).toBeNull();
  });
  test("topic patterns for MQTT Publishes, with or without a leading slash", () => {
    const c = caseOf({ resource: "devices/{deviceId}/*" }, "MQTT Publishes");
    expect(matchCase(c, subject({ resource: "devices/d1/temp" }))).not.toBeNull();
    expect(matchCase(c, subject({ resource: "devices/d1" }))).toBeNull();
    const plain = caseOf({ resource: "alerts" }, "MQTT Publishes");
    expect(matchCase(plain, subject({ resource: "alerts" }))).not.toBeNull();
    expect(matchCase(plain, subject({ resource: "alerts/x" }))).toBeNull();
  });
  test("resource ? gives each path its own key", () => {
    const c = caseOf({ resource: "?" });
    expect(matchCase(c, subject({ resource: "/a" }))).not.toBe(matchCase(c, subject({ resource: "/b" })));
  });
});

describe("consumers as sign-in finds them", () => {
  test("emails are one consumer in any spelling (lower case, no blanks)", () => {
    expect(emailKey(" Victim@Example.COM ")).toBe("victim@example.com");
  });
  test("an exact email written with capitals matches the normalised email; device names compare exactly", () => {
    for (const consumer of ["Victim@Example.com", "email=Victim@Example.com"]) {
      expect(matchCase(caseOf({ consumer }), subject({ email: "victim@example.com" }))).not.toBeNull();
      expect(matchCase(caseOf({ consumer }), subject({ email: "other@example.com" }))).toBeNull();
    }
    expect(matchCase(caseOf({ consumer: "email=Sensor" }), subject({ email: "Sensor" }))).not.toBeNull();
    expect(matchCase(caseOf({ consumer: "email=Sensor" }), subject({ email: "sensor" }))).not.toBeNull(); // the filter's lower case
    expect(matchCase(caseOf({ consumer: "email=sensor" }), subject({ email: "Sensor" }))).toBeNull();
    const each = caseOf({ consumer: "?" });
    expect(matchCase(each, subject({ email: "Sensor" }))).not.toBe(matchCase(each, subject({ email: "sensor" })));
  });
  test("a case counting failed sign-ins matches only subjects that sign in", () => {
    const c = compileCase(parseCase("HTTP Requests", body({ resource: "/admin/auth" })), true, "failures");
    expect(matchCase(c, { ...subject({ resource: "/admin/auth" }), signIn: true })).not.toBeNull();
    expect(matchCase(c, subject({ resource: "/admin/auth" }))).toBeNull();
    expect(matchCase(caseOf({ resource: "/admin/auth" }), subject({ resource: "/admin/auth" }))).not.toBeNull();
  });
});

describe("built-in cases", () => {
  test("every one compiles, and a webhook pattern covers the name and any path after it", () => {
    for (const b of BUILT_IN_CASES) expect(() => compileCase({ ...b, created_at: "", updated_at: "" }, true, b.counts)).not.toThrow();
    const hook = BUILT_IN_CASES.find((b) => b.case_name === "Block brute force webhook basic auth")!;
    const c = compileCase({ ...hook, created_at: "", updated_at: "" }, true, hook.counts);
    const at = (resource: string) => matchCase(c, { ...subject({ resource, email: "a@b.co" }), signIn: true });
    expect(at("/api/v/4/webhook/execute/sys1/hook")).not.toBeNull();
    expect(at("/api/v/4/webhook/execute/sys1/hook/a/b")).toBe(at("/api/v/4/webhook/execute/sys1/other"));
    expect(at("/api/v/4/webhook/sys1/hook")).toBeNull();
    expect(matchCase(c, { ...subject({ resource: "/api/v/4/webhook/execute/sys1/hook" }), signIn: true })).toBeNull(); // no user name
  });
});
