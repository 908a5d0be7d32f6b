// Unit tests of the SDK's export layer, under plain Node: the WIT shapes in and out.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  Actuator,
  Availability,
  InvalidConfiguration,
  ResourceHandler,
  Status,
  Transient,
  Unrecoverable,
  WaitEvent,
  ensure,
  exportActuator,
  http,
  testObject,
  testResource,
} from '../src/index.js';

class Thing extends Actuator {
  describe() {
    return {
      name: 'thing', group: 'example.dev', version: 'v1', kind: 'Thing', plural: 'things',
      resourceSchema: { type: 'object' }, observedSchema: { type: 'object' },
      dependencies: [{ name: 'parent', field: 'parentRef', kind: 'Parent' }],
      needsCredentials: true,
    };
  }
  parseSpec(spec) {
    if (typeof spec.name !== 'string') throw new Error('name must be a string');
    return { size: 1, ...spec };
  }
  async getById(obj, id) {
    if (id === 'gone') return undefined;
    if (id === 'bug') return obj.nothing.here;
    if (id === 'down') throw new Transient('server down');
    return { id, state: { spec: obj.spec, parent: obj.dependencyId('parent'), key: obj.credential('key') } };
  }
  create(obj) {
    if (obj.spec.name === 'later') return Status.waitingOnExternal(WaitEvent.READY, 'not yet', 1500.7);
    if (obj.spec.name === 'bad') throw new InvalidConfiguration('bad name');
    return { id: obj.spec.name, state: { size: obj.spec.size } };
  }
  delete() {}
  runReconciler(name, obj, res) {
    if (name === 'size') return res.state.size === obj.spec.size ? Status.done() : Status.needsRefresh('size updated');
    return super.runReconciler(name, obj, res);
  }
  available(obj, res) {
    return res.state.size > 1 ? Availability.AVAILABLE : [Availability.UNAVAILABLE, Status.waitingOnObject('Parent', 'p', WaitEvent.READY)];
  }
}

const actuator = exportActuator(Thing);
const obj = (spec, extra = {}) => ({
  name: 'o', namespace: 'ns', uid: 'u', generation: 3n, labels: [], annotations: [],
  spec: spec === undefined ? undefined : JSON.stringify(spec), statusId: undefined,
  dependencies: [{ name: 'parent', kind: 'Parent', object: 'p', id: 'p-1', observed: '{"a":1}' }],
  credentials: [['key', new TextEncoder().encode('s3cret')]],
  ...extra,
});
const rejection = async (p) => {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
};

test('describe gives schemas as JSON text and dependency defaults', () => {
  const d = actuator.describe();
  assert.equal(d.resourceSchema, '{"type":"object"}');
  assert.equal(d.filterSchema, undefined);
  assert.deepEqual(d.dependencies, [{ name: 'parent', field: 'parentRef', kind: 'Parent', forCreate: true, forDelete: false, guardDeletion: true }]);
  assert.equal(d.needsCredentials, true);
});

test('get-by-id parses the spec, reads dependencies and credentials, and serialises the state', async () => {
  const r = await actuator.getById(obj({ name: 'x' }), 'x');
  assert.deepEqual(JSON.parse(r.state), { spec: { size: 1, name: 'x' }, parent: 'p-1', key: 's3cret' });
  assert.equal(await actuator.getById(obj({ name: 'x' }), 'gone'), undefined);
});

test('failures become WIT failure values; a bug becomes a transient failure, not a trap', async () => {
  assert.deepEqual(await rejection(actuator.getById(obj({ name: 'x' }), 'down')), { tag: 'transient', val: 'server down' });
  const bug = await rejection(actuator.getById(obj({ name: 'x' }), 'bug'));
  assert.equal(bug.tag, 'transient');
  assert.match(bug.val, /^plugin error: TypeError/);
  assert.ok(globalThis.orchardLogs.some(([level, m]) => level === 'error' && m.includes('get-by-id')));
});

test('a spec the plugin refuses is an invalid configuration naming the object', async () => {
  const e = await rejection(actuator.getById(obj({ name: 7 }), 'x'));
  assert.deepEqual(e, { tag: 'invalid-configuration', val: 'o: spec.resource: name must be a string' });
  const notJson = await rejection(actuator.getById(obj(undefined, { spec: '{' }), 'x'));
  assert.equal(notJson.tag, 'invalid-configuration');
});

test('create returns a resource, or throws a WIT status for progress and failures', async () => {
  assert.deepEqual(await actuator.create(obj({ name: 'a', size: 2 })), { id: 'a', state: '{"size":2}' });
  assert.deepEqual(await rejection(actuator.create(obj({ name: 'later' }))), {
    progress: [{ tag: 'waiting-on-external', val: { event: 'ready', message: 'not yet', pollAfterMs: 1500 } }],
    failure: undefined,
  });
  assert.deepEqual(await rejection(actuator.create(obj({ name: 'bad' }))), {
    progress: [],
    failure: { tag: 'invalid-configuration', val: 'bad name' },
  });
});

