// Which iptables backend the host uses, decided like kube-proxy's images do
// (kubernetes-sigs/iptables-wrappers): rules must go where the rest of the node's rules are, or
// two rulesets (nft and legacy) apply one after the other and confuse everyone.
//   1. kubelet's hint chains (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY in mangle) name the backend;
//   2. otherwise the backend holding more rules wins (legacy at 10 or more rules, as the wrapper);
//   3. without the -nft/-legacy binaries, plain `iptables` and its `-V` marker.
// Execs only the *-save binaries and `-V`.
import { type Runner, runChecked } from './exec.js';

export type BackendMode = 'nft' | 'legacy';

/** The binaries to use and what they support. */
export interface Backend {
  mode: BackendMode;
  save: string;
  restore: string;
  save6: string;
  restore6: string;
  /** `iptables -V`'s version, e.g. 1.8.9. */
  version: string;
  /** MASQUERADE --random-fully (iptables >= 1.6.2). */
  randomFully: boolean;
}

/** What detection observed; chooseMode decides from it alone. */
export interface BackendEvidence {
  hintNft: boolean;
  hintLegacy: boolean;
  /** Rule lines (`-A ...`) in iptables-legacy-save + ip6tables-legacy-save. */
  legacyRules: number;
  nftRules: number;
}

/** The wrapper's decision (see the file comment). */
export function chooseMode(e: BackendEvidence): BackendMode {
  if (e.hintNft) return 'nft';
  if (e.hintLegacy) return 'legacy';
  if (e.legacyRules >= 10) return 'legacy';
  return e.legacyRules > e.nftRules ? 'legacy' : 'nft';
}

/** `iptables v1.8.9 (nf_tables)` -> version and mode marker. */
export function parseVersion(text: string): { version: string; mode?: BackendMode } {
  const version = /v(\d+\.\d+(?:\.\d+)?)/.exec(text)?.[1] ?? '0';
  const mode = text.includes('(nf_tables)') ? 'nft' : text.includes('(legacy)') ? 'legacy' : undefined;
  return mode ? { version, mode } : { version };
}

/** a >= b for dotted versions. */
export function versionAtLeast(a: string, b: string): boolean {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i] ?? 0;
    const y = pb[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}

const HINT = /^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY) /m;
const countRules = (text: string) => text.split('\n').filter((l) => l.startsWith('-')).length;

/** Probes the host; `force` skips the decision. Rejects when no iptables binary runs at all. */
export async function detectBackend(run: Runner, force?: BackendMode): Promise<Backend> {
  const tryOut = async (cmd: string, args: string[]): Promise<string | undefined> => {
    try {
      const r = await run(cmd, args);
      return r.code === 0 ? r.stdout : undefined;
    } catch {
      return undefined; // not installed
    }
  };
  const variant = async (mode: BackendMode) => tryOut(`iptables-${mode}`, ['-V']);
  const nftV = await variant('nft');
  const legacyV = await variant('legacy');
  if (nftV === undefined && legacyV === undefined) {
    // No alternatives: whatever `iptables` is.
    const v = parseVersion(await runChecked(run, 'iptables', ['-V']));
    return make(v.mode ?? 'legacy', v.version, '');
  }
  let mode: BackendMode;
  if (force) mode = force;
  else if (nftV === undefined) mode = 'legacy';
  else if (legacyV === undefined) mode = 'nft';
  else {
    const mangle = async (m: BackendMode) => (await tryOut(`iptables-${m}-save`, ['-t', 'mangle'])) ?? '';
    const all = async (m: BackendMode) =>
      ((await tryOut(`iptables-${m}-save`, [])) ?? '') + ((await tryOut(`ip6tables-${m}-save`, [])) ?? '');
    const hintNft = HINT.test(await mangle('nft'));
    const hintLegacy = !hintNft && HINT.test(await mangle('legacy'));
    const legacyRules = hintNft || hintLegacy ? 0 : countRules(await all('legacy'));
    const nftRules = hintNft || hintLegacy || legacyRules >= 10 ? 0 : countRules(await all('nft'));
    mode = chooseMode({ hintNft, hintLegacy, legacyRules, nftRules });
  }
  return make(mode, parseVersion((mode === 'nft' ? nftV : legacyV) ?? '').version, `-${mode}`);
}

function make(mode: BackendMode, version: string, suffix: string): Backend {
  return {
    mode, version,
    save: `iptables${suffix}-save`, restore: `iptables${suffix}-restore`,
    save6: `ip6tables${suffix}-save`, restore6: `ip6tables${suffix}-restore`,
    randomFully: versionAtLeast(version, '1.6.2'),
  };
}
