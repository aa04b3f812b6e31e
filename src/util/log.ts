// Logging, in one place: the `Log` function everything takes instead of a logger (sources, sinks,
// the loop, the health servers; tests pass memoryLog), and createLog, winston behind it: JSON
// lines by default (for log collectors), human text with --log-format text. Only createLog knows
// winston.
import winston from 'winston';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
/** A structured log call; `fields` become JSON keys, or `k=v` in text form. */
export type Log = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

/** A Log that drops everything. */
export const noLog: Log = () => undefined;

/** A logger writing to stderr in `format` from `level` up. */
export function createLog(format: 'json' | 'text', level: LogLevel = 'info'): Log {
  const text = winston.format.printf(({ level: l, message, timestamp, ...rest }) => {
    const extra = Object.entries(rest)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
    return `${String(timestamp)} ${l.toUpperCase().padEnd(5)} ${String(message)}${extra ? ` ${extra}` : ''}`;
  });
  const logger = winston.createLogger({
    level,
    format: winston.format.combine(winston.format.timestamp(), format === 'json' ? winston.format.json() : text),
    transports: [new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] })],
  });
  return (l, message, fields) => logger.log(l, message, fields ?? {});
}

/** One entry a memoryLog kept. */
export interface LogEntry { level: LogLevel; message: string; fields?: Record<string, unknown> }

/** A Log that keeps entries in memory (tests). */
export function memoryLog(): Log & { entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const log = ((level: LogLevel, message: string, fields?: Record<string, unknown>) => {
    entries.push({ level, message, ...(fields ? { fields } : {}) });
  }) as Log & { entries: typeof entries };
  log.entries = entries;
  return log;
}
