// Devices: ClearBlade.Device and its ClearBlade.* shortcuts, ClearBladeAsync.Devices.
import type { LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

export const devices: LibraryArea = {
  ops: {
    "device.get": (x, a) => x.e.devices.get(x.p, x.systemKey, String(a.name)),
    "device.list": (x, a) => x.e.devices.list(x.p, x.systemKey, queryText(a.query) ?? null),
    "device.create": (x, a) => x.e.devices.create(x.p, x.systemKey, String(a.name ?? a.data?.name), a.data ?? {}),
    "device.update": (x, a) => x.e.devices.update(x.p, x.systemKey, String(a.name), { ...(a.data ?? {}), causeTrigger: a.causeTrigger !== false }),
    "device.delete": (x, a) => x.e.devices.remove(x.p, x.systemKey, String(a.name)),
    "device.updateByQuery": (x, a) => x.e.devices.bulkUpdate(x.p, x.systemKey, { query: a.query ?? [], $set: { ...(a.changes ?? {}), ...(a.causeTrigger === false ? { causeTrigger: false } : {}) } }),
    "device.deleteByQuery": (x, a) => x.e.devices.bulkDelete(x.p, x.systemKey, queryText(a.query) ?? "[]"),
  },
};
