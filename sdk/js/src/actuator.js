// The actuator base class a plugin extends, and `exportActuator`, which turns it into the
// object componentize-js exports as `orchard:actuator/actuator`.
//
// The contract of each method is the one written in `wit/actuator.wit`; in short: every
// method MUST be idempotent; `create` MUST NOT do anything fallible after the primary resource
// exists; `getById` returns `undefined` when the resource is gone; `listForAdoption` returns
// `undefined` where adoption does not apply; `delete` SHOULD NOT fail when the resource is
// already gone. Every method may be `async`.

import { Failure, InvalidConfiguration, Transient, Unrecoverable, fromException } from './errors.js';
import * as log from './log.js';
import { Availability, ManagedObject, Status } from './types.js';

/**
 * Everything specific to one kind of external resource. A new instance is made for every
 * call: keep no state in it. Failures are thrown (`Transient`, `InvalidConfiguration`,
 * `Unrecoverable`) from anywhere in a method, helpers included; the methods that answer a
 * status (`create`, `delete`, `runReconciler`, `available`) may also return the failure
 * instead of throwing it: the host sees the same status either way. Resources are plain
 * objects `{ id, state }`; `state` is any JSON value.
 */
export class Actuator {
  /** The managed kind and its schemas (objects or JSON text). MUST be pure. */
  describe() {
    throw new Error('describe is not implemented');
  }

  /**
   * `spec.resource` (parsed JSON) as the plugin wants it: validate and fill defaults here.
   * Throw to refuse it; the SDK makes that an `InvalidConfiguration`. Identity by default.
   */
  parseSpec(spec) {
    return spec;
  }

  /** `spec.import.filter` (parsed JSON); the same rules as `parseSpec`. */
  parseFilter(filter) {
    return filter;
  }

  /** The resource with this id; `undefined` when it does not exist. */
  getById(_obj, _id) {
    throw new Error('getById is not implemented');
  }

  /** Resources this object would have created; `undefined` where adoption does not apply. */
  listForAdoption(_obj) {
    return undefined;
  }

  /** Resources matching an import filter, matched exactly. */
  listForImport(_obj, _filter) {
    throw new InvalidConfiguration('this plugin does not support import by filter');
  }

  /**
   * Creates the primary resource (nothing fallible after it exists). Return a `Status` with
   * progress instead to create nothing yet (retried).
   */
  create(_obj) {
    throw new Error('create is not implemented');
  }

  /** Deletes the resource; done (`undefined` or `Status.done()`) when it is already gone. */
  delete(_obj, _res) {
    throw new Error('delete is not implemented');
  }

  /** Names of the post-create steps, in order. */
  reconcilers(_obj, _res) {
    return [];
  }

  /** Runs the post-create step `name`; return `Status.needsRefresh(...)` after a change. */
  runReconciler(name, _obj, _res) {
    throw new Unrecoverable(`no reconciler named ${JSON.stringify(name)}`);
  }

  /** Whether the resource is ready: an `Availability`, or `[availability, status]`. */
  available(_obj, _res) {
    return Availability.AVAILABLE;
  }

  /** `status.resource` (a JSON value); the state itself by default. */
  observed(res) {
    return res.state;
  }
}

// -- conversions to and from the WIT shapes ------------------------------------------------

function witFailure(f) {
  return { tag: f.kind, val: f.message };
}

const PROGRESS = {
  waitingOnExternal: (p) => ({
    tag: 'waiting-on-external',
    val: {
      event: p.event,
      message: p.message,
      pollAfterMs: Math.max(0, Math.min(Math.trunc(p.pollAfterMs), 0xffffffff)),
    },
  }),
  waitingOnObject: (p) => ({
    tag: 'waiting-on-object',
    val: { target: { kind: p.kind, name: p.name }, event: p.event },
  }),
  needsRefresh: (p) => ({ tag: 'needs-refresh', val: p.message }),
};

function witStatus(s) {
  if (s === undefined || s === null) s = Status.done();
  if (s instanceof Failure) s = Status.failed(s);
  if (!(s instanceof Status)) throw new TypeError(`expected a Status, got ${JSON.stringify(s)}`);
  return {
    progress: s.progress.map((p) => {
      const convert = PROGRESS[p.type];
      if (!convert) throw new TypeError(`unknown progress ${JSON.stringify(p)}`);
      return convert(p);
    }),
    failure: s.failure === undefined ? undefined : witFailure(s.failure),
  };
}

function witResource(r) {
  if (!r || typeof r.id !== 'string' || r.id === '') {
    throw new TypeError(`a resource needs a non-empty string id, got ${JSON.stringify(r)}`);
  }
  return { id: r.id, state: JSON.stringify(r.state ?? null) };
}

