// `kubectl exec` against the lab API server: the HTTP upgrade of
// GET/POST /api/v1/namespaces/NS/pods/NAME/exec to a WebSocket speaking the remote command
// protocol (v5.channel.k8s.io, v4.channel.k8s.io; remotecommand.ts over websocket.ts), and the
// command run as the pod's container would run it: in the pod's network namespace in the lab VM.
//
// What kube-apiserver and the kubelet do between them, in one place: authentication and RBAC
// (`pods/exec`, verb get for GET and create for POST, as kube-apiserver's RequestInfo names them),
// the pod and container checked (remotecommand.ts execContainer), then the stream. An error
// before the upgrade is an HTTP Status answer; kubectl 1.30+ then tries SPDY, which gets the same
// answer (the lab serves no SPDY), and prints it as `Error from server (...)`.
// Not kept: a TTY (refused with a 400, kubectl prints it), attach and port-forward, injected
// faults; a client that goes away kills the command (a container runtime lets it run on).
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { constants as osConstants } from 'node:os';
import type { Duplex } from 'node:stream';
import type { Obj, PodRuntime, RecordedRequest } from './api-types.js';
import type { ApiCore } from './http.js';
import { authenticate } from './http.js';
import { type RequestAttributes, authorize, forbiddenMessage } from './rbac.js';
import {
  Channel, type ExecOptions, PROTOCOLS, decodeChannel, encodeChannel, execContainer, exitCodeOf, exitStatus, internalErrorStatus,
  negotiateProtocol, parseExecOptions,
} from './remotecommand.js';
import { HttpError, statusObject } from './status.js';
import { CloseCode, Opcode, WsDecoder, WsProtocolError, acceptKey, closePayload, encodeFrame } from './websocket.js';

/** The annotation naming a lab pod's network namespace (the harness's pods carry it, cluster.ts podObject). */
export const NETNS_ANNOTATION = 'lab.ipvs-operator.io/netns';

/** A pod's network namespace in the lab VM: its annotation, else its node's for a hostNetwork pod (the operator's); undefined: none. */
export function podNetns(pod: Obj): string | undefined {
  const annotations = (pod.metadata as { annotations?: Record<string, string> }).annotations ?? {};
  const spec = pod.spec as { hostNetwork?: boolean; nodeName?: string } | undefined;
  const ns = annotations[NETNS_ANNOTATION] ?? (spec?.hostNetwork ? spec.nodeName : undefined);
  return ns !== undefined && /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(ns) ? ns : undefined;
}

/** The lab cluster's runtime: `ip netns exec <the pod's netns> command...` (as `npm run cluster -- exec` runs it). */
export const netnsRuntime: PodRuntime = {
  argv(pod, container, command) {
    const ns = podNetns(pod);
    const name = pod.metadata.name;
    if (ns === undefined) {
      throw new HttpError(400, 'BadRequest', `pod ${name} has no network namespace in the lab: only the lab's own pods (the harness's, annotated ${NETNS_ANNOTATION}, and hostNetwork pods) run commands`);
    }
    if (!existsSync(`/run/netns/${ns}`)) throw new HttpError(400, 'BadRequest', `container ${container} in pod ${name} is not running: its network namespace ${ns} does not exist`);
    return ['ip', 'netns', 'exec', ns, ...command];
  },
};

/** The largest message read from a client (stdin arrives in kubectl's 32 KiB messages). */
const MAX_MESSAGE = 1 << 20;

/**
 * Serves one HTTP upgrade request on the API server's socket: pods/exec over WebSocket, or an
 * HTTP Status answer (401, 403, 404, 400) and the socket closed. Never throws.
 */
export function handleUpgrade(core: ApiCore, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  socket.on('error', () => socket.destroy());
  const url = new URL(req.url ?? '/', 'http://x');
  const method = req.method ?? 'GET';
  const rec: RecordedRequest = { method, path: url.pathname, query: url.search };
  core.requests.push(rec);
  core.beforeRequest();
  try {
    const session = prepare(core, req, url, method, rec);
    if (String(req.headers.upgrade).toLowerCase() !== 'websocket') {
      throw new HttpError(400, 'BadRequest', `the lab API server runs exec over WebSocket only (${PROTOCOLS.join(', ')}), not ${String(req.headers.upgrade)}: use kubectl 1.30 or later`);
    }
    const protocol = negotiateProtocol(req.headers['sec-websocket-protocol']);
    if (!protocol) throw new HttpError(400, 'BadRequest', `requested protocol(s) are not supported: [${String(req.headers['sec-websocket-protocol'] ?? '')}]; supports [${PROTOCOLS.join(' ')}]`);
    const key = req.headers['sec-websocket-key'];
    if (req.headers['sec-websocket-version'] !== '13' || typeof key !== 'string' || Buffer.from(key, 'base64').length !== 16) {
      throw new HttpError(400, 'BadRequest', 'a WebSocket handshake needs Sec-WebSocket-Version 13 and a 16-byte Sec-WebSocket-Key');
    }
    socket.write(['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${acceptKey(key)}`,
      `Sec-WebSocket-Protocol: ${protocol}`, '', ''].join('\r\n'));
    runSession(socket, head, protocol, session.argv, session.options);
  } catch (e) {
    const err = e instanceof HttpError ? e : new HttpError(500, 'InternalError', `internal error: ${(e as Error).message}`);
    rec.status = err.code;
    const body = JSON.stringify(statusObject(err.code, err.reason, err.message));
    socket.end([`HTTP/1.1 ${err.code} ${err.reason}`, 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close', '', body].join('\r\n'));
  }
}

/** Authenticates, authorizes and checks an exec request; what to run. Throws HttpError. */
function prepare(core: ApiCore, req: IncomingMessage, url: URL, method: string, rec: RecordedRequest): { argv: string[]; options: ExecOptions } {
  const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec$/.exec(url.pathname);
  if (!m || !['GET', 'POST'].includes(method)) throw new HttpError(404, 'NotFound', `the lab API server upgrades only pods/exec, not ${method} ${url.pathname}`);
  const [namespace, name] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)];
  const user = authenticate(core.opts, req);
  if (user) rec.user = user.name;
  const attrs: RequestAttributes = { verb: method === 'GET' ? 'get' : 'create', group: '', resource: 'pods', subresource: 'exec', namespace, name };
  if (user && !authorize(core.policy(), user, attrs)) throw new HttpError(403, 'Forbidden', forbiddenMessage(user, attrs));
  const pod = core.get('pods', name, namespace);
  if (!pod) throw new HttpError(404, 'NotFound', `pods "${name}" not found`);
  const options = parseExecOptions(url.searchParams);
  const container = execContainer(pod, options.container);
  if (options.tty) throw new HttpError(400, 'BadRequest', 'the lab API server allocates no TTY: run kubectl exec without -t (--tty)');
  const runtime = core.opts.exec;
  if (!runtime) throw new HttpError(400, 'BadRequest', 'this lab API server runs no commands in pods (started without --exec netns)');
  return { argv: runtime.argv(pod, container, options.command), options };
}

