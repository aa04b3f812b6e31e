// What the operator's commands share: the Command shape, the log flags, and the checks of an
// address flag and of --source. main.ts lists the commands; run-command.ts is `run`.
import type { parseArgs } from 'node:util';
import type { LogLevel } from '../util/log.js';
import { parseHostPort } from '../model/host-port.js';
import { UsageError } from '../util/dispatch.js';
import type { SourceSpec } from './wiring.js';

/** A command: its flags (parseArgs options), usage, help and action. */
export interface Command {
  summary: string;
  usage: string;
  help: string;
  options: NonNullable<Parameters<typeof parseArgs>[0]>['options'];
  positionals?: number;
  run(values: Record<string, string | boolean | undefined>, positionals: string[]): Promise<number>;
}

export const logFlags = {
  'log-format': { type: 'string', default: 'json' },
  'log-level': { type: 'string', default: 'info' },
} as const;

/**
 * The format and level the log flags ask for; a UsageError for a bad value. (The logger itself,
 * winston behind it, is made where `run` has loaded it: the other commands never load winston.)
 */
export function logSettings(values: Record<string, unknown>): { format: 'json' | 'text'; level: LogLevel } {
  const format = values['log-format'];
  const level = values['log-level'];
  if (format !== 'json' && format !== 'text') {
    throw new UsageError(`--log-format must be json or text, not ${String(format)}`);
  }
  if (!['error', 'warn', 'info', 'debug'].includes(String(level))) {
    throw new UsageError(`--log-level must be error, warn, info or debug, not ${String(level)}`);
  }
  return { format, level: level as LogLevel };
}

/**
 * The value of an address flag, checked with parseHostPort (port 0 refused); a UsageError naming
 * the flag otherwise.
 */
export function addrFlag(flag: string, value: unknown): string {
  const r = parseHostPort(String(value));
  if (!r.ok) throw new UsageError(`--${flag} ${r.error}`);
  return String(value);
}

/** The --source flag's help, shared by run and explain. */
export const sourceHelp = '--source kube (default; in-cluster or --kubeconfig) or files:DIR (a directory of\n' +
  'Service/EndpointSlice/Node/IPVSProxyConfig YAML, watched for changes)';

/** The --source flag's value; a UsageError naming it otherwise. */
export function parseSource(s: string): SourceSpec {
  if (s === 'kube') return { kind: 'kube' };
  if (s.startsWith('files:') && s.length > 'files:'.length) return { kind: 'files', dir: s.slice('files:'.length) };
  throw new UsageError(`--source must be kube or files:DIR, not ${JSON.stringify(s)}`);
}
