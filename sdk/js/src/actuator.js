// The actuator base class a plugin extends, and `exportActuator`, which turns it into the
// object componentize-js exports as `orchard:actuator/actuator` (and, as its `conversion`,
// the `orchard:actuator/conversion` export of world versioned-actuator-plugin: the kind's API
// versions and the conversion between them, `versions` and `convert` below; as its
// `shortcuts`, the `orchard:shortcuts/shortcuts` export of world shortcut-actuator-plugin).
//
// The contract of each method is the one written in `wit/actuator.wit`; in short: every
// method MUST be idempotent; `create` MUST NOT do anything fallible after the primary resource
// exists; `getById` returns `undefined` when the resource is gone; `listForAdoption` returns
// `undefined` where adoption does not apply; `delete` SHOULD NOT fail when the resource is
// already gone (`deleteById`, for a plugin that declares that shortcut, MUST answer done
// then). Every method may be `async`.

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

  /**
   * Deletes the resource with this id, which nobody read first; done when no resource has
   * it. Called instead of `delete` when the host deletes by id (a `null` state): a plugin
   * that declares `{ deleteById: true }` MUST implement it (the default throws an
   * `Unrecoverable` failure naming what is missing). `delete` still gets a resource found by
   * adoption, so it may just `return this.deleteById(obj, res.id)`.
   * @param {ManagedObject} _obj
   * @param {string} id
   */
  deleteById(_obj, id) {
    throw new Unrecoverable(`this plugin declares the delete-by-id shortcut but does not implement deleteById (asked to delete ${id})`);
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

  /**
   * Every API version of the kind, oldest first, when it has several (WIT `conversion`,
   * since 0.1.2; see docs/schema-evolution.md). May also be given as a property (an array) or
   * a getter.
   *
   * - MUST be pure: the same answer every time, no I/O.
   * - MUST list `describe().version` with exactly the description's schemas: that is the
   *   version the host watches and every other method sees (the plugin's code works at one
   *   version; the apiserver converts the others through `convert`).
   * - Exactly one version MUST say `storage: true`; at most 16 versions.
   *
   * Schemas are objects (a TypeBox `Type.Object(...)` is one) or JSON text, as in
   * `describe`. Default: `[]` — the kind has one version, the description's, exactly as a
   * plugin built before 0.1.2.
   * @returns {ApiVersion[]}
   */
  versions() {
    return [];
  }

  /**
   * Converts the plugin's documents of one object from version `from` to version `to` (two
   * names `versions` lists; the SDK refuses any other with an `InvalidConfiguration`). `obj`
   * holds `resource` (`spec.resource`), `filter` (`spec.import.filter`) and `observed`
   * (`status.resource`) as parsed JSON (`undefined`: the object has none) and `annotations`
   * (`{key: value}`). Return the same shape at `to`, e.g. `{ ...obj, resource: changed }`;
   * `annotations` left out keeps the ones that came in. May be `async`.
   *
   * - MUST preserve every field: converting to another version and back MUST give the object
   *   that went in. What `to` cannot hold goes into an annotation under the kind's group
   *   (`<group>/…`), the only annotations the host writes back.
   * - MUST NOT do I/O: the host denies every outbound request during the call (deadline and
   *   memory cap as every call).
   * - SHOULD be a pure function of its arguments (the host may convert an object many times).
   *
   * A thrown failure (`InvalidConfiguration` for a document it cannot convert) fails the
   * apiserver's request for that object, naming the plugin, the object and the failure; any
   * other exception becomes a `Transient` failure as in every call. Default: an
   * `Unrecoverable` failure (one version: nothing to convert).
   * @param {Convertible} _obj
   * @param {string} from
   * @param {string} to
   * @returns {Convertible | Promise<Convertible>}
   */
  convert(_obj, from, to) {
    throw new Unrecoverable(`this plugin serves one API version (asked to convert ${from} to ${to})`);
  }

  /**
   * The calls this plugin's external system lets the host skip (WIT `orchard:shortcuts`; see
   * docs/concepts.md#shortcuts): `{ createRefusesDuplicates, deleteIsSynchronous,
   * deleteById }`, each `true` only when the system itself guarantees it (the conformance kit
   * checks each). May also be given as a property or a getter. MUST be pure.
   *
   * - `createRefusesDuplicates`: a create for identifying fields an existing resource has
   *   fails and changes nothing; the host then calls `listForAdoption` only after a failed
   *   create, not before every one. (A PUT that creates or replaces does not refuse.)
   * - `deleteIsSynchronous`: a `delete` that answers done has removed the resource; the host
   *   does not read it back.
   * - `deleteById`: deleting needs only the resource's id, and a delete of an id whose
   *   resource is gone answers done; the host deletes by `status.id` without reading the
   *   resource first, through `deleteById`, which the plugin MUST implement.
   *
   * Default: `{}` — none, the generic flow, safe on any system.
   * @returns {{createRefusesDuplicates?: boolean, deleteIsSynchronous?: boolean, deleteById?: boolean}}
   */
  shortcuts() {
    return {};
  }
}

