// `ipvs-operator status`: the kernel table with counters, each virtual server followed by the
// Service the running operator says it serves; foreign ones marked, and a note when no operator
// answered. Addresses: see test/support/fixtures.ts.
import { describe, expect, it } from '@jest/globals';
import { renderStatus } from '../../../src/cli/status.js';
import { makeRealServer, makeVirtualServer } from '../../../src/model/ipvs.js';

const stats = (conns: bigint) => ({ conns, inPkts: 7n, outPkts: 5n, inBytes: 700n, outBytes: 900n, cps: 0n, inPps: 0n, outPps: 0n, inBps: 0n, outBps: 0n });
const ours = makeVirtualServer({ family: 'IPv4', address: '10.200.1.10', port: 80, scheduler: 'sed', stats: stats(3n) });
const foreign = makeVirtualServer({ family: 'IPv4', address: '10.99.0.1', port: 443, scheduler: 'wlc', stats: stats(0n) });
const table = [
  { vs: ours, dests: [makeRealServer({ address: '10.10.1.3', port: 8080, activeConns: 1, inactiveConns: 2 })] },
  { vs: foreign, dests: [] },
];

describe('renderStatus', () => {
  it('annotates our virtual servers with their Service and plugin, and marks the others', () => {
    const text = renderStatus(table, { 'TCP 10.200.1.10:80': { namespace: 'default', name: 'web', portName: 'http', plugin: 'sed' } });
    const lines = text.split('\n');
    expect(lines[2]).toMatch(/^TCP {2}10\.200\.1\.10:80\s+sed\s+3\s+7\s+5\s+700\s+900 {2}default\/web:http \(sed\)$/);
    expect(lines[3]).toMatch(/^ {2}-> 10\.10\.1\.3:8080\s+1\s+1\s+2$/);
    expect(lines[1 + 3]).toMatch(/^TCP {2}10\.99\.0\.1:443\s+wlc .* \(not ours\)$/);
    expect(text).not.toContain('no running operator');
  });

  it('says so when no operator answered', () => {
    expect(renderStatus(table, undefined)).toContain('(no running operator answered at /origins: Services not shown)');
  });
});