test('delete returning nothing is done; unknown reconcilers are unrecoverable', async () => {
  const res = { id: 'a', state: '{"size":1}' };
  assert.deepEqual(await actuator.delete(obj({ name: 'a' }), res), { progress: [], failure: undefined });
  assert.deepEqual(await actuator.runReconciler('size', obj({ name: 'a', size: 2 }), res), {
    progress: [{ tag: 'needs-refresh', val: 'size updated' }],
    failure: undefined,
  });
  assert.deepEqual((await actuator.runReconciler('nope', obj({ name: 'a' }), res)).failure, {
    tag: 'unrecoverable',
    val: 'no reconciler named "nope"',
  });
});

test('available accepts a bare availability or a pair; observed falls back to null', async () => {
  const [a, s] = await actuator.available(obj({ name: 'a' }), { id: 'a', state: '{"size":1}' });
  assert.equal(a, 'unavailable');
  assert.deepEqual(s.progress, [{ tag: 'waiting-on-object', val: { target: { kind: 'Parent', name: 'p' }, event: 'ready' } }]);
  assert.equal((await actuator.available(obj({ name: 'a' }), { id: 'a', state: '{"size":2}' }))[0], 'available');
  assert.equal(await actuator.observed({ id: 'a', state: '{"size":2}' }), '{"size":2}');
  assert.equal(await actuator.observed({ id: 'a', state: 'not json' }), 'null');
});

// Returns failures instead of throwing them, and throws from a helper: the same statuses.
class Returns extends Thing {
  create(obj) {
    return obj.spec.name === 'bad' ? new InvalidConfiguration('bad name') : super.create(obj);
  }
  delete(obj) {
    obj.credential('apiKey'); // throws from a helper, anywhere in the handler
  }
  runReconciler() {
    return new Transient('server down');
  }
  available() {
    return new Unrecoverable('gone for good');
  }
}

test('testObject builds the WIT shape in one line', async () => {
  const o = testObject('o', {
    spec: { name: 'a', size: 2 }, credentials: { key: 's3cret' },
    dependencies: [{ name: 'parent', kind: 'Parent', object: 'p', id: 'p-1', observed: { a: 1 } }],
  });
  assert.deepEqual(o, {
    name: 'o', namespace: 'default', uid: '', generation: 0n, labels: [], annotations: [],
    spec: '{"name":"a","size":2}', statusId: undefined,
    dependencies: [{ name: 'parent', kind: 'Parent', object: 'p', id: 'p-1', observed: '{"a":1}' }],
    credentials: [['key', new TextEncoder().encode('s3cret')]],
  });
  assert.deepEqual(await actuator.create(o), { id: 'a', state: '{"size":2}' });
  assert.deepEqual(testObject('o', { labels: { a: 'b' }, spec: '{}', statusId: 'x' }).labels, [['a', 'b']]);
  assert.deepEqual(testResource('a', { size: 1 }), { id: 'a', state: '{"size":1}' });
});

test('a returned failure is the status a thrown one gives', async () => {
  const returns = exportActuator(Returns);
  const res = testResource('a', { size: 1 });
  const failed = (tag, val) => ({ progress: [], failure: { tag, val } });
  assert.deepEqual(await rejection(returns.create(testObject('o', { spec: { name: 'bad' } }))), failed('invalid-configuration', 'bad name'));
  assert.deepEqual(await returns.delete(testObject('o', { spec: { name: 'a' } }), res), failed('invalid-configuration', 'credentials Secret has no key "apiKey"'));
  assert.deepEqual(await returns.delete(testObject('o', { spec: { name: 'a' }, credentials: { apiKey: 'k' } }), res), { progress: [], failure: undefined });
  assert.deepEqual(await returns.runReconciler('size', testObject('o', { spec: { name: 'a' } }), res), failed('transient', 'server down'));
  assert.deepEqual(await returns.available(testObject('o', { spec: { name: 'a' } }), res), ['unknown', failed('unrecoverable', 'gone for good')]);
});

test('ensure creates, updates, deletes and leaves alone', async () => {
  class Limit extends ResourceHandler {
    constructor(desired, current) {
      super();
      this.desired = desired;
      this.value = current;
    }
    get name() {
      return 'limit';
    }
    isRequired() {
      return this.desired !== undefined;
    }
    current() {
      return this.value;
    }
    create() {
      this.value = this.desired;
    }
    update(current) {
      this.value = this.desired;
      return current !== this.desired;
    }
    delete() {
      this.value = undefined;
    }
  }
  assert.deepEqual(await ensure(new Limit(5, undefined)), Status.needsRefresh('limit created'));
  assert.deepEqual(await ensure(new Limit(5, 4)), Status.needsRefresh('limit updated'));
  assert.ok((await ensure(new Limit(5, 5))).isDone());
  assert.deepEqual(await ensure(new Limit(undefined, 5)), Status.needsRefresh('limit deleted'));
  assert.ok((await ensure(new Limit(undefined, undefined))).isDone());
});

test('responses map HTTP statuses to failures like the Rust SDK', () => {
  const r = (status) => new http.Response(status, [], new TextEncoder().encode('nope'));
  assert.equal(r(200).raiseForStatus('x').status, 200);
  assert.throws(() => r(400).raiseForStatus('x'), InvalidConfiguration);
  for (const s of [404, 409, 429, 500]) assert.throws(() => r(s).raiseForStatus('x'), Transient);
  assert.equal(http.basicAuth('a', 'b'), 'Basic YTpi');
  assert.equal(http.quote('a/b c'), 'a%2Fb%20c');
});
