// Logging: winston, JSON lines by default (for log collectors), human text with --log-format text.
// Everything else takes a `Log` function, so only this file knows winston.
import winston from 'winston';

import type { LogFn, LogLevel } from '../source/log.js';

export type { LogLevel };
/** A structured log call (the one type sources, sinks and the operator share); `fields` become JSON keys, or `k=v` in text form. */
export type Log = LogFn;

/** A logger writing to stderr in `format` from `level` up. */
export function createLog(format: 'json' | 'text', level: LogLevel = 'info'): Log {
  const text = winston.format.printf(({ level: l, message, timestamp, ...rest }) => {
    const extra = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
    return `${String(timestamp)} ${l.toUpperCase().padEnd(5)} ${String(message)}${extra ? ` ${extra}` : ''}`;
  });
  const logger = winston.createLogger({
    level,
    format: winston.format.combine(winston.format.timestamp(), format === 'json' ? winston.format.json() : text),
    transports: [new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] })],
  });
  return (l, message, fields) => logger.log(l, message, fields ?? {});
}

/** A Log that keeps entries in memory (tests). */
export function memoryLog(): Log & { entries: Array<{ level: LogLevel; message: string; fields?: Record<string, unknown> }> } {
  const entries: Array<{ level: LogLevel; message: string; fields?: Record<string, unknown> }> = [];
  const log = ((level: LogLevel, message: string, fields?: Record<string, unknown>) => {
    entries.push({ level, message, ...(fields ? { fields } : {}) });
  }) as Log & { entries: typeof entries };
  log.entries = entries;
  return log;
}
