// Type-safe reads of Kubernetes object fields. The API server validates what it stores, but a YAML
// directory (or a buggy client) can hand us anything: `clusterIP: 10`, `ports: [null]`, a numeric
// annotation. Every read here answers the expected type or undefined/[] and never throws, so a
// wrong-typed field becomes a Problem of its own Service instead of an exception. pure: no I/O.

/** The value when it is a string, else undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** The value when it is an array, else undefined. */
export function arr(v: unknown): readonly unknown[] | undefined {
  return Array.isArray(v) ? v : undefined;
}

/** The value when it is a non-array object, else undefined. */
export function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The value when it is a boolean, else undefined. */
export function bool(v: unknown): boolean | undefined {
  return typeof v === 'boolean' ? v : undefined;
}

/** The value when it is an integer in [lo, hi], else undefined. */
export function intIn(v: unknown, lo: number, hi: number): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi ? v : undefined;
}

/** The string values of a map (labels, annotations, selector); entries of another type are dropped. */
export function stringMap(v: unknown): Record<string, string> {
  const o = obj(v);
  const out: Record<string, string> = {};
  if (!o) return out;
  for (const [k, x] of Object.entries(o)) if (typeof x === 'string') out[k] = x;
  return out;
}

/**
 * A list field that must be an array of strings: the strings, and a message for the field itself
 * (not an array) or for each element that is not a string. Absent (undefined/null): [] and no message.
 */
export function stringList(v: unknown, field: string): { values: string[]; errors: string[] } {
  if (v === undefined || v === null) return { values: [], errors: [] };
  const a = arr(v);
  if (!a) return { values: [], errors: [`${field}: ${describe(v)} is not a list`] };
  const values: string[] = [];
  const errors: string[] = [];
  a.forEach((x, i) => {
    if (typeof x === 'string') values.push(x);
    else errors.push(`${field}[${i}]: ${describe(x)} is not a string`);
  });
  return { values, errors };
}

/** A short, safe description of a value for a Problem message. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}...` : v);
  if (typeof v === 'number') return String(v);
  return `${typeof v} ${String(v)}`;
}
