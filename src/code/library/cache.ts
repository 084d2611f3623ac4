// Shared caches: ClearBlade.Cache (callbacks) and ClearBladeAsync.Cache (promises). The host
// checks every argument and the run's user's rights (domain/serviceCaches.ts); a value crosses as
// JSON and comes back with its JSON type. A missing key (or a whole cache that expired) reads as
// undefined.
import type { LibraryArea } from "./types.ts";

export const cache: LibraryArea = {
  ops: {
    "cache.set": (x, a) => x.e.caches.set(x.p, x.systemKey, a.cache, a.key, a.value),
    "cache.setnx": (x, a) => x.e.caches.setnx(x.p, x.systemKey, a.cache, a.key, a.value),
    "cache.setMultiple": (x, a) => x.e.caches.setMultiple(x.p, x.systemKey, a.cache, a.data),
    "cache.get": (x, a) => x.e.caches.getValue(x.p, x.systemKey, a.cache, a.key),
    "cache.getAll": (x, a) => x.e.caches.getAll(x.p, x.systemKey, a.cache),
    "cache.keys": (x, a) => x.e.caches.keys(x.p, x.systemKey, a.cache, a.pattern),
    "cache.delete": (x, a) => x.e.caches.delete(x.p, x.systemKey, a.cache, a.key),
    "cache.flush": (x, a) => x.e.caches.flush(x.p, x.systemKey, a.cache),
  },
};
