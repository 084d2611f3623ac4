// src/domain/roles.ts: a role update's `changes` (every kind ClearBlade's clients send) and the
// role's GET form (the shape cb-cli converts back into changes).
import { describe, expect, test } from "bun:test";
import { emptyPermissions, grantedLevel, LEVEL } from "../../../src/auth/permissions.ts";
import { ApiError } from "../../../src/core/errors.ts";
import { applyPermissionChanges, roleToWire } from "../../../src/domain/roles.ts";

const row = (permissions: unknown) => ({ role_id: "r1", system_key: "sk", name: "r", description: "", permissions: JSON.stringify(permissions) });

describe("applyPermissionChanges", () => {
  test("edge remote administration: per edge as a list, for every edge as a level", () => {
    const p = applyPermissionChanges(emptyPermissions(), {
      edgeremoteadmin: [{ itemInfo: { name: "gw-1" }, permissions: LEVEL.READ }],
    });
    expect(p.items.edgeremoteadmin).toEqual([{ name: "gw-1", level: LEVEL.READ }]);
    expect(grantedLevel([p], { kind: "item", itemKind: "edgeremoteadmin", name: "gw-1" })).toBe(LEVEL.READ);
    expect(grantedLevel([p], { kind: "item", itemKind: "edgeremoteadmin", name: "gw-2" })).toBe(0);
    const all = applyPermissionChanges(p, { edgeremoteadmin: { permissions: LEVEL.ALL } });
    expect(all.scalars.edgeremoteadmin).toBe(LEVEL.ALL);
    expect(grantedLevel([all], { kind: "item", itemKind: "edgeremoteadmin", name: "gw-2" })).toBe(LEVEL.ALL);
  });

  test("file grants are kept per bucket set and per file store (or file); system service grants are checked, then left out", () => {
    const p = applyPermissionChanges(emptyPermissions(), {
      files: [{ itemInfo: { name: "set1" }, permissions: 1 }], filestorefiles: [{ itemInfo: { name: "store/a" }, permissions: 1 }], system_services: { permissions: 1 },
    });
    expect(p.items.files).toEqual([{ name: "set1", level: LEVEL.READ }]);
    expect(p.items.filestorefiles).toEqual([{ name: "store/a", level: LEVEL.READ }]);
    expect(grantedLevel([p], { kind: "item", itemKind: "filestorefiles", name: "store/a" })).toBe(LEVEL.READ);
    expect(grantedLevel([p], { kind: "item", itemKind: "filestorefiles", name: "store/b" })).toBe(0);
    const all = applyPermissionChanges(p, { filestorefiles: { permissions: LEVEL.ALL } });
    expect(grantedLevel([all], { kind: "item", itemKind: "filestorefiles", name: "other" })).toBe(LEVEL.ALL);
    expect(applyPermissionChanges(emptyPermissions(), { system_services: { permissions: 1 } })).toEqual(emptyPermissions());
    for (const bad of [{ files: "x" }, { files: [{}] }, { filestorefiles: [{ itemInfo: { name: "a" }, permissions: 16 }] }, { system_services: { permissions: "1" } }, { system_services: [1] }])
      expect(() => applyPermissionChanges(emptyPermissions(), bad)).toThrow(ApiError);
  });

  test("unknown kinds stay refused", () => {
    expect(() => applyPermissionChanges(emptyPermissions(), { bogus: [] })).toThrow(/unknown permission list/);
    expect(() => applyPermissionChanges(emptyPermissions(), { bogus: { permissions: 1 } })).toThrow(/unknown permission kind/);
  });
});

describe("roleToWire", () => {
  test("a collection granted by id carries the collection's current name", () => {
    const p = applyPermissionChanges(emptyPermissions(), { collections: [{ itemInfo: { id: "c1" }, permissions: 5 }, { itemInfo: { name: "byname" }, permissions: 1 }] });
    const known = roleToWire(row(p), new Map([["c1", "readings"]])).Permissions.Collections as { ID: string; Name: string }[];
    expect(known.map((c) => [c.ID, c.Name])).toEqual([["c1", "readings"], ["", "byname"]]);
    // a collection gone since: what the grant was made with
    expect((roleToWire(row(p)).Permissions.Collections as { Name: string }[]).map((c) => c.Name)).toEqual(["c1", "byname"]);
  });

  test("ClearBlade's keys and shapes: lists of {Name, Level}, whole kinds as {Level}", () => {
    const p = applyPermissionChanges(emptyPermissions(), {
      edgeremoteadmin: [{ itemInfo: { name: "gw-1" }, permissions: 1 }], adapters: { permissions: 2 }, usersecrets: { permissions: 4 },
    });
    const P = roleToWire(row(p)).Permissions;
    expect(P.EdgeRemoteAdmin).toEqual([{ Name: "gw-1", Level: 1 }]);
    expect(P.adapters).toEqual({ Level: 2 });
    expect(P.usersecrets).toEqual({ Level: 4 });
    expect(P.AllEdgeRemoteAdmin).toEqual({ Level: 0 });
  });
});
