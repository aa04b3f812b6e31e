// The WebSocket framing (lab/cluster/websocket.ts) and the remote command channels
// (lab/cluster/remotecommand.ts) of the lab API server's `kubectl exec`, pure: frames as a client
// masks them, cut anywhere, fragmented, with control frames between fragments; the errors a
// server closes on; the channel byte, v5's close signal, the exec options and the ending Status.
import { describe, expect, it } from '@jest/globals';
import {
  Channel, PROTOCOL_V4, PROTOCOL_V5, decodeChannel, encodeChannel, execContainer, exitCodeOf, exitStatus, negotiateProtocol, parseExecOptions,
} from '../../../lab/cluster/remotecommand.js';
import type { Obj } from '../../../lab/cluster/api-types.js';
import { HttpError } from '../../../lab/cluster/status.js';
import { CloseCode, Opcode, WsDecoder, WsProtocolError, acceptKey, closePayload, encodeFrame } from '../../../lab/cluster/websocket.js';

const MASK = Buffer.from([0x37, 0xfa, 0x21, 0x3d]);
const server = () => new WsDecoder({ requireMask: true, maxMessage: 1 << 20 });
/** A client's frame: masked. */
const client = (opcode: number, payload: Buffer | string = '', fin = true) => encodeFrame(opcode, Buffer.from(payload), { fin, mask: MASK });
/** The close code a stream is refused with. */
function refused(d: WsDecoder, bytes: Buffer): number | string {
  try {
    d.push(bytes);
    return 'accepted';
  } catch (e) {
    return e instanceof WsProtocolError ? e.closeCode : (e as Error).message;
  }
}

