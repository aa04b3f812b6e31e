// This node's IPVSNodeState: created (named after the node) when missing, then only its status
// subresource is written. Writes are serialized and coalesced: when syncs come faster than the
// API answers, only the newest status is written next. write() never rejects and never hangs:
// each API call is bounded by `timeoutMs`, a failure is logged once per kind (then at debug) and
// the next write tries again.
import { CONFIG_GROUP, CONFIG_VERSION } from '../config/schema.js';
import type { NodeStatus, StatusSink } from '../source/types.js';
import { type Log, noLog } from '../util/log.js';
import type { KubeClient } from './client.js';
import { FailureLog, httpStatus, withTimeout } from './informer.js';

const PLURAL = 'ipvsnodestates';
const KIND = 'IPVSNodeState';
const COLLECTION = `/apis/${CONFIG_GROUP}/${CONFIG_VERSION}/${PLURAL}`;

export interface KubeStatusSinkOptions {
  client: KubeClient;
  nodeName: string;
  log?: Log;
  /** Each API call gives up after this (default 10 s). */
  timeoutMs?: number;
}

/** Writes the IPVSNodeState status of this node (see the file comment). */
export class KubeStatusSink implements StatusSink {
  /** resourceVersion of the object as last seen; undefined: unknown (get or create first). */
  private resourceVersion: string | undefined;
  private running: Promise<void> | undefined;
  private next: { status: NodeStatus; waiters: Array<(written: boolean) => void> } | undefined;
  private readonly failures: FailureLog;
  private readonly timeoutMs: number;

  constructor(private readonly opts: KubeStatusSinkOptions) {
    this.failures = new FailureLog(opts.log ?? noLog, 'writing the IPVSNodeState status');
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  /**
   * Resolves when this status (or a newer one given meanwhile) was written or the attempt failed
   * (logged); never rejects.
   */
  write(status: NodeStatus): Promise<void> {
    return this.tryWrite(status).then(() => undefined);
  }

  /** write(), resolving to whether the status was written. */
  tryWrite(status: NodeStatus): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (this.next) {
        this.next.status = status;
        this.next.waiters.push(resolve);
      } else {
        this.next = { status, waiters: [resolve] };
      }
      this.running ??= this.drain();
    });
  }

  private async drain(): Promise<void> {
    while (this.next) {
      const { status, waiters } = this.next;
      this.next = undefined;
      let written = false;
      try {
        await this.writeOnce(status);
        written = true;
        this.failures.succeeded();
      } catch (e) {
        this.resourceVersion = undefined;
        this.failures.failed(e, { node: this.opts.nodeName });
      }
      for (const w of waiters) w(written);
    }
    this.running = undefined;
  }

  private path(): string {
    return `${COLLECTION}/${encodeURIComponent(this.opts.nodeName)}`;
  }

  private call<T>(p: Promise<T>): Promise<T> {
    return withTimeout(p, this.timeoutMs, 'the Kubernetes API');
  }

  private async writeOnce(status: NodeStatus): Promise<void> {
    // One retry: after a 404 (deleted meanwhile) create it again; after a 409 re-read it.
    for (let attempt = 0; ; attempt++) {
      try {
        if (this.resourceVersion === undefined) await this.ensure();
        const body = { apiVersion: `${CONFIG_GROUP}/${CONFIG_VERSION}`, kind: KIND,
          metadata: { name: this.opts.nodeName, resourceVersion: this.resourceVersion }, status };
        const written = (await this.call(this.opts.client.request('PUT', `${this.path()}/status`,
          { body }))) as { metadata?: { resourceVersion?: string } };
        this.resourceVersion = written.metadata?.resourceVersion;
        return;
      } catch (e) {
        const code = httpStatus(e);
        this.resourceVersion = undefined;
        if (attempt > 0 || (code !== 404 && code !== 409)) throw e;
      }
    }
  }

  /** Reads the object, creating it when missing; remembers its resourceVersion. */
  private async ensure(): Promise<void> {
    let obj: { metadata?: { resourceVersion?: string } };
    try {
      obj = await this.call(this.opts.client.request('GET', this.path()));
    } catch (e) {
      if (httpStatus(e) !== 404) throw e;
      obj = await this.call(this.opts.client.request('POST', COLLECTION, { body: {
        apiVersion: `${CONFIG_GROUP}/${CONFIG_VERSION}`, kind: KIND, metadata: { name: this.opts.nodeName }, spec: {},
      } }));
    }
    this.resourceVersion = obj.metadata?.resourceVersion;
  }
}
