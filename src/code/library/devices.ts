// Devices: ClearBlade.Device and its ClearBlade.* shortcuts, ClearBladeAsync.Devices, and their
// live MQTT connections.
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
    // live MQTT connections, as /api/v/4/devices/{systemKey}/connections[/{name}] and connectioncount
    "device.connections": (x) => x.e.devices.connectionsList(x.p, x.systemKey),
    "device.connectionInfo": (x, a) => x.e.devices.connectionInfo(x.p, x.systemKey, String(a.name)),
    "device.connectionCount": (x) => x.e.devices.connectionCount(x.p, x.systemKey),
  },
};
