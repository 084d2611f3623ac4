import { describe, expect, test } from "bun:test";
import { type Role, matrixRows } from "../../../../src/console/ui/permissions.ts";

const role = (Permissions: Role["Permissions"]): Role => ({ ID: "r1", Name: "r", Description: "", Permissions });

describe("the role matrix", () => {
  test("every asset of the system is a row, granted or not; a grant on an asset not listed is a row too", () => {
    const rows = matrixRows(role({
      Collections: [{ ID: "c1", Name: "readings", Level: 5 }], CodeServices: [{ Name: "gone", Level: 1 }], Topics: [{ Name: "a/#", Level: 3 }],
    }), { collections: [{ id: "c1", name: "readings" }, { id: "c2", name: "other" }], services: [{ name: "hook" }] });
    const items = rows.filter((r) => r.group !== "Whole kind").map((r) => [r.key, r.level]);
    expect(items).toEqual([["collections/c1", 5], ["collections/c2", 0], ["services/hook", 0], ["services/gone", 1], ["topics/a/#", 3]]);
  });

  test("a row's change names its asset as the roles API takes it: a collection by id, others by name, whole kinds by level", () => {
    const rows = matrixRows(role({ AllServices: { Level: 1 } }), { collections: [{ id: "c1", name: "readings" }], topics: [{ name: "t" }] });
    expect(rows.find((r) => r.key === "collections/c1")!.change(1)).toEqual({ collections: [{ itemInfo: { id: "c1" }, permissions: 1 }] });
    expect(rows.find((r) => r.key === "topics/t")!.change(0)).toEqual({ topics: [{ itemInfo: { name: "t" }, permissions: 0 }] });
    const all = rows.find((r) => r.key === "all/allservices")!;
    expect(all.level).toBe(1);
    expect(all.change(3)).toEqual({ allservices: { permissions: 3 } });
  });

  test("a service offers execute only, a topic read (subscribe) and create (publish)", () => {
    const rows = matrixRows(role({}), { services: [{ name: "s" }], topics: [{ name: "t" }] });
    expect(rows.find((r) => r.key === "services/s")!.rights).toEqual(["execute"]);
    const topic = rows.find((r) => r.key === "topics/t")!;
    expect([topic.rights, topic.note]).toEqual([["read", "create"], { read: "subscribe", create: "publish" }]);
  });
});
