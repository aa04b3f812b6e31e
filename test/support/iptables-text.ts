// Dedented literals for whole-payload comparisons (kube-proxy's iptables tests compare the full
// restore text with a dedented string the same way).

/** Strips the common indentation and the first/last blank lines; ends with a newline. */
export function dedent(text: string): string {
  const lines = text.split('\n');
  while (lines.length && lines[0]!.trim() === '') lines.shift();
  while (lines.length && lines[lines.length - 1]!.trim() === '') lines.pop();
  const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
  return `${lines.map((l) => l.slice(indent)).join('\n')}\n`;
}
