// The README is for users and docs/ for the rest: every relative Markdown link in them (and in
// plugins/README.md) names a file inside this repository, and none leaves it — a user's clone has
// nothing beside it, and no page here depends on a host outside the repository.
import { describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const pages = ['README.md', 'plugins/README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** Every `[text](target)` and `![alt](target)` outside fenced code blocks. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe('documentation links', () => {
  it('finds links in prose and skips fenced code', () => {
    expect(linksOf('a [x](docs/a.md) b\n```\n[y](nope.md)\n```\n![c](img.png)')).toEqual(['docs/a.md', 'img.png']);
  });

  it('the README stays a user page of about 300 lines', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(320);
  });

  it.each(pages)('%s: every link is a file inside the repository', (page) => {
    const bad: string[] = [];
    for (const target of linksOf(readFileSync(join(root, page), 'utf8'))) {
      if (/^[a-z]+:/i.test(target)) { bad.push(`${target}: leaves the repository`); continue; }
      const path = target.split('#')[0]!;
      if (path === '') continue;
      const abs = resolve(root, dirname(page), path);
      if (relative(root, abs).startsWith('..')) bad.push(`${target}: outside the repository`);
      else if (!existsSync(abs)) bad.push(`${target}: no such file`);
    }
    expect(bad).toEqual([]);
  });
});
