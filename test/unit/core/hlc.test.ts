// The hybrid logical clock: stamps only go forward, take every stamp seen into account, refuse
// stamps from too far in the future, and order the same as strings as they do as times.
import { describe, expect, test } from "bun:test";
import { after, Hlc, parse } from "../../../src/core/hlc.ts";

const at = (ms: number) => () => ms;

describe("hybrid logical clock", () => {
  test("stamps increase even when the wall clock stands still or goes back", () => {
    let t = 1_000;
    const c = new Hlc("a", () => t);
    const s1 = c.now(), s2 = c.now();
    t = 500; // the machine's clock was set back
    const s3 = c.now();
    expect(s1 < s2 && s2 < s3).toBe(true);
    expect(parse(s3)!.wall).toBe(1_000);
  });

  test("a stamp seen from another node makes later local stamps sort after it", () => {
    const c = new Hlc("a", at(1_000));
    expect(c.observe(new Hlc("b", at(60_000)).now())).toBe(true);
    expect(parse(c.now())!.wall).toBe(60_000);
  });

  test("a stamp further ahead than the accepted skew is refused and not taken", () => {
    const c = new Hlc("platform", at(1_000_000), 300_000);
    const farAhead = new Hlc("edge", at(1_000_000 + 300_001)).now();
    expect(c.observe(farAhead)).toBe(false);
    expect(parse(c.now())!.wall).toBe(1_000_000);
    expect(c.aheadBy(farAhead)).toBe(300_001);
    expect(c.observe(new Hlc("edge", at(1_000_000 + 299_000)).now())).toBe(true);
  });

  test("restore takes the node's own saved state whatever its distance", () => {
    const c = new Hlc("a", at(1_000), 10);
    c.restore("000000000999999-000003-a");
    expect(c.now()).toBe("000000000999999-000004-a");
  });

  test("the counter never outgrows its six digits: the wall moves on by one ms", () => {
    const c = new Hlc("a", at(7));
    c.restore("000000000000007-999998-a");
    const s1 = c.now(), s2 = c.now();
    expect(s1).toBe("000000000000007-999999-a");
    expect(s2).toBe("000000000000008-000000-a");
    expect(s1 < s2).toBe(true);
  });

  test("after(): the next stamp of a node past a stored one", () => {
    expect(after("000000000000005-000002-z", "a")).toBe("000000000000005-000003-a");
    expect(after("000000000000005-999999-z", "a")).toBe("000000000000006-000000-a");
    expect(after("000000000000005-000002-z", "a") > "000000000000005-000002-z").toBe(true);
  });

  test("string order is time order, then counter, then node", () => {
    const stamps = ["000000000000010-000000-b", "000000000000009-000005-z", "000000000000010-000000-a", "000000000000010-000001-a"];
    expect([...stamps].sort()).toEqual(["000000000000009-000005-z", "000000000000010-000000-a", "000000000000010-000000-b", "000000000000010-000001-a"]);
  });
});
