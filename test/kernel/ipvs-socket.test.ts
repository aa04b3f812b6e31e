// The IPVS socket heals (issue 12): a socket whose descriptor is closed under the client fails the
// request in flight with a typed error, the client reports itself unhealthy, and the next request
// opens a new socket, resolves the family again and succeeds — no restart. ipvsadm is the oracle.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { NetlinkIpvs } from '../../src/ipvs/client.js';
import { IpvsError } from '../../src/ipvs/errors.js';
import { GenlSocket } from '../../src/ipvs/socket.js';
import { makeRealServer, makeVirtualServer } from '../../src/model/ipvs.js';
import { ipvsadmLines } from '../support/ipvsadm.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const vs = makeVirtualServer({ family: 'IPv4', address: '10.200.3.1', port: 80, scheduler: 'rr' });
const sockets: GenlSocket[] = [];
let ipvs: NetlinkIpvs;

beforeAll(async () => {
  execFileSync('modprobe', ['ip_vs']);
  execFileSync('ipvsadm', ['-C']);
  ipvs = await NetlinkIpvs.open({ openSocket: () => { const s = new GenlSocket(); sockets.push(s); return s; } });
});
afterAll(() => {
  ipvs.close();
  execFileSync('ipvsadm', ['-C']);
});

describe('a socket closed under the client', () => {
  it('fails the request in flight, then the client reopens and carries on', async () => {
    await ipvs.addVirtualServer(vs);
    expect(ipvs.health().ok).toBe(true);
    // Close the descriptor behind GenlSocket's back, as a crashed fd or a dead socket would be.
    (sockets[0] as unknown as { raw: { close(): void } }).raw.close();
    const failed = await ipvs.addRealServer(vs, makeRealServer({ address: '10.10.3.1', port: 80 })).then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(IpvsError);
    expect(ipvs.health()).toMatchObject({ ok: false });
    // The next call opens a new socket (and resolves the family on it): it works, and so do later ones.
    await ipvs.addRealServer(vs, makeRealServer({ address: '10.10.3.1', port: 80 }));
    await ipvs.addRealServer(vs, makeRealServer({ address: '10.10.3.2', port: 80 }));
    expect(sockets).toHaveLength(2);
    expect(ipvs.health()).toMatchObject({ ok: true });
    expect(ipvsadmLines()).toEqual(['TCP 10.200.3.1:80 rr -> 10.10.3.1:80 w=1, 10.10.3.2:80 w=1']);
    expect((await ipvs.listVirtualServers()).map((v) => v.address)).toEqual(['10.200.3.1']);
  });
});
