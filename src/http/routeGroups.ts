// The API's route groups, one line each: a route file is registered here and nowhere else. The
// server mounts every group this module exports; the order does not matter, as no two routes share
// a method and a path shape (test/unit/http/routeGroups.test.ts).
export { adapterRoutes } from "./routes/adapters.ts";
export { auditRoutes } from "./routes/audit.ts";
export { codeRoutes } from "./routes/code.ts";
export { dataRoutes } from "./routes/data.ts";
export { deploymentRoutes } from "./routes/deployments.ts";
export { developerRoutes } from "./routes/developer.ts";
export { deviceRoutes } from "./routes/devices.ts";
export { edgeRoutes } from "./routes/edges.ts";
export { externalDbRoutes } from "./routes/externalDbs.ts";
export { fileRoutes } from "./routes/files.ts";
export { fileSyncRoutes } from "./routes/fileSync.ts";
export { fleetRoutes } from "./routes/fleet.ts";
export { handlerRoutes } from "./routes/handlers.ts";
export { messagingRoutes } from "./routes/messaging.ts";
export { portalRoutes } from "./routes/portals.ts";
export { roleRoutes } from "./routes/roles.ts";
export { serviceCacheRoutes } from "./routes/serviceCaches.ts";
export { sessionRoutes } from "./routes/sessions.ts";
export { settingsRoutes } from "./routes/settings.ts";
export { systemRoutes } from "./routes/systems.ts";
export { throttlerRoutes } from "./routes/throttlers.ts";
export { userRoutes } from "./routes/users.ts";
export { userSecretRoutes } from "./routes/userSecrets.ts";
export { webhookRoutes } from "./routes/webhooks.ts";
