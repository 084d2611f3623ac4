// Devices, with the roles they hold.
import { devicesRepo, type DeviceRow } from "../../store/devices.ts";
import { rolesRepo } from "../../store/roles.ts";
import { byName, type DefinitionKind } from "./kind.ts";

export const device: DefinitionKind<DeviceRow> = {
  type: "device",
  list: (ex, sk) => devicesRepo.all(ex, sk), nameOf: (d) => d.name,
  body: async (ex, sk, d) => ({ device: d, roles: await rolesRepo.rolesOf(ex, sk, "device", d.name) }),
  apply: async (ex, sk, _n, b: { device: DeviceRow; roles: string[] }) => {
    await devicesRepo.put(ex, { ...b.device, system_key: sk });
    await rolesRepo.setMembers(ex, sk, "device", b.device.name, b.roles);
  },
  remove: async (ex, sk, name) => {
    await rolesRepo.removeSubject(ex, sk, "device", name);
    await devicesRepo.delete(ex, sk, name);
  },
  deleteBody: (_ex, _sk, name) => byName(name), stale: ["tokens"],
};
