// Which regular expressions a plugin's options schema may use. ajv runs `pattern` (and
// `patternProperties` keys) with V8's backtracking engine on a user's annotation text, so a
// pattern such as ^(a+)+$ lets one crafted value freeze the event loop of every node (ReDoS).
// A pattern is refused at plugin load when it can backtrack catastrophically or needs a
// backtracking feature: a quantified group that itself contains a quantifier or an alternation
// (star height above one, or overlapping alternatives under a quantifier), a backreference, or a
// lookaround. What is left runs in time linear-times-pattern-size on V8 too. pure.

/** Why `source` is refused (undefined: it is safe by the rule above). */
export function unsafePattern(source: string): string | undefined {
  if (/\\[1-9]|\\k</.test(source)) return 'a backreference';
  if (/\(\?<?[=!]/.test(source)) return 'a lookaround';
  // Per open group: does it contain a quantifier or an alternation?
  const stack: Array<{ risky: boolean }> = [];
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === '\\') { i++; continue; }
    if (inClass) { if (c === ']') inClass = false; continue; }
    if (c === '[') { inClass = true; continue; }
    if (c === '(') {
      stack.push({ risky: false });
      // (?:...) and (?<name>...): the group's own syntax, not a quantifier.
      if (source[i + 1] === '?') i += source[i + 2] === '<' ? source.indexOf('>', i) - i : 2;
      continue;
    }
    if (c === '|') { if (stack.length) stack[stack.length - 1]!.risky = true; continue; }
    const quantified = (j: number) => {
      const q = source[j];
      if (q === '*' || q === '+') return true;
      if (q === '{') {
        const rest = source.slice(j);
        return /^\{\d+,\d*\}/.test(rest) && !/^\{(\d+),\1\}/.test(rest) && !/^\{[01],1\}/.test(rest);
      }
      return false;
    };
    if (c === ')') {
      const g = stack.pop();
      if (g?.risky && quantified(i + 1)) {
        return `a quantified group with a quantifier or alternation inside (${source})`;
      }
      if (g?.risky || quantified(i + 1)) { if (stack.length) stack[stack.length - 1]!.risky = true; }
      continue;
    }
    if ((c === '*' || c === '+' || c === '?' || c === '{') && stack.length) stack[stack.length - 1]!.risky = true;
  }
  return undefined;
}

/** The first unsafe `pattern` or `patternProperties` key anywhere in a JSON schema, with its path. */
export function findUnsafePattern(schema: unknown, path = '#'): string | undefined {
  if (Array.isArray(schema)) {
    for (const [i, s] of schema.entries()) {
      const r = findUnsafePattern(s, `${path}/${i}`);
      if (r) return r;
    }
    return undefined;
  }
  if (typeof schema !== 'object' || schema === null) return undefined;
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'pattern' && typeof v === 'string') {
      const why = unsafePattern(v);
      if (why) return `${path}/pattern ${JSON.stringify(v)}: ${why}`;
    }
    if (k === 'patternProperties' && typeof v === 'object' && v !== null) {
      for (const key of Object.keys(v)) {
        const why = unsafePattern(key);
        if (why) return `${path}/patternProperties ${JSON.stringify(key)}: ${why}`;
      }
    }
    const r = findUnsafePattern(v, `${path}/${k}`);
    if (r) return r;
  }
  return undefined;
}
