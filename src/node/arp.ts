// strictARP (kube-proxy's ipvs.strictARP, needed by MetalLB-style L2 announcers): while it is on,
// net.ipv4.conf.all.arp_ignore=1 and arp_announce=2, so the node never answers ARP for the VIPs
// on the operator's dummy interface from its other interfaces. Unlike kube-proxy, turning it off
// puts back what the node had: the values found when it was turned on are kept in the state
// directory (beside the ownership record, on the host's /run) and restored when the config turns
// it off, when the operator starts with it off and finds them, and by `cleanup`. A value someone
// changed after the operator set it is left alone (and the saved one dropped, with a warning).
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** The two sysctls, as strings the way /proc/sys shows them. */
export interface ArpSettings { arpIgnore: string; arpAnnounce: string }

/** What strictARP sets. */
export const STRICT: Readonly<ArpSettings> = Object.freeze({ arpIgnore: '1', arpAnnounce: '2' });

/** What to do: values to write, whether to save the current ones first, whether to drop the saved ones. */
export interface ArpPlan {
  write?: ArpSettings;
  save?: ArpSettings;
  dropSaved: boolean;
  /** A line for the log, when something is done or refused. */
  note?: string;
}

const same = (a: ArpSettings, b: ArpSettings) => a.arpIgnore === b.arpIgnore && a.arpAnnounce === b.arpAnnounce;
const show = (s: ArpSettings) => `arp_ignore=${s.arpIgnore} arp_announce=${s.arpAnnounce}`;

/** The plan for `strict` given the node's current values and the saved ones. pure. */
export function planStrictArp(strict: boolean, current: ArpSettings, saved: ArpSettings | undefined): ArpPlan {
  if (strict) {
    if (same(current, STRICT)) return { dropSaved: false };
    return { save: saved ?? current, write: { ...STRICT }, dropSaved: false,
      note: `strictARP on: ${show(STRICT)} (was ${show(current)})` };
  }
  if (!saved) return { dropSaved: false };
  if (!same(current, STRICT)) {
    return { dropSaved: true,
      note: `strictARP off: ${show(current)} was changed by someone else since it was set; left as it is` };
  }
  return { write: saved, dropSaved: true, note: `strictARP off: ${show(saved)} restored` };
}

const SYSCTL_DIR = '/proc/sys/net/ipv4/conf/all';

/** The state file that holds the values found before strictARP was turned on. */
export function savedArpPath(stateDir: string): string {
  return join(stateDir, 'arp-before-strict-arp');
}

function readCurrent(sysctlDir: string): ArpSettings {
  return {
    arpIgnore: readFileSync(join(sysctlDir, 'arp_ignore'), 'utf8').trim(),
    arpAnnounce: readFileSync(join(sysctlDir, 'arp_announce'), 'utf8').trim(),
  };
}

async function readSaved(path: string): Promise<ArpSettings | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
  const m = /^arp_ignore=(\d+) arp_announce=(\d+)\s*$/.exec(text);
  return m ? { arpIgnore: m[1]!, arpAnnounce: m[2]! } : undefined;
}

/**
 * Applies strictARP on or off (see the file comment); resolves with the log line of what was
 * done, if anything. Throws when the sysctls cannot be read or written (the caller logs it).
 */
export async function applyStrictArp(strict: boolean, stateDir: string,
  sysctlDir = SYSCTL_DIR): Promise<string | undefined> {
  const path = savedArpPath(stateDir);
  const plan = planStrictArp(strict, readCurrent(sysctlDir), await readSaved(path));
  if (plan.save) {
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.tmp-${process.pid}`;
    await writeFile(tmp, `${show(plan.save)}\n`);
    await rename(tmp, path);
  }
  if (plan.write) {
    writeFileSync(join(sysctlDir, 'arp_ignore'), plan.write.arpIgnore);
    writeFileSync(join(sysctlDir, 'arp_announce'), plan.write.arpAnnounce);
  }
  if (plan.dropSaved) await rm(path, { force: true });
  return plan.note;
}
