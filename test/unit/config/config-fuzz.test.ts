// A seeded fuzz over IPVSProxyConfig validation: 10,000 type-preserving configs (every field the
// right JSON type, values around and beyond the bounds) checked against an independent oracle of
// the CRD's rules, and 10,000 arbitrary ones (any JSON, non-JSON values, deep nesting, wrong
// top-level shapes). Invariants: validation never throws; a refusal is one line per problem, each
// naming where (config / spec.field / apiVersion / kind / metadata) and what; an acceptance honours
// every bound. The figures are printed once. Every input also goes through a validator ajv compiles
// now from the CRD file, which must agree with the one compiled ahead of time (validators.gen.ts).
import { describe, expect, it } from '@jest/globals';
import { readCrd, validateConfig } from '../../../src/config/load.js';
import { type ConfigResult, ConfigValidator } from '../../../src/config/schema.js';
import { prng } from '../../support/fixtures.js';

/** The shared seeded PRNG, so a failure replays from the seed. */
const rng = prng;

const SEED = 20261123;
const CASES = 10_000;
const rand = rng(SEED);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const chance = (p: number) => rand() < p;

const NUMS = [-1, 0, 0.05, 0.1, 0.0999, 0.5, 1, 1.5, 2, 30, 31, 32, 3600, 3601, 86400, 86401, 2147483, 2147484, 2147483647, 1e300, -0];
const num = (): number => (chance(0.5) ? pick(NUMS) : (rand() - 0.2) * Math.pow(10, Math.floor(rand() * 8)));
const CHARS = 'abcxyz019-_./: Lo\u00e9\u0000';
const str = (max = 20): string => Array.from({ length: Math.floor(rand() * max) }, () => pick([...CHARS])).join('');
const CIDRS = ['10.0.0.0/8', '10.0.0.300/8', 'fd00::/64', 'fd00::/129', '1.2.3.4/33', '::/0', '10.0.0.0', 'x/1', '1.2.3.4/32', ':::/1'];
const cidrs = (): string[] => Array.from({ length: Math.floor(rand() * 4) }, () => (chance(0.8) ? pick(CIDRS) : str(50)));
const IFNAMES = ['lo', 'lo0', 'ipvs-op0', 'eth0', 'eth0:1', 'a/b', '', 'a23456789012345', 'a234567890123456', 'ipvs 0', '-x', '.'];

/** One field with a value of its own JSON type (from a list near the bounds or random). */
const FIELDS: Record<string, () => unknown> = {
  defaultScheduler: () => (chance(0.5) ? pick(['rr', 'wlc', 'Round Robin', '', 'a'.repeat(64), 'twos', '1rr']) : str()),
  syncPeriod: num, minSyncPeriod: num, tcpTimeout: num, tcpFinTimeout: num, udpTimeout: num, gracefulTerminationSeconds: num,
  masqueradeBit: num,
  masqueradeAll: () => chance(0.5), strictARP: () => chance(0.5),
  clusterCIDRs: cidrs, nodePortAddresses: cidrs, excludeCIDRs: cidrs,
  serviceProxyName: () => (chance(0.5) ? pick(['ipvs', '', 'a.b', '-a', 'a'.repeat(63), 'a'.repeat(64)]) : str(70)),
  interfaceName: () => (chance(0.6) ? pick(IFNAMES) : str(18)),
};

/** The CRD's rules written out independently of ajv and src/config/: is this spec acceptable? */
function oracle(spec: Record<string, unknown>): boolean {
  const s = { syncPeriod: 30, minSyncPeriod: 1, ...spec } as Record<string, unknown> & { syncPeriod: number; minSyncPeriod: number };
  const inRange = (v: unknown, lo: number, hi: number, int: boolean) => typeof v === 'number' && v >= lo && v <= hi && (!int || Number.isInteger(v));
  const cidrOk = (c: string) => {
    const m = /^(.+)\/(\d{1,3})$/.exec(c);
    if (!m || c.length > 49) return false;
    const [, a, p] = m;
    const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(a!);
    if (v4) return v4.slice(1).every((o) => Number(o) <= 255 && String(Number(o)) === o) && Number(p) <= 32;
    return ['fd00::', '::'].includes(a!) && Number(p) <= 128;
  };
  const checks: Record<string, (v: unknown) => boolean> = {
    defaultScheduler: (v) => typeof v === 'string' && /^[a-z][a-z0-9-]{0,62}$/.test(v),
    syncPeriod: (v) => inRange(v, 1, 86400, false),
    minSyncPeriod: (v) => inRange(v, 0.1, 86400, false),
    masqueradeBit: (v) => inRange(v, 0, 31, true),
    tcpTimeout: (v) => inRange(v, 0, 2147483, true),
    tcpFinTimeout: (v) => inRange(v, 0, 2147483, true),
    udpTimeout: (v) => inRange(v, 0, 2147483, true),
    gracefulTerminationSeconds: (v) => inRange(v, 0, 3600, true),
    masqueradeAll: (v) => typeof v === 'boolean',
    strictARP: (v) => typeof v === 'boolean',
    clusterCIDRs: (v) => Array.isArray(v) && v.length <= 16 && v.every((c) => typeof c === 'string' && cidrOk(c)),
    nodePortAddresses: (v) => Array.isArray(v) && v.every((c) => typeof c === 'string' && cidrOk(c)),
    excludeCIDRs: (v) => Array.isArray(v) && v.every((c) => typeof c === 'string' && cidrOk(c)),
    serviceProxyName: (v) => typeof v === 'string' && v.length <= 63 && /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(v),
    interfaceName: (v) => typeof v === 'string' && /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/.test(v) && v !== 'lo',
  };
  return Object.entries(spec).every(([k, v]) => checks[k]!(v)) && s.minSyncPeriod <= s.syncPeriod;
}