describe('WebSocket framing (RFC 6455)', () => {
  it('accept key: the RFC\'s own example', () => {
    expect(acceptKey('dGhlIHNhbXBsZSBub25jZQ==')).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  });

  it('encodes the RFC\'s examples: unmasked "Hello", masked "Hello", 256 and 65536 bytes with their extended lengths', () => {
    expect(encodeFrame(Opcode.text, Buffer.from('Hello')).toString('hex')).toBe('810548656c6c6f');
    expect(encodeFrame(Opcode.text, Buffer.from('Hello'), { mask: Buffer.from([0x37, 0xfa, 0x21, 0x3d]) }).toString('hex')).toBe('818537fa213d7f9f4d5158');
    expect(encodeFrame(Opcode.binary, Buffer.alloc(256)).subarray(0, 4).toString('hex')).toBe('827e0100');
    expect(encodeFrame(Opcode.binary, Buffer.alloc(65536)).subarray(0, 10).toString('hex')).toBe('827f0000000000010000');
    expect(encodeFrame(Opcode.text, Buffer.from('Hel'), { fin: false }).toString('hex')).toBe('010348656c');
  });

  it('decodes a masked frame cut at every byte, the same as whole', () => {
    const bytes = Buffer.concat([client(Opcode.binary, 'abc'), client(Opcode.ping, 'p1'), client(Opcode.text, 'xyz')]);
    const whole = server().push(bytes);
    expect(whole).toEqual([
      { type: 'message', binary: true, data: Buffer.from('abc') }, { type: 'ping', data: Buffer.from('p1') }, { type: 'message', binary: false, data: Buffer.from('xyz') },
    ]);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const d = server();
      expect([...d.push(bytes.subarray(0, cut)), ...d.push(bytes.subarray(cut))]).toEqual(whole);
    }
    const d = server();
    expect([...bytes].flatMap((b) => d.push(Buffer.from([b])))).toEqual(whole);
  });

  it('joins a fragmented message, a ping and a pong between its fragments handed out at once', () => {
    const d = server();
    const out = d.push(Buffer.concat([client(Opcode.binary, 'one ', false), client(Opcode.ping, 'x'), client(Opcode.continuation, 'two ', false),
      client(Opcode.pong, 'y'), client(Opcode.continuation, 'three')]));
    expect(out).toEqual([{ type: 'ping', data: Buffer.from('x') }, { type: 'pong', data: Buffer.from('y') }, { type: 'message', binary: true, data: Buffer.from('one two three') }]);
  });

  it('large payloads: 200000 bytes in one frame (64-bit length) and in 200 fragments of 1000, masked, byte for byte', () => {
    const big = Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 7) & 0xff));
    const d = server();
    expect(d.push(client(Opcode.binary, big))).toEqual([{ type: 'message', binary: true, data: big }]);
    const parts = Array.from({ length: 200 }, (_, i) => big.subarray(i * 1000, (i + 1) * 1000));
    const frames = Buffer.concat(parts.map((p, i) => client(i === 0 ? Opcode.binary : Opcode.continuation, p, i === parts.length - 1)));
    // Fed in odd-sized chunks, as TCP may deliver them.
    const out = [];
    for (let at = 0; at < frames.length; at += 4093) out.push(...d.push(frames.subarray(at, at + 4093)));
    expect(out).toEqual([{ type: 'message', binary: true, data: big }]);
  });

  it('close frames: code and reason, an empty one, a one-byte payload refused', () => {
    expect(server().push(client(Opcode.close, closePayload(1000, 'bye')))).toEqual([{ type: 'close', code: 1000, reason: 'bye' }]);
    expect(server().push(client(Opcode.close))).toEqual([{ type: 'close', reason: '' }]);
    expect(refused(server(), client(Opcode.close, Buffer.from([3])))).toBe(CloseCode.protocolError);
    expect(closePayload(1000, 'x'.repeat(300)).length).toBe(125);
  });

  it('refuses what a server must close on: an unmasked client frame, RSV bits, fragmented or long control frames, stray continuations, interleaved messages, unknown opcodes', () => {
    expect(refused(server(), encodeFrame(Opcode.binary, Buffer.from('a')))).toBe(CloseCode.protocolError);
    const rsv = client(Opcode.binary, 'a');
    rsv[0]! |= 0x40;
    expect(refused(server(), rsv)).toBe(CloseCode.protocolError);
    expect(refused(server(), client(Opcode.ping, 'a', false))).toBe(CloseCode.protocolError);
    expect(refused(server(), client(Opcode.ping, Buffer.alloc(126)))).toBe(CloseCode.protocolError);
    expect(refused(server(), client(Opcode.continuation, 'a'))).toBe(CloseCode.protocolError);
    expect(refused(server(), Buffer.concat([client(Opcode.binary, 'a', false), client(Opcode.binary, 'b')]))).toBe(CloseCode.protocolError);
    expect(refused(server(), client(0x3, 'a'))).toBe(CloseCode.protocolError);
    // The client side reads unmasked frames.
    expect(new WsDecoder({ requireMask: false, maxMessage: 10 }).push(encodeFrame(Opcode.binary, Buffer.from('ok')))).toEqual([{ type: 'message', binary: true, data: Buffer.from('ok') }]);
  });

  it('refuses a message larger than the limit with 1009, from its header alone (a frame or the fragments together)', () => {
    const small = () => new WsDecoder({ requireMask: true, maxMessage: 100 });
    expect(refused(small(), client(Opcode.binary, Buffer.alloc(101)).subarray(0, 8))).toBe(CloseCode.tooBig);
    const huge = Buffer.from('82ff7fffffffffffffff', 'hex'); // a 2^63-1 length: never awaited
    expect(refused(small(), huge)).toBe(CloseCode.tooBig);
    expect(refused(small(), Buffer.concat([client(Opcode.binary, Buffer.alloc(60), false), client(Opcode.continuation, Buffer.alloc(60))]))).toBe(CloseCode.tooBig);
    expect(refused(small(), Buffer.from('82ff8000000000000000', 'hex'))).toBe(CloseCode.protocolError);
  });
});

