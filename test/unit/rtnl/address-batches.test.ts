// The address batches (src/rtnl/address-batches.ts; their job on the helper thread,
// address-thread.ts): the packing and numbering of a batch, the real job against the host kernel on
// a link index that does not exist (every request is refused, nothing changes on the host), and,
// with a stand-in job, what a failed socket, a thread that dies and the bench's recorder get. The
// real link: test/kernel/rtnl.test.ts.
import { afterEach, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Errno } from '../../../src/netlink/errors.js';
import { type NlMessage, decodeMessages } from '../../../src/netlink/framing.js';
import { NetlinkSocket } from '../../../src/netlink/socket.js';
import { numberMessages, packMessages, unpackMessages } from '../../../src/rtnl/address-batch.js';
import { AddressBatches } from '../../../src/rtnl/address-batches.js';
import { RtnlError } from '../../../src/rtnl/errors.js';
import { encodeAddrRequest, parseHostAddress } from '../../../src/rtnl/messages.js';
import { CHUNK } from '../../../src/rtnl/socket.js';
import { HelperThread, IDLE_MS } from '../../../src/util/helper-thread.js';

const STANDIN = new URL('../../support/address-thread-standin.js', import.meta.url);
const NO_LINK = 0x7ffffff0;

/** A 16-byte netlink header of `type` and `flags`, then `extra` bytes. */
const message = (type: number, flags = 0, extra = 4) => {
  const b = Buffer.alloc(16 + extra);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(type, 4);
  b.writeUInt16LE(flags, 6);
  return b;
};

let open: AddressBatches[] = [];
const start = (script?: URL) => {
  const b = new AddressBatches(script);
  open.push(b);
  return b;
};
afterEach(() => {
  for (const b of open) b.close();
  open = [];
  NetlinkSocket.recorder = undefined;
});

describe('a batch, packed and numbered', () => {
  it('unpacks what was packed, and numbers each message in place (seq, port), keeping its bytes', () => {
    const ms = [message(20, 5, 8), message(21, 5, 12), message(20, 5, 0)];
    const { bytes, lengths } = packMessages(ms);
    expect([...lengths]).toEqual([24, 28, 16]);
    const all = Buffer.from(bytes);
    const unpacked = unpackMessages(all, lengths);
    expect(unpacked).toEqual(ms);
    let seq = 100;
    const out = numberMessages(unpacked, () => ++seq, 4242);
    expect(out.map((o) => o.bytes.buffer)).toEqual([all.buffer, all.buffer, all.buffer]); // views, no copies
    expect(out.map((o) => o.seq)).toEqual([101, 102, 103]);
    out.forEach((o, i) => {
      expect(o.bytes.readUInt32LE(8)).toBe(o.seq);
      expect(o.bytes.readUInt32LE(12)).toBe(4242);
      expect(o.bytes.subarray(0, 8)).toEqual(ms[i]!.subarray(0, 8));
    });
  });

  it('refuses lengths that do not match the buffer, and a message shorter than its header', () => {
    const { bytes } = packMessages([message(20), message(20)]);
    const all = Buffer.from(bytes);
    expect(() => unpackMessages(all, Int32Array.of(20))).toThrow('20 bytes left over');
    expect(() => unpackMessages(all, Int32Array.of(20, 20, 20))).toThrow(RangeError);
    expect(() => unpackMessages(all, Int32Array.of(8, 32))).toThrow('a message of 8 bytes');
  });
});