/**
 * The names `Actuator.shortcuts` may answer: the WIT flags of `orchard:shortcuts` as
 * componentize-js names them (lower camel case: `delete-by-id` is `deleteById`).
 */
const SHORTCUTS = ['createRefusesDuplicates', 'deleteIsSynchronous', 'deleteById'];

/**
 * An actuator's declared shortcuts, checked: the WIT flags (`{createRefusesDuplicates,
 * deleteIsSynchronous, deleteById}`, all booleans). A name that is not a shortcut, or a value
 * that is not a boolean, throws a `TypeError` naming it (`shortcuts` has no failure to answer).
 * @param {Actuator} a
 */
export function shortcutsOf(a) {
  const declared = (typeof a.shortcuts === 'function' ? a.shortcuts() : a.shortcuts) ?? {};
  if (typeof declared !== 'object') {
    throw new TypeError(`${a.constructor.name}.shortcuts must be an object, got ${JSON.stringify(declared)}`);
  }
  for (const [name, value] of Object.entries(declared)) {
    if (!SHORTCUTS.includes(name)) {
      throw new TypeError(`${a.constructor.name}.shortcuts: ${JSON.stringify(name)} is not a shortcut (${SHORTCUTS.join(', ')})`);
    }
    if (typeof value !== 'boolean') {
      throw new TypeError(`${a.constructor.name}.shortcuts.${name} must be true or false, got ${JSON.stringify(value)}`);
    }
  }
  return Object.fromEntries(SHORTCUTS.map((name) => [name, declared[name] === true]));
}

/**
 * One API version of the kind (WIT `conversion.api-version`).
 * @typedef {object} ApiVersion
 * @property {string} name A Kubernetes version name: `v1`, `v1beta1`, `v2alpha3`…
 * @property {object | string} resourceSchema OpenAPI v3 schema of `spec.resource` at this version.
 * @property {object | string} [filterSchema] Of `spec.import.filter`; left out: no import by filter.
 * @property {object | string} observedSchema Of `status.resource` at this version.
 * @property {boolean} storage The version objects are stored at (exactly one says true).
 */

/**
 * The parts of one object that change shape between versions (WIT `conversion.convertible`),
 * parsed.
 * @typedef {object} Convertible
 * @property {any} [resource] `spec.resource`; `undefined` when the object has none.
 * @property {any} [filter] `spec.import.filter`; `undefined` when the object has none.
 * @property {any} [observed] `status.resource`; `undefined` when the object has none.
 * @property {Record<string, string>} annotations The object's annotations.
 */

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

const optionalJsonText = (v) => (v === undefined || v === null ? undefined : jsonText(v));

function witVersion(v) {
  if (!v || typeof v.name !== 'string' || v.name === '') {
    throw new TypeError(`an API version needs a non-empty string name, got ${JSON.stringify(v)}`);
  }
  for (const field of ['resourceSchema', 'observedSchema']) {
    if (v[field] === undefined || v[field] === null) throw new TypeError(`API version ${v.name} has no ${field}`);
  }
  return {
    name: v.name,
    resourceSchema: jsonText(v.resourceSchema),
    filterSchema: optionalJsonText(v.filterSchema),
    observedSchema: jsonText(v.observedSchema),
    storage: v.storage === true,
  };
}

/** The actuator's versions: its `versions()` method, or a `versions` array property. */
async function versionsOf(a) {
  const v = typeof a.versions === 'function' ? await a.versions() : a.versions;
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new TypeError(`versions must be an array, got ${JSON.stringify(v)}`);
  return v;
}

