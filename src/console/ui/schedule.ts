// A timer's interval as the console writes and reads it (pure, unit-tested).

export const UNITS: [string, number][] = [["seconds", 1], ["minutes", 60], ["hours", 3600], ["days", 86400]];
/** "every 5 minutes" for 300 s. */
export function everyText(s: number) {
  const [unit, n] = [...UNITS].reverse().find(([, n]) => s % n === 0) ?? UNITS[0]!;
  return `every ${s / n} ${s / n === 1 ? unit.slice(0, -1) : unit}`;
}
