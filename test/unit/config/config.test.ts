// IPVSProxyConfig validation with the CRD's own schema (crds/ipvsproxyconfigs.yaml, read at runtime).
import { describe, expect, it } from '@jest/globals';
import { configValidator, readCrd, validateConfig } from '../../../src/config/load.js';
import { CEL_RULES, ConfigValidator, crdSchema, makeAjv, toJsonSchema } from '../../../src/config/schema.js';
import { defaultProxyConfig } from '../../../src/config/types.js';

/** `{ a: { a: ... } }`, `depth` levels. */
function nested(depth: number): Record<string, unknown> {
  const top: Record<string, unknown> = {};
  let at = top;
  for (let i = 1; i < depth; i++) at = (at.a = {}) as Record<string, unknown>;
  return top;
}

const cfg = (spec: Record<string, unknown>) => ({ apiVersion: 'ipvs-operator.io/v1alpha1', kind: 'IPVSProxyConfig', metadata: { name: 'default' }, spec });

describe('validateConfig', () => {
  it('fills every default from the schema, equal to defaultProxyConfig', () => {
    expect(validateConfig(cfg({}))).toEqual({ ok: true, config: { ...defaultProxyConfig } });
    // spec itself defaults to {} (as the API server would do it).
    expect(validateConfig({ metadata: { name: 'default' } })).toEqual({ ok: true, config: { ...defaultProxyConfig } });
  });

  it('the CRD states every default of defaultProxyConfig (one source of truth)', () => {
    const spec = (crdSchema(readCrd('ipvsproxyconfigs')).properties as { spec: { properties: Record<string, { default?: unknown }> } }).spec;
    const defaults = Object.fromEntries(Object.entries(spec.properties).filter(([, s]) => 'default' in s).map(([k, s]) => [k, s.default]));
    expect(defaults).toEqual({ ...defaultProxyConfig });
  });

  it('keeps given values and defaults the rest', () => {
    const r = validateConfig(cfg({ defaultScheduler: 'wrr', clusterCIDRs: ['10.10.0.0/16', 'fd00:10::/64'], serviceProxyName: 'ipvs', syncPeriod: 1.5, minSyncPeriod: 0.5 }));
    expect(r).toEqual({ ok: true, config: { ...defaultProxyConfig, defaultScheduler: 'wrr', clusterCIDRs: ['10.10.0.0/16', 'fd00:10::/64'],
      serviceProxyName: 'ipvs', syncPeriod: 1.5, minSyncPeriod: 0.5 } });
  });

  it('does not modify its input', () => {
    const input = cfg({ strictARP: true });
    validateConfig(input);
    expect(input.spec).toEqual({ strictARP: true });
  });

  it.each<[string, unknown, string]>([
    ['scheduler name pattern', cfg({ defaultScheduler: 'Round Robin' }), 'spec.defaultScheduler = "Round Robin": must match pattern'],
    ['masqueradeBit above 31', cfg({ masqueradeBit: 32 }), 'spec.masqueradeBit = 32: must be <= 31'],
    ['masqueradeBit negative', cfg({ masqueradeBit: -1 }), 'spec.masqueradeBit = -1: must be >= 0'],
    ['masqueradeBit not an integer', cfg({ masqueradeBit: 1.5 }), 'spec.masqueradeBit = 1.5: must be integer'],
    ['syncPeriod zero', cfg({ syncPeriod: 0, minSyncPeriod: 0 }), 'spec.syncPeriod = 0: must be >= 1'],
    ['syncPeriod below 1 s (the issue: ~750 full syncs a second)', cfg({ syncPeriod: 0.001, minSyncPeriod: 0 }), 'spec.syncPeriod = 0.001: must be >= 1'],
    ['minSyncPeriod 0 (unbatched)', cfg({ minSyncPeriod: 0 }), 'spec.minSyncPeriod = 0: must be >= 0.1'],
    ['syncPeriod above a day', cfg({ syncPeriod: 86401 }), 'spec.syncPeriod = 86401: must be <= 86400'],
    ['tcpTimeout above INT_MAX / HZ(1000)', cfg({ tcpTimeout: 2147484 }), 'spec.tcpTimeout = 2147484: must be <= 2147483'],
    ['tcpFinTimeout above the kernel limit', cfg({ tcpFinTimeout: 2147483647 }), 'spec.tcpFinTimeout = 2147483647: must be <= 2147483'],
    ['udpTimeout above the kernel limit', cfg({ udpTimeout: 3e9 }), 'spec.udpTimeout = 3000000000: must be <= 2147483'],
    ['gracefulTerminationSeconds above an hour', cfg({ gracefulTerminationSeconds: 3601 }), 'spec.gracefulTerminationSeconds = 3601: must be <= 3600'],
    ['healthzBindAddress without a port', cfg({ healthzBindAddress: '0.0.0.0' }), 'spec.healthzBindAddress = "0.0.0.0": no :PORT'],
    ['healthzBindAddress port 0', cfg({ healthzBindAddress: '0.0.0.0:0' }), 'spec.healthzBindAddress = "0.0.0.0:0"'],
    ['healthzBindAddress unbracketed IPv6', cfg({ healthzBindAddress: '::1:10256' }), 'spec.healthzBindAddress = "::1:10256"'],
    ['healthzBindAddress not a string', cfg({ healthzBindAddress: 10256 }), 'spec.healthzBindAddress = 10256: must be string'],
    ['interfaceName lo', cfg({ interfaceName: 'lo' }), 'spec.interfaceName = "lo": must not be "lo"'],
    ['interfaceName empty', cfg({ interfaceName: '' }), 'spec.interfaceName = "": must NOT have fewer than 1 characters'],
    ['interfaceName with a space', cfg({ interfaceName: 'ipvs 0' }), 'spec.interfaceName = "ipvs 0": must match pattern'],
    ['interfaceName with a colon (an alias label)', cfg({ interfaceName: 'eth0:1' }), 'spec.interfaceName = "eth0:1": must match pattern'],
    ['a config nested 5,000 deep', cfg({ x: nested(5000) }), 'spec.x.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a: nested more than 32 deep'],
    ['more than 10,000 values', cfg({ clusterCIDRs: Array.from({ length: 20_000 }, () => '10.0.0.0/8') }), 'config: more than 10000 values'],
    ['NaN', cfg({ syncPeriod: Number.NaN }), 'spec.syncPeriod: NaN is not a finite number'],
    ['Infinity', cfg({ udpTimeout: Number.POSITIVE_INFINITY }), 'spec.udpTimeout: Infinity is not a finite number'],
    ['a bigint', cfg({ tcpTimeout: 5n }), 'spec.tcpTimeout: a bigint is not JSON data'],
    ['a function', cfg({ strictARP: () => true }), 'spec.strictARP: a function is not JSON data'],
    ['a Date where a number belongs', cfg({ syncPeriod: new Date(0) }), 'spec.syncPeriod = "1970-01-01T00:00:00.000Z": must be number'],
    ['a Map', cfg({ clusterCIDRs: new Map() }), 'spec.clusterCIDRs: not plain data (a Map)'],
    ['negative timeout', cfg({ tcpTimeout: -5 }), 'spec.tcpTimeout = -5: must be >= 0'],
    ['timeout as a string', cfg({ udpTimeout: '30s' }), 'spec.udpTimeout = "30s": must be integer'],
    ['interfaceName longer than 15', cfg({ interfaceName: 'a-very-long-ifname' }), 'spec.interfaceName = "a-very-long-ifname": must NOT have more than 15 characters'],
    ['interfaceName with a slash', cfg({ interfaceName: 'eth/0' }), 'spec.interfaceName = "eth/0": must match pattern'],
    ['CIDR shape', cfg({ excludeCIDRs: ['10.0.0.0'] }), 'spec.excludeCIDRs[0] = "10.0.0.0": must match pattern'],
    ['CIDR that does not parse', cfg({ clusterCIDRs: ['10.0.0.0/8', '10.0.0.300/8'] }), 'spec.clusterCIDRs[1] = "10.0.0.300/8": not a CIDR'],
    ['IPv4 prefix over 32', cfg({ nodePortAddresses: ['10.0.0.0/33'] }), 'spec.nodePortAddresses[0] = "10.0.0.0/33": not a CIDR'],
    ['minSyncPeriod above syncPeriod', cfg({ syncPeriod: 5, minSyncPeriod: 10 }), 'spec.minSyncPeriod = 10: must be <= syncPeriod (5)'],
    ['unknown field (a typo)', cfg({ defaultSchedular: 'lc' }), 'spec.defaultSchedular: unknown field (allowed: defaultScheduler,'],
    ['boolean as a string', cfg({ strictARP: 'yes' }), 'spec.strictARP = "yes": must be boolean'],
    ['empty serviceProxyName', cfg({ serviceProxyName: '' }), 'spec.serviceProxyName = "": must NOT have fewer than 1 characters'],
    ['spec not an object', cfg({}) && { spec: [] }, 'spec = []: must be object'],
    ['wrong kind', { ...cfg({}), kind: 'ConfigMap' }, 'kind: must be IPVSProxyConfig (got "ConfigMap")'],
    ['wrong apiVersion', { ...cfg({}), apiVersion: 'v1' }, 'apiVersion: must be ipvs-operator.io/v1alpha1 (got "v1")'],
    ['not an object', 'rr', 'config: must be an object'],
  ])('rejects %s with a message naming the field', (_name, input, message) => {
    const r = validateConfig(input);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.errors).toContain(message);
  });

  it('reports every error at once', () => {
    const r = validateConfig(cfg({ masqueradeBit: 99, tcpTimeout: -1 }));
    expect(r.ok ? '' : r.errors.split('; ').sort()).toEqual(['spec.masqueradeBit = 99: must be <= 31', 'spec.tcpTimeout = -1: must be >= 0']);
  });

  it('accepts client-node\'s typed metadata (timestamps as Dates)', () => {
    expect(validateConfig({ ...cfg({}), metadata: { name: 'default', creationTimestamp: new Date(0) } }).ok).toBe(true);
  });

  it.each(['', '0.0.0.0:10256', '127.0.0.1:10266', '[::]:10256', '[fd00:192::10]:10256', 'localhost:10256'])('accepts healthzBindAddress %j', (addr) => {
    expect(validateConfig(cfg({ healthzBindAddress: addr }))).toEqual({ ok: true, config: { ...defaultProxyConfig, healthzBindAddress: addr } });
  });

  it('accepts the bounds themselves', () => {
    expect(validateConfig(cfg({ syncPeriod: 1, minSyncPeriod: 0.1, tcpTimeout: 2147483, tcpFinTimeout: 2147483, udpTimeout: 2147483,
      gracefulTerminationSeconds: 3600, interfaceName: 'lo0', masqueradeBit: 31 })).ok).toBe(true);
    expect(validateConfig(cfg({ syncPeriod: 86400, minSyncPeriod: 86400, masqueradeBit: 0, interfaceName: 'a23456789012345' })).ok).toBe(true);
  });

  it('a nested config 5,000 deep is refused, not a throw (and so is one 1,000,000 deep)', () => {
    expect(() => validateConfig(cfg({ x: nested(1_000_000) }))).not.toThrow();
    expect(validateConfig({ metadata: nested(1_000_000), spec: {} })).toMatchObject({ ok: false, errors: expect.stringMatching(/^metadata(\.a)+: nested more than 32 deep$/) });
  });

  it('every CEL rule of the CRD (x-kubernetes-validations on spec) has its mirror in CEL_RULES', () => {
    const spec = (crdSchema(readCrd('ipvsproxyconfigs')).properties as { spec: { 'x-kubernetes-validations'?: { rule: string }[] } }).spec;
    const rules = (spec['x-kubernetes-validations'] ?? []).map((r) => r.rule);
    expect(rules.sort()).toEqual(Object.keys(CEL_RULES).sort());
  });

  it('compiles once and is reused', () => {
    expect(configValidator()).toBe(configValidator());
    expect(new ConfigValidator(readCrd('ipvsproxyconfigs')).validate(cfg({ masqueradeAll: true })).ok).toBe(true);
  });
});

describe('toJsonSchema (OpenAPI 3.0 -> draft-07)', () => {
  it('turns boolean exclusive bounds into numeric ones and drops Kubernetes extensions', () => {
    expect(toJsonSchema({ type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false, 'x-kubernetes-int-or-string': true }))
      .toEqual({ type: 'number', exclusiveMinimum: 0, maximum: 9 });
    expect(toJsonSchema({ type: 'string', nullable: true })).toEqual({ type: ['string', 'null'] });
  });

  it('compiles the IPVSNodeState schema, so a status can be checked against it', () => {
    const validate = makeAjv().compile(toJsonSchema(crdSchema(readCrd('ipvsnodestates'))) as object);
    const status = { kernelIPVSVersion: '1.2.1', schedulersAvailable: ['rr', 'wrr'], virtualServers: 3, realServers: 9,
      lastSyncTime: '2025-01-02T03:04:05Z', lastSyncDurationSeconds: 0.012, lastError: '', problems: 0 };
    expect(validate({ metadata: { name: 'node-a' }, status })).toBe(true);
    expect(validate({ metadata: { name: 'node-a' }, status: { ...status, lastSyncTime: 'yesterday' } })).toBe(false);
  });
});
