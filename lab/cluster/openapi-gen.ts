#!/usr/bin/env node
// Generates lab/cluster/openapi-builtin.json, the OpenAPI definitions of the built-in kinds
// the lab API server serves (store.ts RESOURCES), from the kubernetes-models dev dependency's
// type declarations: that package is generated from the Kubernetes OpenAPI document, and its .d.ts
// files keep each field's name, type and description. The JSON is committed, because the lab API
// server runs from dist/ where no dev dependency is installed; a unit test keeps it current
// (test/unit/lab/lab-openapi.test.ts). Run after a kubernetes-models upgrade or a new resource:
//   npm run build && node dist/lab/cluster/openapi-gen.js
// What the declarations lose: integer vs number (every number is written as an integer; of the
// served kinds only JSONSchemaProps' minimum, maximum and multipleOf are floats) and formats
// other than int-or-string.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { RESOURCES, type ResourceInfo, apiVersionOf } from './store.js';

type Schema = Record<string, unknown>;
interface Decl { name: string; node: ts.InterfaceDeclaration | ts.TypeAliasDeclaration; locals: Map<string, string> }

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** Where the generated definitions go (beside this module's source). */
export const OUTPUT = join(root, 'lab', 'cluster', 'openapi-builtin.json');

/** `IoK8sApiCoreV1` -> `io.k8s.api.core.v1`, as the OpenAPI document names packages. */
function packageName(pascal: string): string {
  return (pascal.match(/[A-Z][a-z0-9]*/g) ?? []).map((t) => t.toLowerCase()).join('.').replace('apiextensions.apiserver', 'apiextensions-apiserver');
}

function declarationFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return e.name === '_schemas' || e.name === 'node_modules' ? [] : declarationFiles(join(dir, e.name));
    return e.name.endsWith('.d.ts') ? [join(dir, e.name)] : [];
  });
}

/** Every declared interface and type alias of the packages, by OpenAPI definition name. */
function readDeclarations(dirs: string[]): Map<string, Decl> {
  const out = new Map<string, Decl>();
  for (const file of dirs.flatMap(declarationFiles)) {
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    // `export type { IServicePort as IIoK8sApiCoreV1ServicePort, ServicePort as IoK8sApiCoreV1ServicePort }`
    const locals = new Map<string, string>();
    for (const st of sf.statements) {
      if (!ts.isExportDeclaration(st) || !st.exportClause || !ts.isNamedExports(st.exportClause)) continue;
      const els = st.exportClause.elements;
      const model = els.find((e) => !e.name.text.startsWith('II'));
      if (!model) continue;
      const kind = (model.propertyName ?? model.name).text;
      const full = `${packageName(model.name.text.slice(0, -kind.length))}.${kind}`;
      for (const e of els) if (e.name.text.startsWith('II')) locals.set((e.propertyName ?? e.name).text, full);
    }
    for (const st of sf.statements) {
      if (!(ts.isInterfaceDeclaration(st) || ts.isTypeAliasDeclaration(st))) continue;
      const name = locals.get(st.name.text);
      if (name) out.set(name, { name, node: st, locals });
    }
  }
  return out;
}

function docOf(node: ts.Node): string | undefined {
  const c = ts.getJSDocCommentsAndTags(node).find(ts.isJSDoc)?.comment;
  const text = typeof c === 'string' ? c : c?.map((p) => p.text).join('');
  return text ? text.replace(/\\\*/g, '*') : undefined;
}

/** The full name of a referenced type (`IIoK8sApiCoreV1ServiceSpec`, or a local `IServiceSpec`). */
function refName(name: string, locals: Map<string, string>): string | undefined {
  if (locals.has(name)) return locals.get(name);
  const m = /^I(IoK8s.*)$/.exec(name);
  return m ? m[1] : undefined;
}

class Generator {
  readonly definitions: Record<string, Schema> = {};
  private readonly todo: string[] = [];
  private readonly fullNames = new Map<string, string>();

  constructor(private readonly decls: Map<string, Decl>) {
    // IIoK8s... names to definition names (the package part is not recoverable from the name alone).
    for (const d of decls.values()) for (const [, full] of d.locals) this.fullNames.set(full.replace(/[.-]/g, '').toLowerCase(), full);
  }

  private resolve(name: string, locals: Map<string, string>): string | undefined {
    const r = refName(name, locals);
    return r && (this.decls.has(r) ? r : this.fullNames.get(r.replace(/[.-]/g, '').toLowerCase()));
  }

  add(name: string): void {
    this.todo.push(name);
    while (this.todo.length) {
      const n = this.todo.pop()!;
      if (this.definitions[n]) continue;
      const d = this.decls.get(n);
      if (!d) throw new Error(`no declaration of ${n}`);
      this.definitions[n] = {}; // recursion (JSONSchemaProps) ends here
      this.definitions[n] = this.declaration(d);
    }
  }

