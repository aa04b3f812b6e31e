// The rooms of src/ (and of lab/ above them) stand in one order and import only downwards (issue
// 26, "No back arrows, no cycles"): a file imports files of its own room or of a lower room, never
// of its room's peers or of a room above, and no set of files imports itself around a cycle.
// Type-only imports count: a type shared by two rooms belongs to the lower one. Walks the
// TypeScript sources (type-only imports are erased from dist/), with docs/architecture.md's
// picture as the order below. test/unit/project/import-graph.test.ts checks the other half: what the
// operator's commands load, and the lab door (a computed import, so no edge here).
import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
/** The trees walked: the operator's (the image's) and the lab's. */
const TREES = ['src', 'lab'];

/**
 * The rooms, lowest first, with why each tier sits where it does. A room imports only rooms of
 * lower tiers; rooms of one tier do not import each other.
 */
const ORDER: ReadonlyArray<readonly [rooms: readonly string[], why: string]> = [
  [['model', 'netlink', 'util'], 'values (addresses, the IPVS table, the desired table), netlink framing and small helpers (the logger among them): they import no room'],
  [['ipvs', 'rtnl', 'conntrack', 'config'], 'the kernel interfaces and the IPVSProxyConfig, built on the values alone'],
  [['balance'], 'the per-Service choices desired/service.ts makes with it (order, slow start, cluster balance)'],
  [['desired', 'plugins'], 'the desired state built from API objects; src/plugins loads the schedulers it resolves'],
  [['plan', 'iptables', 'source'], 'what reads the desired state: the plan, the ipset/iptables payload rendered from its sets, and the source seam that feeds it'],
  [['kube'], 'the Kubernetes source, an implementation of the seam in source/'],
  [['metrics'], "the process's one Prometheus registry (kube-proxy's pkg/proxy/metrics): the loop's sync metrics and the kernel's counters, the source's and the balance view's; imports only the IPVS client's types"],
  [['healthcheck', 'node'], "the node's edges beside the loop, wired to it by the cli: health checking (kube-proxy's pkg/proxy/healthcheck: the loop's /healthz and /readyz verdict, the proxier healthz, the health-check NodePorts; the loop reports to it and it never imports the loop) and node set-up (modules, sysctls, strictARP, IPVS timeouts, a reloaded ip_vs)"],
  [['sync'], 'the loop: read, plan, execute, record, over everything below'],
  [['cli'], 'parses flags and wires the rest; nothing on the data path imports it'],
  [['lab'], 'tooling in lab/, not in the image (lab compare and lab cluster included): may import anything below; the cli reaches it only by its door, a computed import'],
  [['demo'], 'the demo (lab/demo/), built on the lab'],
];

/** An import that goes against ORDER on purpose, each with its reason. */
interface Exception { from: string; to: string; kind: 'type' | 'dynamic'; why: string }
const EXCEPTIONS: readonly Exception[] = [];

const tier = new Map(ORDER.flatMap(([rooms], i) => rooms.map((r) => [r, i] as const)));

/** One import of a source file: where it points, and whether it is type-only or on use. */
interface Edge { from: string; to: string; type: boolean; dynamic: boolean }

/**
 * Relative specifiers of `import … from`, `export … from`, `import '…'` and `import('…')`, with
 * whether the import is type-only (`import type`, or every name in braces marked `type`).
 */
function imports(code: string): Array<{ spec: string; type: boolean; dynamic: boolean }> {
  const out: Array<{ spec: string; type: boolean; dynamic: boolean }> = [];
  const clause = /^(?:import|export)\s+(type\s+)?((?:[\w$]+\s*,\s*)?(?:\{[^}]*\}|\*(?:\s+as\s+[\w$]+)?|[\w$]+))\s+from\s+['"]([^'"]+)['"]/gm;
  for (const m of code.matchAll(clause)) {
    const names = m[2]!.startsWith('{') ? m[2]!.slice(1, -1).split(',').map((n) => n.trim()).filter(Boolean) : [];
    out.push({ spec: m[3]!, type: !!m[1] || (names.length > 0 && names.every((n) => n.startsWith('type '))), dynamic: false });
  }
  for (const m of code.matchAll(/^import\s+['"]([^'"]+)['"]/gm)) out.push({ spec: m[1]!, type: false, dynamic: false });
  for (const m of code.matchAll(/(typeof\s+)?\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push({ spec: m[2]!, type: !!m[1], dynamic: !m[1] });
  return out.filter((i) => i.spec.startsWith('.'));
}

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : []);
}