/** Any value: JSON of any type, sometimes not JSON at all, sometimes deep. */
function anyValue(depth = 0): unknown {
  const r = rand();
  if (depth > 3 || r < 0.35) {
    return pick<() => unknown>([() => null, () => chance(0.5), num, () => str(), () => Number.NaN, () => -Infinity,
      () => BigInt(Math.floor(rand() * 100)), () => undefined, () => () => 1, () => Symbol('x'), () => new Date(0), () => /re/])();
  }
  if (r < 0.45) {
    let deep: unknown = {};
    for (let i = 0, n = Math.floor(rand() * 200); i < n; i++) deep = chance(0.5) ? { a: deep } : [deep];
    return deep;
  }
  if (r < 0.7) return Array.from({ length: Math.floor(rand() * 4) }, () => anyValue(depth + 1));
  const keys = [...Object.keys(FIELDS), 'apiVersion', 'kind', 'metadata', 'spec', str(8)];
  return Object.fromEntries(Array.from({ length: Math.floor(rand() * 5) }, () => [pick(keys), anyValue(depth + 1)]));
}

/** A refusal's message: problems joined by "; ", each `where[ = value]: why`, the why in words this module uses. */
const WHY = /^(must|not a CIDR|not plain data|nested more than \d+ deep|more than \d+ values|unknown field|a \w+ is not JSON data|-?Infinity is not a finite number|NaN is not a finite number)/;
function clearMessage(errors: string): boolean {
  return errors.length > 0 && errors.length < 4000 && !errors.includes('\n') &&
    errors.split('; ').every((e) => e.split(': ').slice(1).some((_, i, rest) => WHY.test(rest.slice(i).join(': '))));
}

const compiledNow = new ConfigValidator(readCrd('ipvsproxyconfigs'));
/** Inputs on which the two validators disagreed (the first five). */
const mismatches: string[] = [];

function run(input: unknown): ConfigResult | { thrown: unknown } {
  try {
    const r = validateConfig(input);
    const now = compiledNow.validate(input);
    if (JSON.stringify(now) !== JSON.stringify(r) && mismatches.length < 5) {
      mismatches.push(`${JSON.stringify(input)}: ${JSON.stringify(r)} against ${JSON.stringify(now)}`);
    }
    return r;
  } catch (e) {
    return { thrown: e };
  }
}

describe(`config validation fuzz (seed ${SEED})`, () => {
  it(`${CASES} type-preserving configs: 0 throws, the oracle's verdict, clear refusals`, () => {
    const tally = { accepted: 0, refused: 0, thrown: 0, disagreements: [] as string[], unclear: [] as string[] };
    for (let i = 0; i < CASES; i++) {
      const spec = Object.fromEntries(Object.entries(FIELDS).filter(() => chance(0.2)).map(([k, gen]) => [k, gen()]));
      const r = run({ apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' }, spec });
      if ('thrown' in r) { tally.thrown++; continue; }
      if (r.ok) tally.accepted++; else tally.refused++;
      if (r.ok !== oracle(spec) && tally.disagreements.length < 5) tally.disagreements.push(`${JSON.stringify(spec)} -> ${r.ok ? 'ok' : r.errors}`);
      if (!r.ok && !clearMessage(r.errors) && tally.unclear.length < 5) tally.unclear.push(r.errors);
    }
    console.log(`config fuzz, type-preserving (seed ${SEED}): ${CASES} cases, ${tally.accepted} accepted, ${tally.refused} refused, ${tally.thrown} thrown`);
    expect(tally.thrown).toBe(0);
    expect(mismatches).toEqual([]);
    expect(tally.disagreements).toEqual([]);
    expect(tally.unclear).toEqual([]);
    // Both verdicts occur often enough for the comparison to mean something.
    expect(Math.min(tally.accepted, tally.refused)).toBeGreaterThan(CASES / 25);
  });

  it(`${CASES} arbitrary inputs: 0 throws, every refusal clear, every acceptance within bounds`, () => {
    const tally = { accepted: 0, refused: 0, throws: 0, thrown: [] as string[], unclear: [] as string[], outOfBounds: [] as string[] };
    for (let i = 0; i < CASES; i++) {
      const input = chance(0.7) ? { metadata: { name: 'default' }, spec: anyValue(1) } : anyValue();
      const r = run(input);
      if ('thrown' in r) { tally.throws++; if (tally.thrown.length < 5) tally.thrown.push(String(r.thrown)); continue; }
      if (r.ok) {
        tally.accepted++;
        const c = r.config;
        if (!(c.syncPeriod >= 1 && c.minSyncPeriod >= 0.1 && c.minSyncPeriod <= c.syncPeriod && c.tcpTimeout <= 2147483 && c.interfaceName !== 'lo')) {
          tally.outOfBounds.push(JSON.stringify(c));
        }
      } else {
        tally.refused++;
        if (!clearMessage(r.errors) && tally.unclear.length < 5) tally.unclear.push(r.errors);
      }
    }
    console.log(`config fuzz, arbitrary types (seed ${SEED}): ${CASES} cases, ${tally.accepted} accepted, ${tally.refused} refused, ${tally.throws} thrown`);
    expect(tally.thrown).toEqual([]);
    expect(mismatches).toEqual([]);
    expect(tally.unclear).toEqual([]);
    expect(tally.outOfBounds).toEqual([]);
  });
});
