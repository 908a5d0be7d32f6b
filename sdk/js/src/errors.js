// Failures: exceptions a plugin throws, which the SDK turns into the contract's `failure`.
//
// Throw `Transient` for anything worth retrying (the host retries with backoff),
// `InvalidConfiguration` when the user must fix the spec, `Unrecoverable` when nothing in the
// spec can fix it. Any other exception escaping a plugin function becomes a `Transient`
// failure naming the exception (the host retries it, as it does a trap), and its stack goes
// to the host's log.

/** Why a call failed. Use one of the three subclasses. */
export class Failure extends Error {
  /** The contract's name of the kind (`failure` variant case). */
  get kind() {
    return 'transient';
  }
}

/** Retried with per-object exponential backoff (reason `TransientError`). */
export class Transient extends Failure {
  get name() {
    return 'Transient';
  }
}

/** Terminal: the user must fix the spec (reason `InvalidConfiguration`); no retry. */
export class InvalidConfiguration extends Failure {
  get kind() {
    return 'invalid-configuration';
  }
  get name() {
    return 'InvalidConfiguration';
  }
}

/** Terminal: nothing the user can do in the spec (reason `UnrecoverableError`); no retry. */
export class Unrecoverable extends Failure {
  get kind() {
    return 'unrecoverable';
  }
  get name() {
    return 'Unrecoverable';
  }
}

/**
 * The failure an exception stands for: itself when it is a `Failure`, else a `Transient`
 * naming the exception and the innermost frame of its stack.
 * @param {unknown} e
 * @returns {Failure}
 */
export function fromException(e) {
  if (e instanceof Failure) return e;
  if (e instanceof Error) {
    // The innermost frame: `fn@file:line:col` (SpiderMonkey) or `    at fn (file:line:col)` (V8).
    const frame = (e.stack || '').split('\n').find((l) => l.includes('@') || /^\s*at /.test(l));
    const where = frame ? ` (at ${frame.trim().replace(/^at\s+/, '').replace(/^.*@|^.*\(|\)$/g, '').replace(/^.*\//, '')})` : '';
    return new Transient(`plugin error: ${e.name}${e.message ? ': ' + e.message : ''}${where}`);
  }
  return new Transient(`plugin error: ${typeof e === 'string' ? e : JSON.stringify(e)}`);
}
