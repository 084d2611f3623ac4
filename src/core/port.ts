// What a part needs from a part built after it: the port is made first and handed to the part
// that uses it; the later part attaches its side once, when it exists.

export class Port<T> {
  private impl: T | null = null;
  /** `name`: what the port is, for the error of a second attach */
  constructor(readonly name: string) {}

  /** Attaches the implementation; a second attach is a wiring mistake and throws. */
  attach(impl: T) {
    if (this.impl) throw new Error(`port '${this.name}' is already attached`);
    this.impl = impl;
  }

  /** The implementation, or null while (or where) none is attached. */
  get(): T | null { return this.impl; }
}