  private declaration(d: Decl): Schema {
    const description = docOf(d.node);
    if (ts.isTypeAliasDeclaration(d.node)) return { ...(description ? { description } : {}), ...this.type(d.node.type, d.locals) };
    // JSON, JSONSchemaPropsOrBool and the like: any value, and the OpenAPI document gives no type.
    if (!d.node.members.length) return description ? { description } : {};
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    let gv: string | undefined;
    let kind: string | undefined;
    for (const m of d.node.members) {
      if (!ts.isPropertySignature(m) || !m.type) continue;
      const p = ts.isStringLiteral(m.name) || ts.isIdentifier(m.name) ? m.name.text : m.name.getText();
      const doc = docOf(m);
      const literal = ts.isLiteralTypeNode(m.type) && ts.isStringLiteral(m.type.literal) ? m.type.literal.text : undefined;
      if (p === 'apiVersion' && literal) gv = literal;
      if (p === 'kind' && literal) kind = literal;
      properties[p] = { ...(doc ? { description: doc } : {}), ...(literal ? { type: 'string' } : this.type(m.type, d.locals)) };
      if (!m.questionToken) required.push(p);
    }
    const gvk = gv && kind ? [{ group: gv.includes('/') ? gv.split('/')[0] : '', version: gv.split('/').pop(), kind }] : undefined;
    return {
      ...(description ? { description } : {}), type: 'object', properties,
      ...(required.length ? { required: required.filter((r) => !['apiVersion', 'kind'].includes(r)) } : {}),
      ...(gvk ? { 'x-kubernetes-group-version-kind': gvk } : {}),
    };
  }

  private type(t: ts.TypeNode, locals: Map<string, string>): Schema {
    switch (t.kind) {
      case ts.SyntaxKind.StringKeyword: return { type: 'string' };
      case ts.SyntaxKind.NumberKeyword: return { type: 'integer' };
      case ts.SyntaxKind.BooleanKeyword: return { type: 'boolean' };
      case ts.SyntaxKind.AnyKeyword: case ts.SyntaxKind.UnknownKeyword: case ts.SyntaxKind.ObjectKeyword:
        return { 'x-kubernetes-preserve-unknown-fields': true };
    }
    if (ts.isParenthesizedTypeNode(t)) return this.type(t.type, locals);
    if (ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal)) return { type: 'string', enum: [t.literal.text] };
    if (ts.isUnionTypeNode(t)) {
      const lits = t.types.map((u) => (ts.isLiteralTypeNode(u) && ts.isStringLiteral(u.literal) ? u.literal.text : undefined));
      if (lits.every((l) => l !== undefined)) return { type: 'string', enum: lits };
      const kinds = new Set(t.types.map((u) => u.kind));
      if (kinds.size === 2 && kinds.has(ts.SyntaxKind.StringKeyword) && kinds.has(ts.SyntaxKind.NumberKeyword)) {
        return { type: 'string', format: 'int-or-string', 'x-kubernetes-int-or-string': true };
      }
      return { 'x-kubernetes-preserve-unknown-fields': true }; // JSONSchemaPropsOrBool and the like
    }
    if (ts.isArrayTypeNode(t)) return { type: 'array', items: this.type(t.elementType, locals) };
    if (ts.isTypeLiteralNode(t)) {
      const index = t.members.filter(ts.isIndexSignatureDeclaration)[0];
      return index ? { type: 'object', additionalProperties: this.type(index.type, locals) } : { type: 'object' };
    }
    if (ts.isTypeReferenceNode(t)) {
      const name = t.typeName.getText();
      if (name === 'Array' && t.typeArguments?.[0]) return { type: 'array', items: this.type(t.typeArguments[0], locals) };
      const full = this.resolve(name, locals);
      if (full) {
        this.todo.push(full);
        return { $ref: `#/components/schemas/${full}` };
      }
    }
    throw new Error(`unsupported type ${t.getText()}`);
  }
}

/** The definitions of every built-in kind in RESOURCES and what they reference. */
export function generate(nodeModules: string): { source: string; definitions: Record<string, Schema> } {
  const models = join(nodeModules, 'kubernetes-models');
  const decls = readDeclarations([models, join(nodeModules, '@kubernetes-models', 'apimachinery')]);
  const gen = new Generator(decls);
  for (const info of Object.values(RESOURCES) as ResourceInfo[]) {
    if (info.group === 'ipvs-operator.io') continue; // from crds/ at run time
    const hit = [...decls.values()].find((d) => {
      const s = ts.isInterfaceDeclaration(d.node) ? d.node : undefined;
      const lit = (p: string) => s?.members.filter(ts.isPropertySignature).find((m) => m.name.getText().replace(/"/g, '') === p)?.type?.getText().replace(/"/g, '');
      return lit('apiVersion') === apiVersionOf(info) && lit('kind') === info.kind;
    });
    if (!hit) throw new Error(`kubernetes-models has no ${apiVersionOf(info)} ${info.kind}`);
    gen.add(hit.name);
  }
  const version = (JSON.parse(readFileSync(join(models, 'package.json'), 'utf8')) as { version: string }).version;
  const sorted = Object.fromEntries(Object.entries(gen.definitions).sort(([a], [b]) => a.localeCompare(b)));
  return { source: `kubernetes-models ${version}`, definitions: sorted };
}

/** The generated file's text. */
export function render(doc: ReturnType<typeof generate>): string {
  return `${JSON.stringify(doc, null, 1)}\n`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const nodeModules = join(dirname(createRequire(import.meta.url).resolve('typescript')), '..', '..');
  writeFileSync(OUTPUT, render(generate(nodeModules)));
  process.stdout.write(`wrote ${OUTPUT}\n`);
}
