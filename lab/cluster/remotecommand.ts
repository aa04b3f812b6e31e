// The remote command protocol of `kubectl exec` over WebSocket, pure: which subprotocol, the
// channel byte in front of every message, the exec options of the query, the container a request
// names, and the Status that ends a session - as kube-apiserver's stream translator and the
// kubelet write them (k8s.io/client-go/tools/remotecommand/proxy/websocket.go,
// k8s.io/kubelet/pkg/cri/streaming/remotecommand/exec.go, k8s.io/apimachinery/pkg/util/remotecommand).
//
// Each binary message is one channel byte and the data: 0 stdin (client to server), 1 stdout,
// 2 stderr, 3 the error channel (one JSON metav1.Status when the command ended), 4 resize
// (client to server, JSON {Width, Height}). v5.channel.k8s.io adds 255: [255, n] closes channel
// n, which is how the client says stdin reached EOF (v4 over WebSocket has no way to say it).
import type { Obj } from './api-types.js';
import { HttpError } from './status.js';

export const PROTOCOL_V5 = 'v5.channel.k8s.io';
export const PROTOCOL_V4 = 'v4.channel.k8s.io';
/** The subprotocols served, best first. */
export const PROTOCOLS = [PROTOCOL_V5, PROTOCOL_V4] as const;

/** Channel numbers. */
export const Channel = { stdin: 0, stdout: 1, stderr: 2, error: 3, resize: 4, close: 255 } as const;

/** The subprotocol for a Sec-WebSocket-Protocol header: the client's first that is served (undefined: none). */
export function negotiateProtocol(header: string | string[] | undefined): string | undefined {
  const offered = (Array.isArray(header) ? header.join(',') : header ?? '').split(',').map((p) => p.trim()).filter(Boolean);
  return offered.find((p) => (PROTOCOLS as readonly string[]).includes(p));
}

/** A message on `channel`. */
export function encodeChannel(channel: number, data: Buffer | string = Buffer.alloc(0)): Buffer {
  return Buffer.concat([Buffer.from([channel]), typeof data === 'string' ? Buffer.from(data, 'utf8') : data]);
}

/** A message read: data on a channel, or (v5) a channel closed; undefined for an empty message (ignored, as upstream). */
export type ChannelMessage = { channel: number; data: Buffer } | { closed: number };

/** Decodes one message of the negotiated `protocol`; throws on a v5 close without a channel. */
export function decodeChannel(message: Buffer, protocol: string): ChannelMessage | undefined {
  if (message.length === 0) return undefined;
  const channel = message[0]!;
  if (channel === Channel.close && protocol === PROTOCOL_V5) {
    if (message.length < 2) throw new Error('a close signal without the channel it closes');
    return { closed: message[1]! };
  }
  return { channel, data: message.subarray(1) };
}

/** What an exec request asks for (PodExecOptions from the query). */
export interface ExecOptions { command: string[]; container?: string; stdin: boolean; stdout: boolean; stderr: boolean; tty: boolean }

/** PodExecOptions from a query (`command` repeated, booleans as "true"/"1"); throws HttpError 400 as kube-apiserver refuses them. */
export function parseExecOptions(q: URLSearchParams): ExecOptions {
  const flag = (k: string) => ['true', '1'].includes(q.get(k) ?? '');
  const command = q.getAll('command');
  const container = q.get('container') ?? '';
  const o: ExecOptions = { command, ...(container ? { container } : {}), stdin: flag('stdin'), stdout: flag('stdout'), stderr: flag('stderr'), tty: flag('tty') };
  if (command.length === 0) throw new HttpError(400, 'BadRequest', 'PodExecOptions is invalid: command: Required value');
  if (!o.stdin && !o.stdout && !o.stderr) throw new HttpError(400, 'BadRequest', 'you must specify at least 1 of stdin, stdout, stderr');
  return o;
}

type PodView = {
  spec?: { nodeName?: string; containers?: Array<{ name?: string }> };
  status?: { phase?: string; containerStatuses?: Array<{ name?: string; state?: Record<string, { reason?: string } | undefined> }> };
};

/**
 * The container an exec into `pod` runs in, checked as kube-apiserver checks it
 * (pkg/registry/core/pod/strategy.go streamLocation): the one container when none is named, a
 * named one must exist, the pod must have a node; and as the kubelet would find it: a completed
 * pod has no running container, and a container whose status is not running (a crash loop's
 * back-off) cannot take a command. Throws HttpError 400 with the reason.
 */
export function execContainer(pod: Obj, requested: string | undefined): string {
  const p = pod as unknown as PodView;
  const name = pod.metadata.name;
  const containers = (p.spec?.containers ?? []).map((c) => String(c.name));
  let container = requested;
  if (container === undefined) {
    if (containers.length === 0) throw new HttpError(400, 'BadRequest', `a container name must be specified for pod ${name}`);
    if (containers.length > 1) throw new HttpError(400, 'BadRequest', `a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]`);
    container = containers[0]!;
  } else if (!containers.includes(container)) {
    throw new HttpError(400, 'BadRequest', `container ${container} is not valid for pod ${name}`);
  }
  if (!p.spec?.nodeName) throw new HttpError(400, 'BadRequest', `pod ${name} does not have a host assigned`);
  const phase = p.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') throw new HttpError(400, 'BadRequest', `cannot exec into a container in a completed pod; current phase is ${phase}`);
  const state = p.status?.containerStatuses?.find((c) => c.name === container)?.state;
  if (state && !state.running) {
    const [what, detail] = Object.entries(state).find(([, v]) => v) ?? ['unknown', undefined];
    throw new HttpError(400, 'BadRequest', `container ${container} in pod ${name} is not running (${what}${detail?.reason ? `: ${detail.reason}` : ''})`);
  }
  return container;
}

/** The Status ending a session, as the kubelet writes it on the error channel: Success, or NonZeroExitCode with the code as an ExitCode cause. */
export function exitStatus(code: number): object {
  if (code === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {}, status: 'Failure', message: `command terminated with non-zero exit code: exit status ${code}`, reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
  };
}

/** The Status of a command that could not run (apierrors.NewInternalError, as the kubelet sends it). */
export function internalErrorStatus(message: string): object {
  const m = `error executing command in container: ${message}`;
  return { metadata: {}, status: 'Failure', message: `Internal error occurred: ${m}`, reason: 'InternalError', details: { causes: [{ message: m }] }, code: 500 };
}

/** The exit code of a process that ended with `code` or by signal number `signal` (128 + the signal, as a shell and a container runtime report it). */
export function exitCodeOf(code: number | null, signal: number | undefined): number {
  if (code !== null) return code;
  return 128 + (signal ?? 0);
}
