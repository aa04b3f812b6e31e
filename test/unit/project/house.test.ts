// The shape issue 26 asks of every file the image ships (src/): a file fits in one reading (about
// 300 lines), a class holds at most about 8 fields, a header says what the file is for in a few
// lines, and no line passes 120 characters. Fields are counted with the TypeScript parser:
// property declarations plus constructor parameters that are properties.
import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const MAX_LINES = 300;
const MAX_FIELDS = 8;
const MAX_HEADER = 10;
const MAX_WIDTH = 120;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    // A .gen.ts file is ajv's generated code (lab/gen-validators.ts), checked against its generator.
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && !e.name.endsWith('.gen.ts') ? [p] : [];
  });
}

const files = sources(join(root, 'src')).map((p) => ({ path: relative(root, p), text: readFileSync(p, 'utf8') }));

/** The leading block of `//` or `/* … *\/` comment lines. */
function headerLines(text: string): number {
  let n = 0;
  for (const line of text.split('\n')) {
    if (!/^\s*(\/\/|\/\*|\*)/.test(line)) break;
    n++;
  }
  return n;
}

/** Each class of a file with its number of instance fields (declared properties and parameter properties). */
function classFields(path: string, text: string): Array<{ name: string; fields: number }> {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: Array<{ name: string; fields: number }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      let fields = 0;
      for (const m of node.members) {
        if (ts.isPropertyDeclaration(m) && !m.modifiers?.some((x) => x.kind === ts.SyntaxKind.StaticKeyword)) fields++;
        if (ts.isConstructorDeclaration(m)) fields += m.parameters.filter((p) => ts.isParameterPropertyDeclaration(p, m)).length;
      }
      out.push({ name: node.name?.text ?? '(anonymous)', fields });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

describe('the shape of the shipped sources (issue 26)', () => {
  it('finds the sources', () => {
    expect(files.length).toBeGreaterThan(50);
  });

  it(`keeps every file within ${MAX_LINES} lines`, () => {
    const lines = (t: string) => t.split('\n').length - (t.endsWith('\n') ? 1 : 0);
    const long = files.filter((f) => lines(f.text) > MAX_LINES).map((f) => `${f.path}: ${lines(f.text)}`);
    expect(long).toEqual([]);
  });

  it(`keeps every class within ${MAX_FIELDS} fields`, () => {
    const wide = files.flatMap((f) => classFields(f.path, f.text).filter((c) => c.fields > MAX_FIELDS).map((c) => `${f.path} ${c.name}: ${c.fields}`));
    expect(wide).toEqual([]);
  });

  it(`keeps every header within ${MAX_HEADER} lines`, () => {
    const wordy = files.filter((f) => headerLines(f.text) > MAX_HEADER).map((f) => `${f.path}: ${headerLines(f.text)}`);
    expect(wordy).toEqual([]);
  });

  it(`keeps every line within ${MAX_WIDTH} characters`, () => {
    const wide = files.flatMap((f) => f.text.split('\n').flatMap((l, i) => (l.length > MAX_WIDTH ? [`${f.path}:${i + 1}`] : [])));
    expect(wide).toEqual([]);
  });

  it('imports node:http and node:https as values only through src/util/node-http.ts (require: no ESM facade)', () => {
    const valueImport = /^import\s+(?!type\b)[^;]*?from\s+'node:https?'/m;
    const found = files.filter((f) => f.path !== join('src', 'util', 'node-http.ts') && valueImport.test(f.text));
    expect(found.map((f) => f.path)).toEqual([]);
    expect(valueImport.test("import { createServer } from 'node:http';")).toBe(true);
    expect(valueImport.test("import type { Server } from 'node:http';")).toBe(false);
  });

  it('counts what it claims to count', () => {
    const code = '// one\n// two\nexport class A {\n  x = 1;\n  static s = 0;\n  private y?: string;\n  constructor(private readonly z: number, w: number) {}\n}\n';
    expect(headerLines(code)).toBe(2);
    expect(classFields('a.ts', code)).toEqual([{ name: 'A', fields: 3 }]);
  });
});
