// The one command dispatcher of the project's two programs (`ipvs-operator` and the lab's
// `npm run lab --`): `<command> [args]`, `--help` for the program or a command, unknown commands and
// usage errors with exit code 2, other errors printed with the command's name and exit code 1.
// Each program keeps its own command table; a command receives its raw arguments.

/** A wrong flag or argument: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}

/** One command of a program. */
export interface CliCommand {
  summary: string;
  usage: string;
  help: string;
  run(args: string[]): Promise<number>;
  /** A program of its own (`ipvs-operator lab`): every argument, --help included, is its. */
  nested?: boolean;
}

/** A program: how it is invoked, its commands, and how it reports errors. */
export interface Program {
  /** How a person invokes it, e.g. `ipvs-operator` or `npm run lab --`. */
  invoke: string;
  /** Prefix of error lines for a command, e.g. `ipvs-operator explain` or `lab`. */
  prefix(command: string | undefined): string;
  /** Lines between the usage line and the command list. */
  intro?: string;
  /** Lines after the command list. */
  footer: string;
  commands: Record<string, CliCommand>;
  /** The exit code for an error this program knows, or undefined for the default (1). */
  exitCode?(e: unknown): number | undefined;
}

/** The program's usage text. */
export function renderUsage(p: Program): string {
  const width = Math.max(...Object.keys(p.commands).map((c) => c.length));
  return `usage: ${p.invoke} <command> [args]\n\n${p.intro ? `${p.intro}\n\n` : ''}commands:\n` +
    Object.entries(p.commands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.summary}`).join('\n') +
    `\n\n${p.footer}\n`;
}

/** Runs the command `argv` names; resolves with the exit code (see the file comment). */
export async function dispatch(p: Program, argv: readonly string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(renderUsage(p));
    return name ? 0 : 2;
  }
  const cmd = Object.hasOwn(p.commands, name) ? p.commands[name] : undefined;
  if (!cmd) {
    process.stderr.write(`${p.prefix(undefined)}: unknown command ${JSON.stringify(name)}\n\n${renderUsage(p)}`);
    return 2;
  }
  // Only flags before `--` are the command's: what follows is another program's (lab run -- cmd --help).
  const own = args.includes('--') ? args.slice(0, args.indexOf('--')) : args;
  if (!cmd.nested && (own.includes('--help') || own.includes('-h'))) {
    process.stdout.write(`usage: ${p.invoke} ${cmd.usage}\n\n${cmd.help}\n`);
    return 0;
  }
  try {
    return await cmd.run(args);
  } catch (e) {
    const err = e as Error & { code?: string };
    if (e instanceof UsageError || err.code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`${p.prefix(name)}: ${err.message}\nusage: ${p.invoke} ${cmd.usage}\n`);
      return 2;
    }
    const code = p.exitCode?.(e);
    process.stderr.write(`${p.prefix(name)}: ${err instanceof Error ? err.message : String(e)}\n`);
    return code ?? 1;
  }
}
