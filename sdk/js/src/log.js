// Logs from the plugin into the host's `tracing`, tagged there with plugin and object.
// `console.log` / `console.error` also reach the host's log, as stdout / stderr lines.

import { log as witLog } from 'orchard:actuator/log@0.1.2';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

/** Sends one line; `level` is `trace`, `debug`, `info`, `warn` or `error`. */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new TypeError(`unknown log level ${level}`);
  witLog(level, String(message));
}

export const trace = (m) => log('trace', m);
export const debug = (m) => log('debug', m);
export const info = (m) => log('info', m);
export const warn = (m) => log('warn', m);
export const error = (m) => log('error', m);
