// The one gate the IPVSProxyConfig "default" passes on its way from a source (files, kube) to the
// operator: checked with the CRD's schema, sent only when it changed, and an invalid one never
// sent, so the last valid one stays in force. The sources word the problem and report it; the gate
// decides. pure: no I/O (the validator is given).
import type { ConfigResult } from '../config/schema.js';
import { type ProxyConfig, defaultProxyConfig } from '../config/types.js';
import type { SourceEvent } from './types.js';

/** A config event, as the gate sends it. */
export type ConfigEvent = Extract<SourceEvent, { kind: 'config' }>;

/** What the gate made of a config object: the event to send (none when nothing changed), or why it is invalid. */
export type ConfigVerdict = { ok: true; event?: ConfigEvent } | { ok: false; errors: string };

/** Remembers what was sent; one per source. */
export class ConfigGate {
  /** What the config last sent is told apart by; undefined when none was sent since the last delete. */
  private sent: string | undefined;

  constructor(private readonly validate: (obj: unknown) => ConfigResult) {}

  /**
   * A config object seen (added, changed, listed again). Invalid: its errors, nothing sent, the
   * last valid config stays in force. Valid: an upsert, unless its identity is that of the config
   * last sent. The identity defaults to the validated config itself (a metadata-only change or a
   * relist sends nothing); a source may pass its own (files: the object's content).
   */
  upsert(object: unknown, identity?: string): ConfigVerdict {
    const r = this.validate(object);
    if (!r.ok) return { ok: false, errors: r.errors };
    const id = identity ?? JSON.stringify(r.config);
    if (id === this.sent) return { ok: true };
    this.sent = id;
    return { ok: true, event: { kind: 'config', type: 'upsert', config: r.config } };
  }

  /** The config is gone: a delete carrying the defaults, or undefined when no config was sent since the last delete. */
  delete(): ConfigEvent | undefined {
    if (this.sent === undefined) return undefined;
    this.sent = undefined;
    return { kind: 'config', type: 'delete', config: { ...defaultProxyConfig } as ProxyConfig };
  }
}
