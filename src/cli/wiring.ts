// What the CLI's commands are made of: the source and sinks for a --source spec, and the
// iptables path. The only place that chooses between implementations.
import type { Problem } from '../desired/types.js';
import { IptablesRestore } from '../iptables/restore.js';
import type { IptablesSync } from '../iptables/sync.js';
import type { Log } from '../util/log.js';
import { LogEventSink } from '../source/log-events.js';
import type { EventSink, Source, StatusSink } from '../source/types.js';
import type { KubeClient } from '../kube/client.js';

/** The iptables + ipset path: masquerade marking, source ranges, VIP filtering (src/iptables/). */
export async function iptablesPath(): Promise<IptablesSync> {
  return new IptablesRestore();
}

/** Where objects come from. */
export type SourceSpec = { kind: 'kube' } | { kind: 'files'; dir: string };

export interface Wiring {
  source: Source;
  events: EventSink;
  status: StatusSink;
  /** The API client (the kube source only): the cluster load view writes through it. */
  client?: KubeClient;
}

/** Events and node status as log lines (the files source, and dry runs of any source). */
export function logSinks(log: Log): { events: EventSink; status: StatusSink } {
  return { events: new LogEventSink(log), status: { write: async (s) => log('debug', 'node status', { ...s }) } };
}

/** The source and sinks for a source spec. */
export async function wire(spec: SourceSpec, nodeName: string, kubeconfig: string | undefined, log: Log,
  api: { onMalformed?: (resource: string, reason: string) => void; timeoutMs?: number } = {}): Promise<Wiring> {
  if (spec.kind === 'files') {
    // Loaded here, as the kube source below: `cleanup` takes iptablesPath from this module and
    // has no use for YAML parsing or the config's validation (about 250 modules).
    const { FilesSource } = await import('../source/files.js');
    const sinks = logSinks(log);
    // The source's problems get a sink of their own: one sink fed two different lists by two
    // callers would forget each list's problems whenever the other reports, and log them again.
    const sourceProblems = new LogEventSink(log);
    const source = new FilesSource({
      dir: spec.dir, nodeName, log,
      onProblems: (p: readonly Problem[]) => void sourceProblems.report(p, new Map()),
    });
    return { source, ...sinks };
  }
  // Loaded only here: the files source (labs, demos, the tests in the VM) has no use for the
  // Kubernetes client (src/kube/client.ts, client-node's ListWatch and Watch). Invalid config and
  // other source problems: KubeSource logs them and posts the config Event itself.
  const [{ KubeEventSink }, { loadKubeClient }, { deadlinesFor }, { KubeSource }, { KubeStatusSink }] =
    await Promise.all([
      import('../kube/events.js'), import('../kube/client.js'), import('../kube/transport.js'),
      import('../kube/source.js'), import('../kube/status.js'),
    ]);
  const client = await loadKubeClient(kubeconfig);
  if (api.timeoutMs !== undefined) client.deadlines = deadlinesFor(api.timeoutMs);
  return {
    // No start timeout: a node waits for its first lists as long as it takes, /healthz red meanwhile.
    source: new KubeSource({ client, nodeName, log, startTimeoutMs: 0, onMalformed: api.onMalformed }),
    events: new KubeEventSink({ client, nodeName, log }),
    status: new KubeStatusSink({ client, nodeName, log }),
    client,
  };
}

