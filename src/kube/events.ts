// Problems as core/v1 Events on the objects they are about: a Service, or for configuration
// problems (service "") the IPVSProxyConfig "default". Deduplicated by (object, reason, message):
// posted when a problem appears, not on every sync that still finds it; a problem that goes away
// and comes back is posted again. A failed post is logged (once per kind of failure) and tried
// again at the next report; a report stops at its first failure and each post is bounded by
// `timeoutMs`, so report() never hangs and never throws.
// Each node's operator posts its own Events (source.host tells them apart), as kubelets do.
import type { CoreV1Event } from '@kubernetes/client-node';
import { CONFIG_API_VERSION, CONFIG_KIND, CONFIG_NAME } from '../config/schema.js';
import type { Problem } from '../desired/types.js';
import { ProblemDedup } from '../source/dedup.js';
import { type Log, noLog } from '../util/log.js';
import type { KubeClient } from './client.js';
import { FailureLog, withTimeout } from './informer.js';
import type { EventSink, ServiceRef } from '../source/types.js';

export const COMPONENT = 'ipvs-operator';
/** The API server refuses longer Event messages. */
const MAX_MESSAGE = 1024;

/** What an Event is about. */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent for cluster-scoped objects (their Events go to the "default" namespace). */
  namespace?: string;
  uid?: string;
}

export interface KubeEventSinkOptions {
  client: KubeClient;
  /** This node (the Event's source.host and reportingInstance). */
  nodeName: string;
  log?: Log;
  now?: () => Date;
  /** Each post gives up after this (default 10 s). */
  timeoutMs?: number;
}

/** Posts Warning Events for problems (see the file comment). */
export class KubeEventSink implements EventSink {
  private readonly dedup = new ProblemDedup();
  private readonly log: Log;
  private readonly now: () => Date;
  private readonly failures: FailureLog;
  private seq = 0;

  constructor(private readonly opts: KubeEventSinkOptions) {
    this.log = opts.log ?? noLog;
    this.now = opts.now ?? (() => new Date());
    this.failures = new FailureLog(this.log, 'posting an Event');
  }

  /** Never rejects: a failure is logged and the problems not posted are tried again next time. */
  async report(problems: readonly Problem[], services: ReadonlyMap<string, ServiceRef>): Promise<void> {
    for (const p of this.dedup.fresh(problems)) {
      try {
        await withTimeout(this.post(involvedObjectOf(p, services), p.reason, p.message), this.opts.timeoutMs ?? 10_000,
          'the Kubernetes API');
        this.dedup.markPosted(p);
        this.failures.succeeded();
      } catch (e) {
        this.failures.failed(e, { reason: p.reason,
          object: p.service || `${CONFIG_OBJECT.kind}/${CONFIG_OBJECT.name}` });
        return; // the API is failing: the rest waits for the next report
      }
    }
  }

  /** Posts one Warning Event (not deduplicated); throws when the API refuses it. */
  async post(about: InvolvedObject, reason: string, message: string): Promise<void> {
    const now = this.now();
    const namespace = about.namespace ?? 'default';
    // client-go names Events "<object>.<unix nanoseconds in hex>"; the sequence keeps names unique
    // within a millisecond.
    const name = `${about.name}.${(BigInt(now.getTime()) * 1_000_000n + BigInt(this.seq++ % 1_000_000)).toString(16)}`;
    const body: CoreV1Event = {
      metadata: { name, namespace },
      involvedObject: { ...about, ...(about.namespace ? {} : { namespace: undefined }) },
      reason,
      message: message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message,
      type: 'Warning',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now, // JSON: RFC 3339 text, as client-go sends it
      source: { component: COMPONENT, host: this.opts.nodeName },
      reportingComponent: COMPONENT,
      reportingInstance: this.opts.nodeName,
    };
    await this.opts.client.request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body });
  }
}

/** The IPVSProxyConfig every configuration problem is about. */
export const CONFIG_OBJECT: InvolvedObject = { apiVersion: CONFIG_API_VERSION, kind: CONFIG_KIND, name: CONFIG_NAME };

function involvedObjectOf(p: Problem, services: ReadonlyMap<string, ServiceRef>): InvolvedObject {
  if (p.service === '') return CONFIG_OBJECT;
  const ref = services.get(p.service);
  const [namespace = '', name = ''] = p.service.split('/');
  return { apiVersion: 'v1', kind: 'Service', namespace: ref?.namespace ?? namespace, name: ref?.name ?? name,
    ...(ref?.uid ? { uid: ref.uid } : {}) };
}

/** The first line of an error's message (re-exported; defined beside the other error helpers). */
export { firstLine } from './informer.js';