function jsonText(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function report(fn, e) {
  const f = fromException(e);
  if (!(e instanceof Failure)) {
    try {
      log.error(`${fn}: unexpected exception: ${e && e.stack ? `${e}\n${e.stack}` : String(e)}`);
    } catch {
      // logging must never turn a failure into a trap
    }
  }
  return f;
}

/**
 * The object to export as `actuator` from the plugin's entry module:
 *
 *   export const actuator = exportActuator(UserActuator);
 *
 * Every exception a plugin throws becomes the contract's failure value: nothing escapes to
 * trap the call.
 * @param {new () => Actuator} Impl
 */
export function exportActuator(Impl) {
  const make = () => new Impl();

  function object(a, raw) {
    const obj = new ManagedObject(raw);
    if (obj.spec !== undefined) {
      let value;
      try {
        value = JSON.parse(obj.spec);
      } catch (e) {
        throw new InvalidConfiguration(`${obj.name}: spec.resource is not JSON: ${e.message}`);
      }
      try {
        obj.spec = a.parseSpec(value, obj);
      } catch (e) {
        if (e instanceof Failure) throw e;
        throw new InvalidConfiguration(`${obj.name}: spec.resource: ${e.message}`);
      }
    }
    return obj;
  }

  function resource(raw) {
    try {
      return { id: raw.id, state: JSON.parse(raw.state) };
    } catch (e) {
      throw new Transient(`state of external resource ${raw.id}: ${e.message}`);
    }
  }

  // Result-returning functions throw the WIT error value; componentize-js makes it `err`.
  async function result(fn, body) {
    try {
      return await body(make());
    } catch (e) {
      throw witFailure(report(fn, e));
    }
  }

  return {
    describe() {
      const d = make().describe();
      return {
        name: d.name,
        group: d.group,
        version: d.version,
        kind: d.kind,
        plural: d.plural,
        resourceSchema: jsonText(d.resourceSchema),
        filterSchema: d.filterSchema === undefined || d.filterSchema === null ? undefined : jsonText(d.filterSchema),
        observedSchema: jsonText(d.observedSchema),
        dependencies: (d.dependencies || []).map((x) => ({
          name: x.name,
          field: x.field,
          kind: x.kind,
          forCreate: x.forCreate ?? true,
          forDelete: x.forDelete ?? false,
          guardDeletion: x.guardDeletion ?? true,
        })),
        needsCredentials: Boolean(d.needsCredentials),
      };
    },

    getById(obj, id) {
      return result('get-by-id', async (a) => {
        const r = await a.getById(object(a, obj), id);
        return r === undefined || r === null ? undefined : witResource(r);
      });
    },

    listForAdoption(obj) {
      return result('list-for-adoption', async (a) => {
        const found = await a.listForAdoption(object(a, obj));
        return found === undefined || found === null ? undefined : found.map(witResource);
      });
    },

    listForImport(obj, filter) {
      return result('list-for-import', async (a) => {
        const o = object(a, obj);
        let f;
        try {
          f = a.parseFilter(JSON.parse(filter), o);
        } catch (e) {
          if (e instanceof Failure) throw e;
          throw new InvalidConfiguration(`${o.name}: spec.import.filter: ${e.message}`);
        }
        return (await a.listForImport(o, f)).map(witResource);
      });
    },

    async create(obj) {
      let out;
      try {
        const a = make();
        out = await a.create(object(a, obj));
        if (out instanceof Failure) out = Status.failed(out);
        if (out instanceof Status) {
          if (out.isDone()) throw new TypeError('create returned a done Status without a resource');
        } else {
          return witResource(out);
        }
      } catch (e) {
        out = Status.failed(report('create', e));
      }
      throw witStatus(out);
    },

    async delete(obj, res) {
      try {
        const a = make();
        return witStatus(await a.delete(object(a, obj), resource(res)));
      } catch (e) {
        return witStatus(Status.failed(report('delete', e)));
      }
    },

    reconcilers(obj, res) {
      return result('reconcilers', async (a) => (await a.reconcilers(object(a, obj), resource(res))).map(String));
    },

    async runReconciler(name, obj, res) {
      try {
        const a = make();
        return witStatus(await a.runReconciler(name, object(a, obj), resource(res)));
      } catch (e) {
        return witStatus(Status.failed(report(`run-reconciler ${name}`, e)));
      }
    },

    async available(obj, res) {
      try {
        const a = make();
        const out = await a.available(object(a, obj), resource(res));
        if (out instanceof Failure) return [Availability.UNKNOWN, witStatus(out)];
        if (typeof out === 'string') return [out, witStatus(Status.done())];
        return [out[0], witStatus(out[1])];
      } catch (e) {
        return [Availability.UNKNOWN, witStatus(Status.failed(report('available', e)))];
      }
    },

    // A state that cannot be read, or an exception, gives `null`, which the host shows as an
    // empty `status.resource`.
    async observed(res) {
      try {
        return JSON.stringify((await make().observed(resource(res))) ?? null);
      } catch (e) {
        report('observed', e);
        return 'null';
      }
    },
  };
}
