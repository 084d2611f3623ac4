// Devices: ClearBlade.Device and its ClearBlade.* shortcuts, ClearBladeAsync.Devices, and their
// live MQTT connections.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  function Device() {
    return {
      getDeviceByName: function (name, cb) { return classic("device.get", { name: name }, cb); },
      getAllDevicesForSystem: function (cb) { return classic("device.list", { query: null }, cb); },
      fetch: function (query, cb) { return classic("device.list", { query: plainQuery(query) }, cb); },
      createDevice: function (name, data, causeTrigger, cb) { if (typeof causeTrigger === "function") cb = causeTrigger; return classic("device.create", { name: name, data: data }, cb); },
      updateDevice: function (name, data, causeTrigger, cb) { if (typeof causeTrigger === "function") { cb = causeTrigger; causeTrigger = true; } return classic("device.update", { name: name, data: data, causeTrigger: causeTrigger !== false }, cb); },
      deleteDevice: function (name, causeTrigger, cb) { if (typeof causeTrigger === "function") cb = causeTrigger; return classic("device.delete", { name: name }, cb); },
      // the collection-style forms of ClearBlade's docs: a device object; a query and changes; a
      // query (required: none would be every device)
      create: function (device, cb) { return classic("device.create", { name: device && device.name, data: device }, cb); },
      update: function (query, changes, cb) { return classic("device.updateByQuery", { query: plainQuery(query), changes: changes, causeTrigger: true }, cb); },
      delete: function (query, cb) {
        if (typeof query === "function") { cb = query; query = null; }
        if (query === undefined || query === null) return refused(cb, "Device().delete needs a query (none would delete every device)");
        return classic("device.deleteByQuery", { query: plainQuery(query) }, cb);
      },
    };
  }
  ClearBlade.Device = Device;
  ClearBlade.getDeviceByName = function (n, cb) { return Device().getDeviceByName(n, cb); };
  ClearBlade.getAllDevicesForSystem = function (cb) { return Device().getAllDevicesForSystem(cb); };
  ClearBlade.createDevice = function (n, d, t, cb) { return Device().createDevice(n, d, t, cb); };
  ClearBlade.updateDevice = function (n, d, t, cb) { return Device().updateDevice(n, d, t, cb); };
  ClearBlade.deleteDevice = function (n, t, cb) { return Device().deleteDevice(n, t, cb); };
  ClearBlade.deviceConnections = function (name, cb) { return classic("device.connectionInfo", { name: name }, cb); };
  ClearBladeAsync.Devices = function () {
    return {
      read: function (q) { return call("device.list", { query: plainQuery(q) }); },
      create: function (d) { return call("device.create", { name: d && d.name, data: d }); },
      update: function (q, changes, causeTrigger) { return call("device.updateByQuery", { query: plainQuery(q), changes: changes, causeTrigger: causeTrigger !== false }); },
      delete: function (q) { return call("device.deleteByQuery", { query: plainQuery(q) }); },
      connectedDevices: function () { return call("device.connections", null); },
      deviceConnections: function (name) { return call("device.connectionInfo", { name: name }); },
      connectedDeviceCount: function () { return call("device.connectionCount", null); },
    };
  };
`;

export const devices: PreludeArea = { js: js };
