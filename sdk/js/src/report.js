// What a plugin reports beside its answers (`orchard:actuator/report`, WIT 0.1.1, package 0.1.2).
//
//   import { report } from 'orchard-sdk';
//   report.connectionDetail('password', password);               // a string or a Uint8Array
//   report.drift('kind', 'Native', 'Master');                     // values: anything JSON
//   const d = report.diff(observed, desired, ['tags', 'settings.ttl']);
//   if (!d.isEmpty()) { /* change the resource back */ d.report(); }
//
// The host writes the connection details of a pass into the Secret named by
// `spec.writeConnectionSecretTo.name` (owned by the object), never into status, Events or logs;
// it records drifts in an Event `DriftCorrected` and in `status.drift`. Under plain Node (unit
// tests, `scripts/wit-stub.mjs`) reports are collected in-process: `report.take()` returns and
// empties them.

import { connectionDetail as witDetail, drift as witDrift } from 'orchard:actuator/report@0.1.2';

/** JSON text of `value`; `undefined` (absent) for `undefined` or what does not serialise. */
function toJson(value) {
  if (value === undefined) return undefined;
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** Reports a connection detail: `key` a Secret data key, `value` a string (UTF-8) or bytes. */
export function connectionDetail(key, value) {
  let bytes;
  if (typeof value === 'string') bytes = new TextEncoder().encode(value);
  else if (value instanceof Uint8Array) bytes = value;
  else if (value instanceof ArrayBuffer) bytes = new Uint8Array(value);
  else throw new TypeError(`connection detail ${key}: the value must be a string or bytes`);
  witDetail(String(key), bytes);
}

/**
 * Reports a drift: `field` was `observed` and was changed back to `desired` (any JSON values;
 * `undefined`: absent). `sensitive` values are masked by the host.
 */
export function drift(field, observed, desired, sensitive = false) {
  witDrift(String(field), toJson(observed), toJson(desired), Boolean(sensitive));
}

function lookup(value, path) {
  let v = value;
  for (const key of String(path).split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return undefined;
    v = v[key];
  }
  return v;
}

/** Deep equality of JSON values (object keys in any order). */
function same(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
}

/** Differences between observed and desired values, reported by `report()` (not before). */
export class Diff {
  constructor(drifts = []) {
    /** `[{field, observed, desired, sensitive}]`, values as given. */
    this.drifts = drifts;
  }

  /** Adds `field` when `observed` and `desired` differ (deep JSON equality); chainable. */
  field(field, observed, desired, sensitive = false) {
    if (!same(observed, desired)) this.drifts.push({ field, observed, desired, sensitive });
    return this;
  }

  /** Whether observed and desired agree on every field. */
  isEmpty() {
    return this.drifts.length === 0;
  }

  /** The names of the fields that differ, in order. */
  get fields() {
    return this.drifts.map((d) => d.field);
  }

  /** Reports every difference as a drift; returns how many. */
  report() {
    for (const d of this.drifts) drift(d.field, d.observed, d.desired, d.sensitive);
    return this.drifts.length;
  }
}

/**
 * Compares `observed` and `desired` (objects) on each of `fields`, a dotted path into nested
 * objects (`settings.ttl`); a field missing on one side is absent there. `sensitive` names the
 * fields whose values the host masks. Reports nothing until `.report()`.
 */
export function diff(observed, desired, fields, { sensitive = [] } = {}) {
  const d = new Diff();
  for (const f of fields) d.field(f, lookup(observed, f), lookup(desired, f), sensitive.includes(f));
  return d;
}

/**
 * Under plain Node (the SDK's test stub): what was reported since the last `take()`, as
 * `{connectionDetails: [[key, Uint8Array]], drifts: [{field, observed, desired, sensitive}]}`
 * (values as JSON text, `undefined` for absent), and empties it. In a component: always empty.
 */
export function take() {
  const r = globalThis.orchardReports ?? { connectionDetails: [], drifts: [] };
  const got = { connectionDetails: [...r.connectionDetails], drifts: [...r.drifts] };
  r.connectionDetails.length = 0;
  r.drifts.length = 0;
  return got;
}
