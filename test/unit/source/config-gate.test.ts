// The config gate both sources pass the IPVSProxyConfig through: invalid ones are errors and never
// sent, a config is sent once per identity, a delete only after something was sent.
import { describe, expect, it } from '@jest/globals';
import type { ConfigResult } from '../../../src/config/schema.js';
import { type ProxyConfig, defaultProxyConfig } from '../../../src/config/types.js';
import { ConfigGate } from '../../../src/source/config-gate.js';
import { validateConfig } from '../../../src/config/load.js';

const config = (spec: Record<string, unknown>) => ({ metadata: { name: 'default' }, spec });
const merged = (spec: Partial<ProxyConfig>) => ({ ...defaultProxyConfig, ...spec });

describe('ConfigGate', () => {
  it('sends a valid config once, and again only when it changes', () => {
    const gate = new ConfigGate(validateConfig);
    expect(gate.upsert(config({ defaultScheduler: 'lc' }))).toEqual({ ok: true, event: { kind: 'config', type: 'upsert', config: merged({ defaultScheduler: 'lc' }) } });
    // A relist, or a change of metadata only: the same config, nothing sent.
    expect(gate.upsert({ ...config({ defaultScheduler: 'lc' }), metadata: { name: 'default', labels: { a: 'b' } } })).toEqual({ ok: true });
    expect(gate.upsert(config({ defaultScheduler: 'sed' }))).toMatchObject({ ok: true, event: { type: 'upsert', config: { defaultScheduler: 'sed' } } });
  });

  it('returns the errors of an invalid config and keeps the last valid one in force', () => {
    const gate = new ConfigGate(validateConfig);
    gate.upsert(config({ defaultScheduler: 'lc' }));
    const v = gate.upsert(config({ masqueradeBit: 40 }));
    expect(v.ok).toBe(false);
    expect(!v.ok && v.errors).toContain('spec.masqueradeBit = 40: must be <= 31');
    // The valid one back: it is still the one in force, so nothing is sent.
    expect(gate.upsert(config({ defaultScheduler: 'lc' }))).toEqual({ ok: true });
  });

  it('tells configs apart by the identity a source passes', () => {
    const gate = new ConfigGate(validateConfig);
    expect(gate.upsert(config({}), 'fp1').ok && gate.upsert(config({}), 'fp1')).toEqual({ ok: true });
    expect(gate.upsert(config({}), 'fp2')).toMatchObject({ ok: true, event: { type: 'upsert' } });
  });

  it('sends a delete carrying the defaults once, and only after a config was sent', () => {
    const gate = new ConfigGate(validateConfig);
    expect(gate.delete()).toBeUndefined();
    gate.upsert(config({ defaultScheduler: 'lc' }));
    expect(gate.delete()).toEqual({ kind: 'config', type: 'delete', config: defaultProxyConfig });
    expect(gate.delete()).toBeUndefined();
    // Sent again after a delete, even when it is the config sent before it.
    expect(gate.upsert(config({ defaultScheduler: 'lc' }))).toMatchObject({ ok: true, event: { type: 'upsert' } });
  });

  it('validates with the validator it is given', () => {
    const seen: unknown[] = [];
    const validate = (o: unknown): ConfigResult => { seen.push(o); return { ok: false, errors: 'no' }; };
    expect(new ConfigGate(validate).upsert({ x: 1 })).toEqual({ ok: false, errors: 'no' });
    expect(seen).toEqual([{ x: 1 }]);
  });
});
