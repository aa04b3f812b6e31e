// `ipvs-operator run --source files:examples/lab --dry-run` on the host: this machine's kernel has
// no IPVS, which is exactly where a person previews a plan. The real CLI process runs; the test
// reads its stdout (the plan) and waits for its "synced" log line before stopping it.
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../support/net.js';

const root = fileURLToPath(new URL('../../../..', import.meta.url));
const CLI = fileURLToPath(new URL('../../../src/cli/main.js', import.meta.url));

function dryRun(args: string[]): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [CLI, 'run', ...args, '--dry-run', '--log-format', 'json'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let stopping = false;
    const kill = setTimeout(() => p.kill('SIGKILL'), 60_000);
    p.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    p.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      // One SIGTERM: the operator handles the first; a second one would end it by default.
      if (!stopping && /"message":"synced"/.test(stderr)) {
        stopping = true;
        p.kill('SIGTERM');
      }
    });
    p.on('exit', (code) => { clearTimeout(kill); resolve({ stdout, stderr, code }); });
  });
}

describe('run --dry-run on a machine without IPVS', () => {
  it('prints the whole first plan of examples/lab (IPVS ops, VIPs, iptables/ipset payloads) and writes nothing', async () => {
    const hasIpvs = existsSync('/proc/net/ip_vs');
    const { stdout, stderr, code } = await dryRun(['--source', 'files:examples/lab', '--node-name', 'lab-node', '--metrics-addr', `127.0.0.1:${await freePort()}`]);
    expect(stderr).toMatch(/"message":"synced"/);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    if (!hasIpvs) expect(lines[0]).toBe('# dry run: this kernel has no IPVS; planning against an empty IPVS table');
    // Each Service of examples/lab: its virtual server with the scheduler its annotation names,
    // each endpoint, and its VIP; then the iptables path's payloads.
    for (const [vip, sched] of [['10.200.1.10', 'rr'], ['10.200.1.11', 'lc'], ['10.200.1.12', 'sed']] as const) {
      const yaml = readFileSync(`${root}/examples/lab/webpod-${sched}.yaml`, 'utf8');
      expect(yaml).toContain(`clusterIP: ${vip}`);
      expect(lines).toContain(`add-service TCP ${vip}:80 ${sched}`);
      for (const ep of ['10.10.1.11', '10.10.1.12', '10.10.1.13']) expect(lines).toContain(`add-dest TCP ${vip}:80 -> ${ep}:80 w=1 masq`);
      expect(lines).toContain(`add-vip ipvs-op0 ${vip}`);
    }
    // IPVS ops come first, then VIPs, then the iptables path (sets before the rules naming them).
    const firstVip = lines.findIndex((l) => l.startsWith('add-vip '));
    const lastDest = lines.length - 1 - [...lines].reverse().findIndex((l) => l.startsWith('add-dest '));
    expect(lastDest).toBeLessThan(firstVip);
    const ipset = lines.indexOf('ipset restore -exist <<EOF');
    const v4 = lines.findIndex((l) => /^iptables(-nft|-legacy)?-restore --noflush/.test(l));
    expect(ipset).toBeGreaterThan(firstVip);
    // The plan is printed by formatSyncPlan (the form test/unit/plan/sync-plan.test.ts checks): its
    // iptables line closes it, before the payloads themselves.
    const planEnd = lines.findIndex((l) => /^sync-iptables \d+ set entries$/.test(l));
    expect(planEnd).toBeGreaterThan(firstVip);
    expect(planEnd).toBeLessThan(ipset);
    expect(v4).toBeGreaterThan(ipset);
    // The sets as a difference against the host's (none here, or none of ours): created and filled directly.
    expect(lines.slice(ipset)).toContain('add IPVSOP-CLUSTER-IP 10.200.1.10,tcp:80');
    expect(lines.slice(v4)).toContain('COMMIT');
    // Nothing was made on the host: no VIP link.
    expect(existsSync('/sys/class/net/ipvs-op0')).toBe(false);
  }, 90_000);
});