describe('remote command channels', () => {
  it('negotiates v5 before v4, whatever the client\'s order of offer among unsupported ones', () => {
    expect(negotiateProtocol('v5.channel.k8s.io')).toBe(PROTOCOL_V5);
    expect(negotiateProtocol('channel.k8s.io, v4.channel.k8s.io')).toBe(PROTOCOL_V4);
    expect(negotiateProtocol(['v5.channel.k8s.io', 'v4.channel.k8s.io'])).toBe(PROTOCOL_V5);
    expect(negotiateProtocol('base64.channel.k8s.io')).toBeUndefined();
    expect(negotiateProtocol(undefined)).toBeUndefined();
  });

  it('prefixes the channel byte; v5\'s [255, n] closes channel n, under v4 255 is a channel like any', () => {
    expect(encodeChannel(Channel.stdout, 'hi')).toEqual(Buffer.from([1, 0x68, 0x69]));
    expect(encodeChannel(Channel.stdout)).toEqual(Buffer.from([1]));
    expect(decodeChannel(Buffer.from([0, 0x61, 0x0a]), PROTOCOL_V5)).toEqual({ channel: 0, data: Buffer.from('a\n') });
    expect(decodeChannel(Buffer.from([255, 0]), PROTOCOL_V5)).toEqual({ closed: Channel.stdin });
    expect(decodeChannel(Buffer.from([255, 0]), PROTOCOL_V4)).toEqual({ channel: 255, data: Buffer.from([0]) });
    expect(decodeChannel(Buffer.alloc(0), PROTOCOL_V5)).toBeUndefined();
    expect(() => decodeChannel(Buffer.from([255]), PROTOCOL_V5)).toThrow('without the channel');
  });

  it('reads kubectl\'s query: repeated command, booleans; refuses no command and no stream', () => {
    const q = new URLSearchParams('command=sh&command=-c&command=echo+a+b&container=whoami&stdin=true&stdout=true&stderr=true&tty=false');
    expect(parseExecOptions(q)).toEqual({ command: ['sh', '-c', 'echo a b'], container: 'whoami', stdin: true, stdout: true, stderr: true, tty: false });
    const code = (f: () => unknown) => { try { f(); return 'ok'; } catch (e) { return `${(e as HttpError).code} ${(e as HttpError).message}`; } };
    expect(code(() => parseExecOptions(new URLSearchParams('stdout=1')))).toBe('400 PodExecOptions is invalid: command: Required value');
    expect(code(() => parseExecOptions(new URLSearchParams('command=ls')))).toBe('400 you must specify at least 1 of stdin, stdout, stderr');
  });

  it('the container: the only one by default, a named one must exist, a pod with a node, not completed, its container running', () => {
    const pod = (f: (p: Record<string, any>) => void = () => undefined): Obj => { // eslint-disable-line @typescript-eslint/no-explicit-any
      const p = { metadata: { name: 'p' }, spec: { nodeName: 'n1', containers: [{ name: 'c1' }] }, status: { phase: 'Running' } };
      f(p);
      return p as unknown as Obj;
    };
    const msg = (f: () => unknown) => { try { return f(); } catch (e) { return `${(e as HttpError).code}: ${(e as HttpError).message}`; } };
    expect(execContainer(pod(), undefined)).toBe('c1');
    expect(execContainer(pod((p) => p.spec.containers.push({ name: 'c2' })), 'c2')).toBe('c2');
    expect(msg(() => execContainer(pod((p) => p.spec.containers.push({ name: 'c2' })), undefined))).toBe('400: a container name must be specified for pod p, choose one of: [c1 c2]');
    expect(msg(() => execContainer(pod(), 'nope'))).toBe('400: container nope is not valid for pod p');
    expect(msg(() => execContainer(pod((p) => delete p.spec.nodeName), undefined))).toBe('400: pod p does not have a host assigned');
    expect(msg(() => execContainer(pod((p) => { p.status.phase = 'Succeeded'; }), undefined))).toBe('400: cannot exec into a container in a completed pod; current phase is Succeeded');
    expect(msg(() => execContainer(pod((p) => { p.status.containerStatuses = [{ name: 'c1', state: { waiting: { reason: 'CrashLoopBackOff' } } }]; }), undefined)))
      .toBe('400: container c1 in pod p is not running (waiting: CrashLoopBackOff)');
    expect(execContainer(pod((p) => { p.status.containerStatuses = [{ name: 'c1', state: { running: { startedAt: 'now' } } }]; }), undefined)).toBe('c1');
  });

  it('ends with the kubelet\'s Status: Success, or NonZeroExitCode with the code as its ExitCode cause (128 + signal when killed)', () => {
    expect(exitStatus(0)).toEqual({ metadata: {}, status: 'Success' });
    expect(exitStatus(3)).toEqual({ metadata: {}, status: 'Failure', message: 'command terminated with non-zero exit code: exit status 3', reason: 'NonZeroExitCode',
      details: { causes: [{ reason: 'ExitCode', message: '3' }] } });
    expect(exitCodeOf(7, undefined)).toBe(7);
    expect(exitCodeOf(null, 9)).toBe(137);
  });
});
