// The conntrack contract (test/support/conntrack-contract.ts) against NetlinkConntrack on the real
// kernel; the same table runs against FakeConntrack in test/unit/conntrack/conntrack-contract.test.ts. The
// set-up's entries are made with ctnetlink's create (one datagram per case, not a conntrack(8)
// process per entry). The guest's root netns: every case starts without the contract's entries
// (198.18.0.0/15, 2001:2::/48), and none are left behind.
import { afterAll, beforeEach, describe, expect, it } from '@jest/globals';
import { NetlinkConntrack } from '../../src/conntrack/client.js';
import { type Flow, encodeCreate } from '../../src/conntrack/codec.js';
import { NETLINK_NETFILTER } from '../../src/conntrack/constants.js';
import { ConntrackError } from '../../src/conntrack/errors.js';
import { NetlinkSocket } from '../../src/netlink/socket.js';
import { expectCase } from '../support/contract.js';
import { CONTRACT, entriesOf, predicateMismatches, runCase } from '../support/conntrack-contract.js';

if (process.env.IPVS_LAB !== '1') throw new Error('kernel tests run in the lab VM: npm run test:kernel');

const client = new NetlinkConntrack();
const sock = new NetlinkSocket(NETLINK_NETFILTER, ConntrackError);

/** Creates the entries (600 s to live); '-' or the errno's name per entry. */
async function insert(flows: readonly Flow[]): Promise<string[]> {
  const replies = await sock.exchange(flows.map((f) => {
    const seq = sock.nextSeq();
    return { seq, bytes: encodeCreate(f, 600, seq, sock.port), dump: false };
  }));
  return replies.map((r) => (r.errno ? ConntrackError.fromErrno('create', r.errno).code : '-'));
}

async function clear(): Promise<void> {
  const left = await entriesOf(client);
  const rs = await client.delete(left.map((f) => ({ ...f, id: 0 })));
  expect(rs.filter((e) => e)).toEqual([]);
}

beforeEach(clear);
afterAll(async () => {
  await clear();
  client.close();
  sock.close();
});

describe('conntrack contract: NetlinkConntrack on the kernel', () => {
  it.each(CONTRACT.map((c) => [`${c.call.kind}: ${c.name}`, c] as const))('%s', async (_name, c) => {
    expectCase(await runCase({ client, insert }, c), c, predicateMismatches);
  });
});
