// Libraries: code the services use, the platform's; a change makes the code engine's copies stale.
import { librariesRepo, type LibraryRow } from "../../store/services.ts";
import { codeRows } from "./kind.ts";

export const library = codeRows<LibraryRow>("library", librariesRepo);
