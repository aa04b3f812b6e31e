// Where the lab's kubelet (kubelet.ts) writes a container's output and how the lab API server
// answers `kubectl logs` from it (the pods/log subresource), pure. The layout is the kubelet's
// /var/log/pods: <dir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log, one file per run
// of the container, so the current run's log and the previous one's (`kubectl logs -p`) are apart,
// and a new pod (a new UID) starts with none.
import { join } from 'node:path';

/** The log file of run `restartCount` of `container` in pod namespace/name with `uid`. */
export function podLogPath(dir: string, pod: { namespace: string; name: string; uid: string }, container: string, restartCount: number): string {
  return join(dir, `${pod.namespace}_${pod.name}_${pod.uid}`, container, `${restartCount}.log`);
}

/** A pods/log request's options (the query kubectl sends). */
export interface LogQuery { container?: string; previous: boolean; tailLines?: number; limitBytes?: number }

/** Parses the query of GET .../pods/NAME/log; throws an Error with the server's message on a bad number. */
export function parseLogQuery(q: URLSearchParams): LogQuery {
  const num = (k: string) => {
    const v = q.get(k);
    if (v === null) return undefined;
    if (!/^\d+$/.test(v)) throw new Error(`${k}: must be a non-negative integer, got "${v}"`);
    return Number(v);
  };
  const tailLines = num('tailLines');
  const limitBytes = num('limitBytes');
  const container = q.get('container') ?? undefined;
  if (limitBytes === 0) throw new Error('limitBytes: must be greater than 0');
  return { previous: q.get('previous') === 'true', ...(container ? { container } : {}), ...(tailLines !== undefined ? { tailLines } : {}), ...(limitBytes !== undefined ? { limitBytes } : {}) };
}

/** The log text as the query asks: its last `tailLines` lines, then at most `limitBytes` bytes of that. */
export function selectLog(text: string, q: Pick<LogQuery, 'tailLines' | 'limitBytes'>): string {
  let out = text;
  if (q.tailLines !== undefined) {
    const lines = out.split('\n');
    const last = lines.at(-1) === '' ? lines.pop() : undefined; // a final newline ends the last line, it does not start one
    out = q.tailLines === 0 ? '' : lines.slice(-q.tailLines).join('\n') + (last !== undefined && lines.length ? '\n' : '');
  }
  if (q.limitBytes !== undefined) {
    const b = Buffer.from(out, 'utf8');
    if (b.length > q.limitBytes) out = b.subarray(0, q.limitBytes).toString('utf8');
  }
  return out;
}
