// The platform's side of a relayed answer: an answer the edge ended whole reads whole; one it cut
// (past the bound) fails for the caller rather than ending as if whole, with a 413; the bound is
// also held on the platform. And how long a relayed request's connection may stay idle.
import { describe, expect, test } from "bun:test";
import { AnswerSink, BODY_MAX_BYTES, CHUNK_BYTES } from "../../../src/sync/fleet.ts";
import { relayIdleSeconds } from "../../../src/http/edgeRelay.ts";
import { ApiError } from "../../../src/core/errors.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("AnswerSink", () => {
  test("an answer ended whole reads whole", async () => {
    const sink = new AnswerSink();
    sink.head(200, [["content-type", "text/plain"]]);
    sink.chunk(b64("hello "));
    sink.chunk(b64("edge"));
    sink.end();
    const a = await sink.answer;
    expect(a.status).toBe(200);
    expect(await new Response(a.body).text()).toBe("hello edge");
  });

  test("an answer the edge cut fails for the caller, with a 413", async () => {
    const sink = new AnswerSink();
    sink.head(200, []);
    sink.chunk(b64("part"));
    sink.cut();
    const a = await sink.answer;
    const err = await new Response(a.body).text().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).kind.status).toBe(413);
  });

  test("a cut before the head rejects the wait", async () => {
    const sink = new AnswerSink();
    sink.cut();
    const err = await sink.answer.then(() => null, (e: unknown) => e);
    expect((err as ApiError).kind.status).toBe(413);
  });

  test("past the bound on the platform too", async () => {
    const sink = new AnswerSink();
    sink.head(200, []);
    const chunk = Buffer.alloc(CHUNK_BYTES, 97).toString("base64");
    let taken = true;
    for (let sent = 0; taken && sent <= BODY_MAX_BYTES; sent += CHUNK_BYTES) taken = sink.chunk(chunk);
    expect(taken).toBe(false);
    const err = await new Response((await sink.answer).body).arrayBuffer().then(() => null, (e: unknown) => e);
    expect((err as ApiError).kind.status).toBe(413);
  });
});

test("a relayed request's connection stays open longer than the edge may be silent (Bun takes at most 255 s)", () => {
  expect(relayIdleSeconds(60)).toBe(70);
  expect(relayIdleSeconds(245)).toBe(255);
  expect(relayIdleSeconds(246)).toBe(0);
});