describe('AddressBatches, the real thread on the host kernel', () => {
  it('sends more than a chunk and answers each request, in order', async () => {
    // ifindex 0x7ffffff0 does not exist: the kernel refuses each add/delete (ENODEV as root, EPERM
    // otherwise) and nothing on the host changes.
    const b = start();
    const n = CHUNK * 2 + 5;
    const ms = Array.from({ length: n }, (_, i) =>
      encodeAddrRequest(i % 2 ? 'add' : 'del', NO_LINK, parseHostAddress('t', `192.0.2.${i % 250}`), 0, 0));
    const errnos = await b.exchange(ms);
    expect(errnos).toHaveLength(n);
    expect(new Set(errnos).size).toBe(1);
    expect([Errno.ENODEV, Errno.EPERM]).toContain(errnos[0]);
    expect(b.failed).toBeUndefined();
  });

  it('rejects the batch being sent when closed; the thread closes its socket and serves the next', async () => {
    const b = start();
    const ms = Array.from({ length: CHUNK * 20 }, (_, i) =>
      encodeAddrRequest('add', NO_LINK, parseHostAddress('t', `192.0.2.${i % 250}`), 0, 0));
    const sent = b.exchange(ms);
    b.close();
    await expect(sent).rejects.toThrow('socket closed');
    await expect(b.exchange(ms)).rejects.toThrow('socket closed');
    // The same thread answers the next batches, whole: the cancelled one let its socket go.
    const again = await start().exchange(ms);
    expect(again).toHaveLength(ms.length);
    expect([Errno.ENODEV, Errno.EPERM]).toContain(again[0]);
    expect(HelperThread.shared().failed).toBeUndefined();
    // Closed with its socket open, the thread would have taken this process down (address-thread.ts).
    const thread = HelperThread.shared();
    const last = start().exchange(ms);
    thread.close();
    await expect(last).rejects.toThrow('closed');
    expect(HelperThread.shared()).not.toBe(thread);
  });

  it('follows the shared thread: after it ended with no job, the next batch goes to a new one, whole', async () => {
    HelperThread.idleMs = 100;
    HelperThread.shared().close(); // the next shared thread is started with that idle time
    try {
      const b = start(STANDIN);
      const thread = HelperThread.shared();
      expect(await b.exchange([message(20)])).toEqual([0]);
      while (!thread.retired) await new Promise((r) => setTimeout(r, 10));
      expect(await b.exchange([message(20), message(20)])).toEqual([0, 0]);
      expect(b.failed).toBeUndefined();
      expect(HelperThread.shared()).not.toBe(thread);
    } finally {
      HelperThread.idleMs = IDLE_MS;
    }
  });

  it("hands the bench's recorder the messages as the thread numbered and sent them", async () => {
    const seen: NlMessage[] = [];
    NetlinkSocket.recorder = (protocol, datagram) => { if (protocol === 0) seen.push(...decodeMessages(datagram)); };
    const b = start();
    const ms = [1, 2, 3].map((i) => encodeAddrRequest('add', NO_LINK, parseHostAddress('t', `192.0.2.${i}`), 0, 0));
    await b.exchange(ms);
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((m) => m.seq)).size).toBe(3);
    seen.forEach((m, i) => {
      expect(m.seq).not.toBe(0); // numbered by the thread's socket
      expect(m.payload).toEqual(ms[i]!.subarray(16)); // the request itself, as encoded
    });
  });
});

describe('AddressBatches, with a stand-in thread', () => {
  it('answers each message of concurrent batches with its own errno', async () => {
    const b = start(STANDIN);
    const [one, two] = await Promise.all([
      b.exchange([message(20), message(20, 0x400), message(20)]),
      b.exchange([message(20, 0x400)]),
    ]);
    expect(one).toEqual([0, 17, 0]);
    expect(two).toEqual([17]);
  });

  it("rejects a batch whose socket failed with the thread's error, as an RtnlError; the thread goes on", async () => {
    const b = start(STANDIN);
    const err = await b.exchange([message(0xbad)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RtnlError);
    expect(err).toMatchObject({ op: 'send', errno: 105, code: 'ENOBUFS', message: 'send: no buffer space' });
    await expect(b.exchange([message(20)])).resolves.toEqual([0]);
  });

  it('fails the batch waiting and every later one when the thread dies', async () => {
    const b = start(STANDIN);
    const err = await b.exchange([message(0xdead)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RtnlError);
    expect((err as RtnlError).message).toContain('thread ended (exit code 3)');
    expect(b.failed).toBe(err);
    await expect(b.exchange([message(20)])).rejects.toBe(err);
  });

  it('rejects what waits once closed', async () => {
    const b = start(STANDIN);
    b.close();
    await expect(b.exchange([message(20)])).rejects.toThrow('socket closed');
  });
});

describe('an exit on an error nothing caught, while the thread sends a batch', () => {
  it('ends the thread first and exits 1, not an abort in the netlink package', async () => {
    // Left to Node, this process aborted (exit 134, "FATAL ERROR: Error::Error
    // napi_define_properties" from the package's poll handler) in every try on the host.
    const script = fileURLToPath(new URL('../../support/exit-mid-batch.js', import.meta.url));
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
    const [code, signal] = await new Promise<[number | null, string | null]>((r) => child.once('exit', (c, s) => r([c, s])));
    expect({ code, signal, fatal: /FATAL ERROR/.test(out), thrown: out.includes('Error: boom mid-batch'),
      answeredFirst: out.includes('answered before the throw') })
      .toEqual({ code: 1, signal: null, fatal: false, thrown: true, answeredFirst: false });
  });
});

