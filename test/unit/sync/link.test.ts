// Why an edge's try to reach its platform failed, from the socket's error as Bun gives it
// ("WebSocket connection to '<url>' failed: <why>", with a code): each cause the edge reports.
import { describe, expect, test } from "bun:test";
import { linkCause } from "../../../src/sync/edge/link.ts";

const URL = "https://platform.example.com:9443";
const err = (why: string, code?: string) => Object.assign(new Error(`WebSocket connection to 'wss://platform.example.com:9443/api/v/4/sync' failed: ${why}`), code ? { code } : {});

describe("link causes", () => {
  test("each cause, with the host and what failed", () => {
    expect(linkCause(err("Failed to connect", "ENOTFOUND"), URL)).toEqual({ cause: "dns", message: "the platform's host name in platform.example.com:9443 does not resolve (ENOTFOUND)" });
    expect(linkCause(err("Failed to connect", "EAI_AGAIN"), URL).cause).toBe("dns");
    expect(linkCause(err("Failed to connect", "ECONNREFUSED"), URL)).toEqual({ cause: "tcp", message: "connection refused by platform.example.com:9443: nothing listens there" });
    expect(linkCause(err("Connection ended", "ECONNRESET"), URL)).toEqual({ cause: "tcp", message: "Connection ended (ECONNRESET)" });
    expect(linkCause(err("Failed to connect", "EHOSTUNREACH"), URL).cause).toBe("tcp");
    expect(linkCause(err("Failed to connect", "ETIMEDOUT"), URL).cause).toBe("timeout");
    expect(linkCause(err("TLS handshake failed: self signed certificate", "DEPTH_ZERO_SELF_SIGNED_CERT"), URL)).toEqual({
      cause: "tls", message: "TLS with platform.example.com:9443 failed: TLS handshake failed: self signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)" });
    expect(linkCause(err("TLS handshake failed: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER", "EPROTO"), URL).cause).toBe("tls");
    expect(linkCause(err("Expected 101 status code: 404"), URL)).toEqual({
      cause: "http", message: "platform.example.com:9443 answered HTTP 404 instead of opening the sync channel (is --platform-url the platform's address?)" });
    expect(linkCause(err("Expected 101 status code: 502"), URL).message).toContain("HTTP 502");
  });

  test("anything else is a connection failure, said as it came", () => {
    expect(linkCause(err("something new"), URL)).toEqual({ cause: "tcp", message: "something new" });
    expect(linkCause(null, URL)).toEqual({ cause: "tcp", message: "the connection failed" });
    expect(linkCause(new TypeError("Invalid URL"), "not a url")).toEqual({ cause: "tcp", message: "Invalid URL" });
  });
});