/**
 * The session after the 101: the command spawned, its stdout and stderr sent on their channels
 * (the first, empty message on the lowest one tells the client the streams are up), stdin from
 * channel 0 until v5's close signal (v4 has none: the command's stdin stays open), pings answered; when the command has ended and its output is
 * sent, its Status on the error channel, a normal close, the end of the connection.
 */
function runSession(socket: Duplex, head: Buffer, protocol: string, argv: string[], o: ExecOptions): void {
  const decoder = new WsDecoder({ requireMask: true, maxMessage: MAX_MESSAGE });
  let closing = false;
  const frame = (opcode: number, payload?: Buffer) => (socket.writable ? socket.write(encodeFrame(opcode, payload)) : true);
  const send = (channel: number, data?: Buffer | string) => (closing ? true : frame(Opcode.binary, encodeChannel(channel, data)));
  const close = (code: number, reason = '') => {
    if (closing) return;
    frame(Opcode.close, closePayload(code, reason));
    closing = true;
    socket.end();
    // The client answers the close and ends the connection; one that does not is cut.
    setTimeout(() => socket.destroy(), 10_000).unref();
  };
  send(o.stdout ? Channel.stdout : o.stderr ? Channel.stderr : Channel.error);

  let child: ChildProcess;
  try {
    child = spawn(argv[0]!, argv.slice(1), { stdio: [o.stdin ? 'pipe' : 'ignore', o.stdout ? 'pipe' : 'ignore', o.stderr ? 'pipe' : 'ignore'] });
  } catch (e) {
    send(Channel.error, JSON.stringify(internalErrorStatus((e as Error).message)));
    close(CloseCode.normal);
    return;
  }
  let done = false;
  const finish = (status: object) => {
    if (done) return;
    done = true;
    send(Channel.error, JSON.stringify(status));
    close(CloseCode.normal);
  };
  child.on('error', (e) => finish(internalErrorStatus(e.message)));
  child.on('close', (code, signal) => finish(exitStatus(exitCodeOf(code, signal ? osConstants.signals[signal] : undefined))));
  for (const [stream, channel] of [[child.stdout, Channel.stdout], [child.stderr, Channel.stderr]] as const) {
    stream?.on('data', (d: Buffer) => {
      if (!send(channel, d)) {
        stream.pause();
        socket.once('drain', () => stream.resume());
      }
    });
  }
  child.stdin?.on('error', () => undefined); // a command that exits without reading its stdin: EPIPE
  child.stdin?.on('drain', () => socket.resume());

  const onData = (chunk: Buffer) => {
    let events;
    try {
      events = decoder.push(chunk);
    } catch (e) {
      const err = e as WsProtocolError;
      child.kill('SIGKILL');
      close(err.closeCode ?? CloseCode.protocolError, err.message);
      return;
    }
    for (const ev of events) {
      if (ev.type === 'ping') frame(Opcode.pong, ev.data);
      else if (ev.type === 'close') {
        child.kill('SIGKILL');
        close(ev.code ?? CloseCode.normal);
      } else if (ev.type === 'message') {
        let m;
        try {
          m = decodeChannel(ev.data, protocol);
        } catch (e) {
          child.kill('SIGKILL');
          close(CloseCode.protocolError, (e as Error).message);
          return;
        }
        if (!m) continue;
        if ('closed' in m) {
          if (m.closed === Channel.stdin) child.stdin?.end();
        } else if (m.channel === Channel.stdin && child.stdin && !child.stdin.writableEnded) {
          if (!child.stdin.write(m.data)) socket.pause();
        }
        // Resize (4) needs a TTY, which is refused; other channels are not the client's to write.
      }
    }
  };
  socket.on('data', onData);
  // The client went away (or the server is going down): the command goes too.
  socket.on('close', () => {
    if (!done) child.kill('SIGKILL');
  });
  if (head.length) onData(head);
}
