// Which build this is: the version and the commit it was built from, printed by --version and
// shown by /api/about, /health, the edge's hello and the .deb. scripts/build.ts stamps them into
// the binary (package.json's version and `git rev-parse --short HEAD`, or OUTPOST_VERSION and
// OUTPOST_COMMIT); run from source they are package.json's version and "source".
import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;
export const COMMIT: string = "source";
/** "0.2.0 (commit 1a2b3c4)": one line that tells builds apart. */
export const BUILD = `${VERSION} (commit ${COMMIT})`;
