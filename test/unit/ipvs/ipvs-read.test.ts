// The batched read of real servers: FakeIpvs answers the shared contract (test/support/
// ipvs-read-contract.ts; the kernel run is test/kernel/ipvs-read.test.ts), and the dump pool
// behind NetlinkIpvs keeps one dump per socket, answers in order, retries interrupted dumps and
// drops its sockets when one fails. Addresses: VIPs 10.200.5.0/24, pods 10.10.5.0/24.
import { describe, expect, it } from '@jest/globals';
import { FakeIpvs } from '../../../src/ipvs/fake.js';
import { DUMP_RETRIES, DumpPool } from '../../../src/ipvs/dump-pool.js';
import { IpvsError } from '../../../src/ipvs/errors.js';
import { listDestsRequest } from '../../../src/ipvs/requests.js';
import type { GenlSocket, Outgoing, Reply } from '../../../src/ipvs/socket.js';
import { makeVirtualServer } from '../../../src/model/ipvs.js';
import { GET_EXPECTED, READ_EXPECTED, readCase } from '../../support/ipvs-read-contract.js';

describe('listRealServersMany on FakeIpvs', () => {
  it('answers each virtual server as listRealServers does', async () => {
    const { seedErrors, many, single, gets, getsAsDumped } = await readCase(new FakeIpvs());
    expect(seedErrors).toEqual([]);
    expect(many).toEqual(READ_EXPECTED);
    expect(single).toEqual(READ_EXPECTED);
    expect(gets).toEqual(GET_EXPECTED);
    expect(getsAsDumped).toEqual([true, true, true, true, true]);
  });

  it('rejects once closed, as every call does', async () => {
    const fake = new FakeIpvs();
    fake.close();
    await expect(fake.listRealServersMany([])).rejects.toBeInstanceOf(IpvsError);
  });
});

/** A socket that answers each dump with the request's own bytes' length, after a turn of the event loop. */
class ScriptedSocket {
  static opened: ScriptedSocket[] = [];
  inFlight = 0;
  maxInFlight = 0;
  sent = 0;
  failed: IpvsError | undefined;
  closed = false;
  readonly port = 1;
  private seq = 0;
  constructor(private readonly answer: (sock: ScriptedSocket, o: Outgoing) => Reply | Error) {
    ScriptedSocket.opened.push(this);
  }
  nextSeq(): number {
    return ++this.seq;
  }
  async exchange(out: readonly Outgoing[]): Promise<Reply[]> {
    expect(out).toHaveLength(1);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    this.sent++;
    await new Promise((r) => setImmediate(r));
    this.inFlight--;
    const a = this.answer(this, out[0]!);
    if (a instanceof Error) throw (this.failed = IpvsError.malformed('receive', a.message));
    return [a];
  }
  close(): void {
    this.closed = true;
    this.failed ??= IpvsError.malformed('close', 'socket closed');
  }
}

const vss = Array.from({ length: 40 }, (_, i) => makeVirtualServer({ family: 'IPv4', address: `10.200.5.${i + 1}`, port: 80 }));
const reqs = vss.map(listDestsRequest);
const ok = (errno = 0, interrupted = false): Reply => ({ errno, messages: [], interrupted });
const open = (answer: ConstructorParameters<typeof ScriptedSocket>[0]) => () => new ScriptedSocket(answer) as unknown as GenlSocket;

describe('DumpPool', () => {
  it('keeps one dump per socket, `size` at once, and answers in order', async () => {
    ScriptedSocket.opened = [];
    // The errno tells which request a reply answers: the position of its bytes among the requests'.
    const byBytes = new Map(reqs.map((r, i) => [r.attrs.map((a) => a.toString('hex')).join(''), i + 1]));
    const pool = new DumpPool(open((_s, o) => ok(byBytes.get(('bytes' in o ? o.bytes : Buffer.alloc(0)).subarray(20).toString('hex')) ?? -1)), 4);
    const replies = await pool.dumps(7, reqs);
    expect(replies.map((r) => r.errno)).toEqual(vss.map((_, i) => i + 1));
    expect(ScriptedSocket.opened).toHaveLength(4);
    expect(ScriptedSocket.opened.map((s) => s.maxInFlight)).toEqual([1, 1, 1, 1]);
    expect(ScriptedSocket.opened.reduce((n, s) => n + s.sent, 0)).toBe(40);
    // The next batch reuses the sockets.
    await pool.dumps(7, reqs.slice(0, 2));
    expect(ScriptedSocket.opened).toHaveLength(4);
    pool.close();
    expect(ScriptedSocket.opened.every((s) => s.closed)).toBe(true);
  });

  it('retries an interrupted dump up to DUMP_RETRIES times, then hands it over', async () => {
    ScriptedSocket.opened = [];
    let n = 0;
    const pool = new DumpPool(open(() => ok(0, ++n <= 2)), 1);
    const [twice] = await pool.dumps(7, reqs.slice(0, 1));
    expect(twice).toEqual(ok());
    expect(n).toBe(3);
    n = -100;
    const [always] = await pool.dumps(7, reqs.slice(0, 1));
    expect(always!.interrupted).toBe(true);
    expect(n).toBe(-100 + DUMP_RETRIES + 1);
  });

  it('rejects with a failing socket\'s error, closes every socket, and opens new ones next time', async () => {
    ScriptedSocket.opened = [];
    let calls = 0;
    const pool = new DumpPool(open(() => (++calls === 10 ? new Error('ENOBUFS') : ok())), 4);
    const e = await pool.dumps(7, reqs).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(IpvsError);
    expect((e as IpvsError).message).toMatch(/ENOBUFS/);
    expect(ScriptedSocket.opened.every((s) => s.closed)).toBe(true);
    expect(calls).toBeLessThan(40);
    const replies = await pool.dumps(7, reqs.slice(0, 3));
    expect(replies).toHaveLength(3);
    expect(ScriptedSocket.opened).toHaveLength(7);
  });

  it('turns a socket that cannot be opened into an IpvsError', async () => {
    const pool = new DumpPool(() => { throw Object.assign(new Error('socket: Too many open files'), { errno: -24 }); });
    const e = await pool.dumps(7, reqs).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(IpvsError);
    expect((e as IpvsError).errno).toBe(24);
  });
});