const files = TREES.flatMap((t) => sources(join(root, t))).map((f) => relative(root, f)).sort();
const edges: Edge[] = files.flatMap((from) => imports(readFileSync(join(root, from), 'utf8')).map((i) => ({
  from, to: relative(root, resolve(root, dirname(from), i.spec)).replace(/\.js$/, '.ts'), type: i.type, dynamic: i.dynamic,
})));
/** src/<room>/…; lab/demo/… is the demo; the rest of lab/ is the lab. */
const room = (file: string): string | undefined =>
  file.startsWith('lab/') ? (file.startsWith('lab/demo/') ? 'demo' : 'lab') : /^src\/([^/]+)\//.exec(file)?.[1];
const show = (e: Edge) => `${e.from} -> ${e.to}${e.type ? ' (type)' : ''}${e.dynamic ? ' (on use)' : ''}`;
const excused = (e: Edge, x: Exception) =>
  (x.from.endsWith('/') ? e.from.startsWith(x.from) : e.from === x.from) && e.to === x.to && (x.kind === 'type' ? e.type : e.dynamic);

/** The files of each strongly connected set of more than one file (Tarjan). */
function cycles(nodes: readonly string[], next: (n: string) => string[]): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    on.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do { w = stack.pop()!; on.delete(w); scc.push(w); } while (w !== v);
    if (scc.length > 1 || next(v).includes(v)) out.push(scc.sort());
  };
  for (const n of nodes) if (!index.has(n)) visit(n);
  return out;
}

describe('the rooms of src/ and lab/', () => {
  it('are each placed in the order (a new room is placed on purpose)', () => {
    const rooms = [...new Set(files.map(room))].filter((r) => r !== undefined).sort();
    expect(rooms.filter((r) => !tier.has(r))).toEqual([]);
    expect([...tier.keys()].filter((r) => !rooms.includes(r))).toEqual([]);
  });

  it('import only lower rooms, except the named exceptions', () => {
    const against = edges.filter((e) => {
      const a = room(e.from);
      const b = room(e.to);
      if (!a || !b || a === b) return false;
      return !(tier.get(b)! < tier.get(a)!) && !EXCEPTIONS.some((x) => excused(e, x));
    });
    expect(against.map(show)).toEqual([]);
  });

  it('still need every exception (a stale one is removed, not kept)', () => {
    expect(EXCEPTIONS.filter((x) => !edges.some((e) => excused(e, x))).map((x) => `${x.from} -> ${x.to}`)).toEqual([]);
  });

  it('have no file-level import cycle, type-only imports included (lab and demo too)', () => {
    const bySource = new Map<string, string[]>();
    for (const e of edges) bySource.set(e.from, [...(bySource.get(e.from) ?? []), e.to]);
    expect(cycles(files, (f) => bySource.get(f) ?? [])).toEqual([]);
  });

  it('are walked for real: every import form is seen, and the cycle finder finds cycles', () => {
    expect(imports([
      "import { a } from './a.js';", "import type { B } from '../b.js';", "import { type C, type D } from './cd.js';",
      "import e, { type E } from './e.js';", "export * from './f.js';", "import './g.js';",
      "const h = await import('./h.js');", "type I = typeof import('./i.js');", "import { j } from 'pkg';",
      'import {\n  k,\n  type K,\n} from "./k.js";',
    ].join('\n'))).toEqual([
      { spec: './a.js', type: false, dynamic: false }, { spec: '../b.js', type: true, dynamic: false },
      { spec: './cd.js', type: true, dynamic: false }, { spec: './e.js', type: false, dynamic: false },
      { spec: './f.js', type: false, dynamic: false }, { spec: './k.js', type: false, dynamic: false },
      { spec: './g.js', type: false, dynamic: false },
      { spec: './h.js', type: false, dynamic: true }, { spec: './i.js', type: true, dynamic: false },
    ]);
    expect(cycles(['a', 'b', 'c', 'd'], (n) => ({ a: ['b'], b: ['c'], c: ['a'], d: ['d'] })[n] ?? [])).toEqual([['a', 'b', 'c'], ['d']]);
    expect(files).toContain('src/model/addr.ts');
    expect(edges.some((e) => e.from === 'src/model/ipvs.ts' && e.to === 'src/model/addr.ts')).toBe(true);
    expect(files).toContain('lab/demo/demo.ts');
    expect(edges.some((e) => e.from === 'lab/commands.ts' && e.to === 'src/util/dispatch.ts')).toBe(true);
    expect(edges.some((e) => e.from === 'lab/demo/demo.ts' && e.to === 'lab/topology.ts')).toBe(true);
  });
});
