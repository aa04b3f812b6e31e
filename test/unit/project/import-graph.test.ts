// The operator's image carries only the operator (issue 11): every module the `ipvs-operator`
// commands can load, statically or on use, is in src/ or plugins/ (never lab/, with lab compare,
// lab cluster and the demo, nor bench/ or test/), and every package it imports is a runtime
// dependency in package.json. The one door into the lab is `ipvs-operator lab`, which loads
// lab/commands.js through a computed specifier (so tsc leaves lab/ out of the operator's build)
// and says so when it is absent (the image).
// Walks the JavaScript tsc emitted (dist/), as the image's node would load it. The order of the
// rooms inside src/ (no back arrows, no cycles) is test/unit/project/layering.test.ts's.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const dist = join(root, 'dist');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };

/** The lab's door, as main.js names it: `const LAB_COMMANDS = '…'`, relative to main.js. */
const LAB_DOOR = /\bconst LAB_COMMANDS = ['"]([^'"]+)['"]/;

/**
 * Specifiers of `import ... from 'x'`, `export ... from 'x'`, `import 'x'` and `import('x')` with a
 * literal; with `staticOnly`, not the last (what loads on use).
 */
function specifiers(code: string, staticOnly = false): string[] {
  const out: string[] = [];
  const forms = [/\bfrom\s+['"]([^'"]+)['"]/g, /\bimport\s+['"]([^'"]+)['"]/g, /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g];
  for (const re of staticOnly ? forms.slice(0, 2) : forms) {
    for (const m of code.matchAll(re)) out.push(m[1]!);
  }
  return out;
}

/**
 * Every module file reachable from `entry`, and the bare packages they import (as written, in
 * `specs`); with `staticOnly`, what loads with `entry` itself, before any import() on use.
 */
function walk(entry: string, staticOnly = false): { files: Set<string>; packages: Set<string>; specs: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const specs = new Set<string>();
  const todo = [entry];
  while (todo.length) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const s of specifiers(readFileSync(file, 'utf8'), staticOnly)) {
      if (s.startsWith('.')) todo.push(resolve(dirname(file), s));
      else if (!s.startsWith('node:') && !builtinModules.includes(s)) {
        specs.add(s);
        packages.add(s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!);
      }
    }
  }
  return { files, packages, specs };
}

describe("the operator's module graph", () => {
  const { files, packages } = walk(join(dist, 'src', 'cli', 'main.js'));
  const rel = [...files].map((f) => relative(dist, f)).sort();

  it('reaches the operator and its plugins, and the lab only through its door', () => {
    expect(rel).toContain('src/sync/operator.js');
    expect(rel).toContain('src/kube/source.js'); // loaded on use, still walked
    expect(rel).toContain('plugins/index.js');
    expect(rel.filter((f) => !/^(src|plugins)\//.test(f))).toEqual([]);
  });

  it("opens the lab's door to lab/commands.js, which exists in a checkout and exports labMain", () => {
    const main = join(dist, 'src', 'cli', 'main.js');
    const door = LAB_DOOR.exec(readFileSync(main, 'utf8'))?.[1];
    expect(door && relative(dist, resolve(dirname(main), door))).toBe(join('lab', 'commands.js'));
    expect(readFileSync(join(dist, 'lab', 'commands.js'), 'utf8')).toMatch(/^export (async )?function labMain\(/m);
  });

  it('imports only runtime dependencies, and the lab tooling (resvg) is not one', () => {
    expect([...packages].filter((p) => !(p in pkg.dependencies)).sort()).toEqual([]);
    expect(pkg.dependencies).not.toHaveProperty('@resvg/resvg-js');
    expect(pkg.devDependencies).toHaveProperty('@resvg/resvg-js');
  });

  it("uses client-node's public API only: no module of its dist/, its index only for a kubeconfig client.ts hands over", () => {
    const uses = [...files].flatMap((f) => {
      const code = readFileSync(f, 'utf8');
      return specifiers(code).filter((s) => s.startsWith('@kubernetes/client-node'))
        .map((s) => `${relative(dist, f)} ${s}${code.includes(`import('${s}')`) ? ' (on use)' : ''}`);
    });
    expect(uses.sort()).toEqual([
      'src/kube/client.js @kubernetes/client-node (on use)',
    ]);
  });

  // Under TCG every module costs tens of ms (a lab VM's `cleanup` took 20-30 s when main.js loaded
  // the operator's 500 modules up front): each command loads what it runs, when it runs.
  it('loads with main.js only the command table: not the operator, its plugins, winston, yaml or ajv', () => {
    const first = walk(join(dist, 'src', 'cli', 'main.js'), true);
    const loaded = [...first.files].map((f) => relative(dist, f));
    for (const heavy of ['src/sync/operator.js', 'plugins/index.js', 'src/cli/run.js', 'src/cli/status.js', 'src/source/files.js']) {
      expect(loaded).not.toContain(heavy);
    }
    // fatal.ts ends the helper thread on exit: that takes no package (the thread's jobs load theirs).
    expect([...first.packages].sort()).toEqual([]);
  });

  it('loads for `cleanup` the kernel clients, not the files source, the config, winston, yaml or ajv', () => {
    const need = ['status.js', 'wiring.js'].map((f) => walk(join(dist, 'src', 'cli', f), true));
    const loaded = need.flatMap((w) => [...w.files].map((f) => relative(dist, f)));
    expect(loaded).toContain('src/ipvs/client.js');
    expect(loaded).toContain('src/iptables/restore.js');
    expect(loaded.filter((f) => /^(src\/(sync\/operator|source\/files|config\/load)|plugins\/index)\.js$/.test(f))).toEqual([]);
    expect([...new Set(need.flatMap((w) => [...w.packages]))].sort()).toEqual(['netlink']);
  });

  it("compiles no schema at start: ajv's compiler is required on first use, only its runtime helper imported", () => {
    const runGraph = walk(join(dist, 'src', 'cli', 'run.js'), true);
    expect([...runGraph.specs].filter((s) => s.startsWith('ajv')).sort()).toEqual(['ajv/dist/runtime/ucs2length.js']);
    expect(readFileSync(join(dist, 'src', 'util', 'ajv.js'), 'utf8')).toContain("require('ajv')");
  });

  it('sees every form of import (the walk is not vacuous)', () => {
    const code = "import { a } from './a.js';\nexport * from \"./b.js\";\nimport './c.js';\nawait import('./d.js');";
    expect(specifiers(code)).toEqual(['./a.js', './b.js', './c.js', './d.js']);
    expect(specifiers(code, true)).toEqual(['./a.js', './b.js', './c.js']);
    expect(packages.has('@kubernetes/client-node')).toBe(true);
    expect(packages.has('netlink')).toBe(true);
  });
});
