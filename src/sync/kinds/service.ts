// Services: code, the platform's; a change makes the code engine's copies stale.
import { servicesRepo, type ServiceRow } from "../../store/services.ts";
import { codeRows } from "./kind.ts";

export const service = codeRows<ServiceRow>("service", servicesRepo);
