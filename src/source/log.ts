// The log function sources and sinks take instead of a logger (the operator passes its winston one;
// tests pass a memory one). Structurally the same as src/operator/log.ts's Log.

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
/** A structured log call; `fields` become JSON keys. */
export type LogFn = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;

/** A LogFn that drops everything. */
export const noLog: LogFn = () => undefined;
