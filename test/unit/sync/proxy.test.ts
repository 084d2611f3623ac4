// Which proxy an edge reaches its platform through: HTTPS_PROXY for https, HTTP_PROXY for http
// (upper or lower case), none when NO_PROXY names the platform's host.
import { describe, expect, test } from "bun:test";
import { proxyFor } from "../../../src/sync/proxy.ts";

describe("the platform link's proxy", () => {
  test("by the platform URL's scheme", () => {
    const env = { HTTPS_PROXY: "http://proxy:3128", HTTP_PROXY: "http://plain:8080" };
    expect(proxyFor("https://platform.example.com:9443", env)).toBe("http://proxy:3128");
    expect(proxyFor("http://platform.example.com:9000", env)).toBe("http://plain:8080");
    expect(proxyFor("https://platform.example.com", { https_proxy: "proxy:3128" })).toBe("http://proxy:3128");
    expect(proxyFor("https://platform.example.com", { HTTP_PROXY: "http://plain:8080" })).toBeUndefined();
    expect(proxyFor("https://platform.example.com", {})).toBeUndefined();
  });

  test("NO_PROXY: hosts, domain suffixes, ports, *", () => {
    const p = (no: string, url = "https://platform.example.com:9443") => proxyFor(url, { HTTPS_PROXY: "http://proxy:3128", NO_PROXY: no });
    expect(p("platform.example.com")).toBeUndefined();
    expect(p("example.com")).toBeUndefined();
    expect(p(".example.com")).toBeUndefined();
    expect(p("*.example.com")).toBeUndefined();
    expect(p("*")).toBeUndefined();
    expect(p("localhost, platform.example.com:9443")).toBeUndefined();
    expect(p("platform.example.com:443")).toBe("http://proxy:3128");
    expect(p("other.com,ample.com")).toBe("http://proxy:3128");
    expect(p("127.0.0.1", "https://127.0.0.1:9443")).toBeUndefined();
    expect(p("10.0.0.1", "https://127.0.0.1:9443")).toBe("http://proxy:3128");
  });
});
