// The version printed by --version and /api/about: package.json's, embedded at build time.
import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;
/** The commit the binary was built from, when the build stamps it ("unknown" otherwise). */
export const COMMIT: string = "unknown";
