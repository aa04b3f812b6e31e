// IPVSProxyConfig validation with the CRD's own schema (crds/ipvsproxyconfigs.yaml, read at runtime).
import { describe, expect, it } from '@jest/globals';
import { configValidator, readCrd, validateConfig } from '../../src/config/load.js';
import { ConfigValidator, crdSchema, makeAjv, toJsonSchema } from '../../src/config/schema.js';
import { defaultProxyConfig } from '../../src/desired/types.js';

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
    const r = validateConfig(cfg({ defaultScheduler: 'wrr', clusterCIDRs: ['10.10.0.0/16', 'fd00:10::/64'], serviceProxyName: 'ipvs', syncPeriod: 0.5, minSyncPeriod: 0.5 }));
    expect(r).toEqual({ ok: true, config: { ...defaultProxyConfig, defaultScheduler: 'wrr', clusterCIDRs: ['10.10.0.0/16', 'fd00:10::/64'],
      serviceProxyName: 'ipvs', syncPeriod: 0.5, minSyncPeriod: 0.5 } });
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
    ['syncPeriod zero (exclusive minimum)', cfg({ syncPeriod: 0, minSyncPeriod: 0 }), 'spec.syncPeriod = 0: must be > 0'],
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
