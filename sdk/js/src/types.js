// The values of the actuator contract (`wit/actuator.wit`, interface `types`) as plain
// JavaScript, independent of the generated bindings (the WIT shapes are in `types/`, made by
// `npm run types`).

import { InvalidConfiguration, Transient } from './errors.js';

/** What a wait is for. */
export const WaitEvent = Object.freeze({
  CREATION: 'creation',
  READY: 'ready',
  DELETION: 'deletion',
  UPDATE: 'update',
});

/** Whether the external resource is ready for use. */
export const Availability = Object.freeze({
  AVAILABLE: 'available',
  UNAVAILABLE: 'unavailable',
  UNKNOWN: 'unknown',
});

/** Outcome of a step: done when it has neither progress nor failure. */
export class Status {
  /**
   * @param {Array<{type: 'waitingOnExternal', event: string, message: string, pollAfterMs: number}
   *   | {type: 'waitingOnObject', kind: string, name: string, event: string}
   *   | {type: 'needsRefresh', message: string}>} [progress]
   * @param {import('./errors.js').Failure} [failure]
   */
  constructor(progress = [], failure = undefined) {
    this.progress = progress;
    this.failure = failure;
  }

  /** Nothing left to do. */
  static done() {
    return new Status();
  }

  /** The external resource was changed and must be fetched again. */
  static needsRefresh(message) {
    return new Status([{ type: 'needsRefresh', message }]);
  }

  /** Poll the external system again after `pollAfterMs` milliseconds. */
  static waitingOnExternal(event, message, pollAfterMs) {
    return new Status([{ type: 'waitingOnExternal', event, message, pollAfterMs }]);
  }

  /** Wait for another object of this namespace; its watch brings the reconcile back. */
  static waitingOnObject(kind, name, event) {
    return new Status([{ type: 'waitingOnObject', kind, name, event }]);
  }

  /** A status carrying only a failure. */
  static failed(failure) {
    return new Status([], failure);
  }

  /** Whether nothing is pending. */
  isDone() {
    return this.progress.length === 0 && this.failure === undefined;
  }

  /** Both statuses together (the first failure wins). */
  and(other) {
    return new Status([...this.progress, ...other.progress], this.failure ?? other.failure);
  }
}

/** A field of `spec.resource` naming another object: needed for create, guarded. */
export function guardedDependency(name, field, kind, { forDelete = false } = {}) {
  return { name, field, kind, forCreate: true, forDelete, guardDeletion: true };
}


/**
 * The Kubernetes object being reconciled, as the actuator sees it: `spec` and each
 * dependency's `observed` are parsed JSON (`undefined` when absent).
 */
export class ManagedObject {
  constructor(raw) {
    this.name = raw.name;
    this.namespace = raw.namespace;
    this.uid = raw.uid;
    this.generation = Number(raw.generation);
    this.labels = Object.fromEntries(raw.labels || []);
    this.annotations = Object.fromEntries(raw.annotations || []);
    this.spec = raw.spec;
    this.statusId = raw.statusId;
    this.dependencies = (raw.dependencies || []).map((d) => ({
      name: d.name,
      kind: d.kind,
      object: d.object,
      id: d.id,
      observed: d.observed === undefined ? undefined : JSON.parse(d.observed),
    }));
    /** @type {Map<string, Uint8Array>} */
    this.credentials = new Map(raw.credentials || []);
  }

  /** The spec, or an `InvalidConfiguration` when the object has none. */
  requireSpec() {
    if (this.spec === undefined || this.spec === null) {
      throw new InvalidConfiguration('spec.resource is required');
    }
    return this.spec;
  }

  /** The resolved dependency declared as `name`. */
  dependency(name) {
    const d = this.dependencies.find((d) => d.name === name);
    if (!d) throw new Transient(`dependency ${name} was not resolved`);
    return d;
  }

  /** The id of the resolved dependency declared as `name`. */
  dependencyId(name) {
    const d = this.dependency(name);
    if (d.id === undefined) throw new Transient(`${d.kind} ${d.object} has no status.id yet`);
    return d.id;
  }

  /** A credentials value as text; `fallback` (when given) if the Secret has no such key. */
  credential(key, fallback = undefined) {
    const raw = this.credentials.get(key);
    if (raw === undefined) {
      if (fallback !== undefined) return fallback;
      throw new InvalidConfiguration(`credentials Secret has no key ${JSON.stringify(key)}`);
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch {
      throw new InvalidConfiguration(`credentials key ${JSON.stringify(key)} is not UTF-8`);
    }
  }
}


const toBytes = (v) => (typeof v === 'string' ? new TextEncoder().encode(v) : v);
const jsonOrText = (v) => (v === undefined || v === null || typeof v === 'string' ? v ?? undefined : JSON.stringify(v));

/**
 * A test object in one line, in the shape the host sends (what the functions of
 * `exportActuator(...)` take): `spec` and each dependency's `observed` as a JSON value (or JSON
 * text), credentials as text (or bytes), namespace `default`, the rest empty:
 *
 *   testObject('www', { spec: { name: 'a' }, credentials: { apiKey: 'k' }, statusId: 'x' })
 */
export function testObject(name, {
  namespace = 'default', uid = '', generation = 0, labels = {}, annotations = {}, spec,
  statusId, dependencies = [], credentials = {},
} = {}) {
  return {
    name, namespace, uid, generation: BigInt(generation),
    labels: Object.entries(labels), annotations: Object.entries(annotations),
    spec: jsonOrText(spec), statusId,
    dependencies: dependencies.map((d) => ({
      name: d.name, kind: d.kind, object: d.object, id: d.id, observed: jsonOrText(d.observed),
    })),
    credentials: Object.entries(credentials).map(([k, v]) => [k, toBytes(v)]),
  };
}

/** A test resource in the shape the host sends: `state` as a JSON value (or JSON text). */
export function testResource(id, state) {
  return { id, state: typeof state === 'string' ? state : JSON.stringify(state ?? null) };
}

/**
 * A test convertible in the shape the host sends to `conversion.convert` (what
 * `actuator.conversion.convert` takes): `resource`, `filter`, `observed` as JSON values (or
 * JSON text; `undefined`: absent), `annotations` as `{key: value}`:
 *
 *   actuator.conversion.convert(testConvertible({ resource: { hosts: ['a'] } }), 'v1alpha1', 'v1beta1')
 */
export function testConvertible({ resource, filter, observed, annotations = {} } = {}) {
  return {
    resource: jsonOrText(resource),
    filter: jsonOrText(filter),
    observed: jsonOrText(observed),
    annotations: Object.entries(annotations),
  };
}
