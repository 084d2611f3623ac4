// The trigger definitions ClearBlade clients know: what can set off a trigger, and the
// key_value_pairs each accepts as filters.
export interface TriggerDefinition { def_module: string; def_name: string; def_keys: string[]; visibility: boolean }

const def = (def_module: string, def_name: string, def_keys: string[] = []): TriggerDefinition =>
  ({ def_module, def_name, def_keys, visibility: true });

export const TRIGGER_DEFINITIONS: TriggerDefinition[] = [
  def("Data", "CollectionCreated"),
  def("Data", "CollectionUpdated", ["collectionId", "collectionName"]),
  def("Data", "CollectionDeleted", ["collectionId", "collectionName"]),
  def("Data", "ItemCreated", ["collectionId", "collectionName"]),
  def("Data", "ItemUpdated", ["collectionId", "collectionName", "itemId"]),
  def("Data", "ItemDeleted", ["collectionId", "collectionName", "itemId"]),
  def("Data", "ItemUpserted", ["collectionId", "collectionName", "itemId"]),
  def("User", "UserCreated"),
  def("User", "UserUpdated", ["userId"]),
  def("User", "UserDeleted", ["userId"]),
  def("User", "UserAuth", ["email", "is_error", "error"]),
  def("UserRoles", "UserRoleAdded", ["userID", "roleID"]),
  def("UserRoles", "UserRoleRemoved", ["userID", "roleID"]),
  def("Device", "DeviceCreated"),
  def("Device", "DeviceUpdated", ["deviceName"]),
  def("Device", "DeviceDeleted", ["deviceName"]),
  def("Device", "DeviceAuth", ["deviceName", "is_error", "error"]),
  def("Messaging", "Publish", ["topic"]),
  def("Messaging", "Subscribe", ["topic"]),
  def("Messaging", "Unsubscribe", ["topic"]),
  def("Messaging", "MQTTUserConnected", ["email"]),
  def("Messaging", "MQTTUserDisconnected", ["email"]),
  def("Messaging", "MQTTDeviceConnected", ["deviceName"]),
  def("Messaging", "MQTTDeviceDisconnected", ["deviceName"]),
  def("StartConnectDisconnect", "PlatformStarted"),
  def("StartConnectDisconnect", "EdgeStarted"),
  def("StartConnectDisconnect", "PlatformConnectedOnEdge"),
  def("StartConnectDisconnect", "PlatformDisconnectedOnEdge"),
  def("StartConnectDisconnect", "EdgeConnectedOnPlatform", ["edgeName"]),
  def("StartConnectDisconnect", "EdgeDisconnectedOnPlatform", ["edgeName"]),
];

export function findDefinition(module: string, name: string): TriggerDefinition | undefined {
  // some clients spell StartConnectDisconnect actions with a "Trigger" suffix
  const n = name.endsWith("Trigger") && module === "StartConnectDisconnect" ? name.slice(0, -"Trigger".length) : name;
  return TRIGGER_DEFINITIONS.find((d) => d.def_module === module && d.def_name === n);
}
