// `npm install` prints no warning: every installed package with an install script is reviewed in
// package.json's `allowScripts` (npm 11.16+ lists the others after each install; npm 12 skips
// their scripts, and netlink's builds the native addon the operator needs when no prebuild fits).
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';

interface Manifest { name: string; scripts?: Record<string, string>; allowScripts?: Record<string, boolean> }

const read = (file: string): Manifest => JSON.parse(readFileSync(file, 'utf8')) as Manifest;

/** Every package directory under a node_modules tree, nested trees included. */
function packages(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((e) => !e.startsWith('.')).flatMap((e) => {
    const path = join(dir, e);
    if (e.startsWith('@')) return readdirSync(path).flatMap((s) => [join(path, s), ...packages(join(path, s, 'node_modules'))]);
    return [path, ...packages(join(path, 'node_modules'))];
  }).filter((p) => existsSync(join(p, 'package.json')));
}

/** As npm decides: an install-time script, or a binding.gyp (npm then runs `node-gyp rebuild`). */
function hasInstallScript(dir: string): boolean {
  const scripts = read(join(dir, 'package.json')).scripts ?? {};
  return ['preinstall', 'install', 'postinstall'].some((s) => s in scripts) || existsSync(join(dir, 'binding.gyp'));
}

describe('install', () => {
  it('every installed package with an install script is in allowScripts, and netlink is allowed', () => {
    const allowed = read('package.json').allowScripts ?? {};
    const names = new Set(Object.keys(allowed).map((k) => k.replace(/(.)@.*$/, '$1')));
    const withScripts = [...new Set(packages('node_modules').filter(hasInstallScript).map((p) => read(join(p, 'package.json')).name))];
    expect(withScripts).toContain('netlink');
    expect(withScripts.filter((n) => !names.has(n))).toEqual([]);
    expect(allowed['netlink']).toBe(true);
  });
});