function witAnnotations(annotations) {
  const entries = annotations instanceof Map ? [...annotations] : Object.entries(annotations);
  return entries.map(([k, v]) => {
    if (typeof v !== 'string') throw new TypeError(`annotation ${k} must be a string, got ${JSON.stringify(v)}`);
    return [String(k), v];
  });
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
 * trap the call (but in `versions`, which has no failure to answer). The returned object also
 * carries, as `actuator.conversion` (not enumerable), the `orchard:actuator/conversion` export
 * the build adds: `versions()` and `convert(obj, from, to)` in their WIT shapes, over the
 * actuator's `versions` and `convert` (JSON parsed in, serialised out; a document that is not
 * JSON is an `InvalidConfiguration` naming the field).
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

  // What the host sends as the state when it deletes by id: JSON `null` (as text at the
  // boundary; `null` or `undefined` from a test calling the export directly).
  const noState = (raw) => raw.state === undefined || raw.state === null || (typeof raw.state === 'string' && raw.state.trim() === 'null');

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

  const functions = {
    describe() {
      const d = make().describe();
      return {
        name: d.name,
        group: d.group,
        version: d.version,
        kind: d.kind,
        plural: d.plural,
        resourceSchema: jsonText(d.resourceSchema),
        filterSchema: optionalJsonText(d.filterSchema),
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

    // By id when the actuator declares `deleteById` and the host sent no state (JSON `null`).
    async delete(obj, res) {
      try {
        const a = make();
        if (noState(res) && shortcutsOf(a).deleteById) return witStatus(await a.deleteById(object(a, obj), res.id));
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

  // The component's `orchard:actuator/conversion` export (world versioned-actuator-plugin,
  // which the build always targets): `actuator.conversion`, not enumerable, so that the
  // `actuator` export keeps the functions of its interface alone.
  const conversion = {
    // `versions` cannot answer a failure: an exception (a bug) is logged and traps the call,
    // so that the host refuses the plugin instead of serving fewer versions than it has.
    async versions() {
      try {
        return (await versionsOf(make())).map(witVersion);
      } catch (e) {
        try {
          log.error(`versions: ${e && e.stack ? `${e}\n${e.stack}` : String(e)}`);
        } catch {
          // the trap below says enough
        }
        throw e;
      }
    },

    convert(obj, from, to) {
      return result('convert', async (a) => {
        const listed = (await versionsOf(a)).map((v) => v && v.name);
        for (const v of listed.length > 0 ? [from, to] : []) {
          if (!listed.includes(v)) {
            throw new InvalidConfiguration(`version ${JSON.stringify(v)} is not one of the kind's versions (${listed.join(', ')})`);
          }
        }
        const parse = (what, text) => {
          if (text === undefined || text === null) return undefined;
          try {
            return JSON.parse(text);
          } catch (e) {
            throw new InvalidConfiguration(`${what} at version ${from} is not JSON: ${e.message}`);
          }
        };
        const input = {
          resource: parse('spec.resource', obj.resource),
          filter: parse('spec.import.filter', obj.filter),
          observed: parse('status.resource', obj.observed),
          annotations: Object.fromEntries(obj.annotations || []),
        };
        const kept = { ...input.annotations };
        const out = await a.convert(input, from, to);
        if (out === null || typeof out !== 'object') {
          throw new TypeError(`convert must return {resource, filter, observed, annotations}, got ${JSON.stringify(out)}`);
        }
        const text = (v) => (v === undefined ? undefined : JSON.stringify(v));
        return {
          resource: text(out.resource),
          filter: text(out.filter),
          observed: text(out.observed),
          annotations: witAnnotations(out.annotations === undefined || out.annotations === null ? kept : out.annotations),
        };
      });
    },
  };
  // The component's `orchard:shortcuts/shortcuts` export (world shortcut-actuator-plugin, which
  // the build always targets): `actuator.shortcuts`, not enumerable, like `conversion`.
  const shortcuts = {
    // No failure to answer: a declaration that breaks the rules (a bug) is logged and traps
    // the call, so that the host refuses the plugin instead of guessing what it meant.
    shortcuts() {
      try {
        return shortcutsOf(make());
      } catch (e) {
        try {
          log.error(`shortcuts: ${e && e.stack ? `${e}\n${e.stack}` : String(e)}`);
        } catch {
          // the trap below says enough
        }
        throw e;
      }
    },
  };
  Object.defineProperty(functions, 'shortcuts', { value: shortcuts, enumerable: false });
  return Object.defineProperty(functions, 'conversion', { value: conversion, enumerable: false });
}

/** The object that answers one version, for a module that exports no conversion of its own. */
const ONE_VERSION = Object.freeze({
  versions: () => [],
  convert(_obj, from, to) {
    throw { tag: 'unrecoverable', val: `this plugin serves one API version (asked to convert ${from} to ${to})` };
  },
});

/**
 * The `conversion` export of a plugin module (what the build exports as
 * `orchard:actuator/conversion`): the module's own `conversion` export if it has one, else
 * the one `exportActuator` made for its `actuator`, else one version (`versions()` = `[]`).
 * @param {{actuator?: object, conversion?: object}} module
 */
export function conversionOf(module) {
  return module.conversion ?? module.actuator?.conversion ?? ONE_VERSION;
}

/** Declares no shortcut, for a module that exports none of its own. */
const NO_SHORTCUTS = Object.freeze({
  shortcuts: () => ({ createRefusesDuplicates: false, deleteIsSynchronous: false, deleteById: false }),
});

/**
 * The `shortcuts` export of a plugin module (what the build exports as
 * `orchard:shortcuts/shortcuts`): the module's own `shortcuts` export if it has one, else the
 * one `exportActuator` made for its `actuator`, else none.
 * @param {{actuator?: object, shortcuts?: object}} module
 */
export function shortcutsExportOf(module) {
  return module.shortcuts ?? module.actuator?.shortcuts ?? NO_SHORTCUTS;
}
