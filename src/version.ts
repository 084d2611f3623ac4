// The version printed by --version and /api/about: package.json's, embedded at build time.
import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;
