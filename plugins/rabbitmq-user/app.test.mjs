// Unit tests of the plugin under plain Node (`npm test` in sdk/js runs them): a fake RabbitMQ
// management API behind `fetch`, reports read with `report.take()`.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { report, testObject, testResource } from 'orchard-sdk';

import { actuator } from './app.js';

/** A fake management API: users by name; records every request. */
function fakeRabbit(users = {}) {
  const calls = [];
  globalThis.fetch = async (url, { method, body }) => {
    const path = decodeURIComponent(new URL(url).pathname);
    calls.push([method, path, body === undefined ? undefined : JSON.parse(body)]);
    const user = path.match(/^\/api\/users\/([^/]+)$/);
    if (user && method === 'GET') {
      const u = users[user[1]];
      return u ? Response.json(u) : new Response('', { status: 404 });
    }
    if (user && method === 'PUT') {
      const b = JSON.parse(body);
      users[user[1]] = { name: user[1], tags: b.tags, password_hash: b.password ? HASH : b.password_hash, hashing_algorithm: b.hashing_algorithm };
      return new Response(null, { status: 201 });
    }
    if (/^\/api\/users\/[^/]+\/permissions$/.test(path)) return Response.json([]);
    return new Response(null, { status: 204 });
  };
  return calls;
}

// A salted SHA-256 hash of no password the tests use.
const HASH = btoa(String.fromCharCode(...new Uint8Array(36)));
const CREDS = { url: 'http://rabbit:15672', username: 'admin', password: 'admin', appPassword: 'app' };
const obj = (spec) => testObject('u', { spec, credentials: CREDS });
const text = (bytes) => new TextDecoder().decode(bytes);

test('generatePassword: create sets a strong random password and reports it, nowhere else', async () => {
  report.take();
  const calls = fakeRabbit();
  const res = await actuator.create(obj({ name: 'app', generatePassword: true }));
  const details = Object.fromEntries(report.take().connectionDetails.map(([k, v]) => [k, text(v)]));
  assert.deepEqual(Object.keys(details), ['username', 'password', 'url']);
  assert.equal(details.username, 'app');
  assert.equal(details.url, 'http://rabbit:15672');
  assert.match(details.password, /^[A-Za-z0-9]{32}$/);
  assert.deepEqual(calls, [['PUT', '/api/users/app', { tags: '', password: details.password }]]);
  assert.deepEqual(JSON.parse(res.state), { name: 'app', tags: [], hasPassword: true, permissions: [] });
  assert.ok(!res.state.includes(details.password));
  assert.ok(!(await actuator.observed(res)).includes(details.password));
  assert.ok(!JSON.stringify(globalThis.orchardLogs).includes(details.password));
  // Another create, another password.
  await actuator.create(obj({ name: 'app2', generatePassword: true }));
  assert.notEqual(text(report.take().connectionDetails[1][1]), details.password);
});

test('generatePassword: later passes keep the password; a user left without one gets a new one', async () => {
  report.take();
  const users = { app: { name: 'app', tags: '', password_hash: HASH, hashing_algorithm: 'rabbit_password_hashing_sha256' } };
  const calls = fakeRabbit(users);
  const res = testResource('app', { name: 'app', tags: [], hasPassword: true, permissions: [] });
  const spec = { name: 'app', generatePassword: true };
  assert.deepEqual(await actuator.runReconciler('password', obj(spec), res), { progress: [], failure: undefined });
  assert.deepEqual(calls.map(([m]) => m), ['GET']);
  assert.deepEqual(report.take(), { connectionDetails: [], drifts: [] });
  users.app.password_hash = '';
  const got = await actuator.runReconciler('password', obj(spec), res);
  assert.deepEqual(got.progress, [{ tag: 'needs-refresh', val: 'password generated' }]);
  const r = report.take();
  assert.deepEqual(r.connectionDetails.map(([k]) => k), ['username', 'password', 'url']);
  assert.deepEqual(r.drifts, [{ field: 'hasPassword', observed: 'false', desired: 'true', sensitive: false }]);
});

test('passwordKey and generatePassword together are an invalid configuration', async () => {
  fakeRabbit();
  const e = await actuator.create(obj({ name: 'app', passwordKey: 'appPassword', generatePassword: true })).catch((s) => s);
  assert.deepEqual(e.failure, {
    tag: 'invalid-configuration',
    val: 'passwordKey and generatePassword exclude each other: set one of them (or neither, for a user without a password)',
  });
  const schema = JSON.parse(actuator.describe().resourceSchema);
  assert.equal(schema.properties.generatePassword.type, 'boolean');
  assert.match(schema['x-kubernetes-validations'][0].message, /exclude each other/);
  // generatePassword: false is no generated password.
  const calls = fakeRabbit();
  await actuator.create(obj({ name: 'app', passwordKey: 'appPassword', generatePassword: false }));
  assert.deepEqual(calls[0][2], { tags: '', password: 'app' });
  assert.deepEqual(report.take().connectionDetails, []);
});

test('reconcilers report each field they change back as a drift', async () => {
  report.take();
  fakeRabbit({ app: { name: 'app', tags: 'x', password_hash: HASH, hashing_algorithm: 'rabbit_password_hashing_sha256' } });
  const res = testResource('app', {
    name: 'app', tags: ['x'], hasPassword: true,
    permissions: [{ vhost: 'old', configure: '.*', write: '.*', read: '.*' }],
  });
  const spec = { name: 'app', tags: ['monitoring'], passwordKey: 'appPassword', permissions: [{ vhost: '/', read: '^q$' }] };
  for (const r of ['tags', 'password', 'permissions']) await actuator.runReconciler(r, obj(spec), res);
  const { drifts, connectionDetails } = report.take();
  assert.deepEqual(connectionDetails, []);
  assert.deepEqual(drifts, [
    { field: 'tags', observed: '["x"]', desired: '["monitoring"]', sensitive: false },
    { field: 'password', observed: '"another password"', desired: '"credentials key appPassword"', sensitive: true },
    { field: 'permissions./', observed: undefined, desired: '{"vhost":"/","configure":".*","write":".*","read":"^q$"}', sensitive: false },
    { field: 'permissions.old', observed: '{"vhost":"old","configure":".*","write":".*","read":".*"}', desired: undefined, sensitive: false },
  ]);
  // As desired: nothing to report.
  await actuator.runReconciler('tags', obj({ name: 'app', tags: ['x'] }), res);
  assert.deepEqual(report.take().drifts, []);
});

// The schemas as they were written by hand before TypeBox built them: the CRD must not change
// (objects compared whatever their key order).
const PATTERN = { type: 'string', maxLength: 1024, default: '.*' };
const HAND_WRITTEN = {
  resourceSchema: {
    type: 'object',
    required: ['name'],
    'x-kubernetes-validations': [{ rule: '!has(self.passwordKey) || !has(self.generatePassword) || !self.generatePassword', message: 'passwordKey and generatePassword exclude each other: set one of them (or neither, for a user without a password)' }],
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 255, 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'name is immutable' }] },
      tags: { type: 'array', maxItems: 16, items: { type: 'string', maxLength: 64, pattern: '^[^,]+$' } },
      passwordKey: { type: 'string', maxLength: 253 },
      generatePassword: {
        type: 'boolean',
        description: 'Instead of passwordKey: generate a password at creation, written to the connection Secret (spec.writeConnectionSecretTo) with username and url.',
      },
      permissions: {
        type: 'array', maxItems: 64, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['vhost'],
        items: { type: 'object', required: ['vhost'], properties: { vhost: { type: 'string', maxLength: 255 }, configure: PATTERN, write: PATTERN, read: PATTERN } },
      },
    },
  },
  filterSchema: { type: 'object', minProperties: 1, properties: { name: { type: 'string', maxLength: 255 }, tag: { type: 'string', maxLength: 64 } } },
  observedSchema: {
    type: 'object',
    properties: {
      name: { type: 'string' },
      tags: { type: 'array', items: { type: 'string' } },
      hasPassword: { type: 'boolean' },
      permissions: { type: 'array', items: { type: 'object', properties: { vhost: { type: 'string' }, configure: { type: 'string' }, write: { type: 'string' }, read: { type: 'string' } } } },
    },
  },
};

test('the TypeBox schemas are the hand-written ones; one API version', async () => {
  const d = actuator.describe();
  for (const [field, schema] of Object.entries(HAND_WRITTEN)) assert.deepStrictEqual(JSON.parse(d[field]), schema, field);
  assert.deepEqual(await actuator.conversion.versions(), []);
});

test('it declares delete-is-synchronous and delete-by-id (RabbitMQ deletes a user by its name before its DELETE answers)', () => {
  assert.deepEqual(actuator.shortcuts.shortcuts(), { createRefusesDuplicates: false, deleteIsSynchronous: true, deleteById: true });
});

test('a delete by id is one DELETE of the user by its name, done, and done again once it is gone', async () => {
  const calls = fakeRabbit({ app: { name: 'app', tags: '' } });
  // The host's delete by id: no state, only the id; no read before or after.
  assert.deepEqual(await actuator.delete(obj({ name: 'app' }), testResource('app')), { progress: [], failure: undefined });
  assert.deepEqual(calls, [['DELETE', '/api/users/app', undefined]]);
  calls.length = 0;
  globalThis.fetch = async (url, { method }) => {
    calls.push([method, decodeURIComponent(new URL(url).pathname)]);
    return new Response('{"error":"Object Not Found","reason":"Not Found"}', { status: 404 });
  };
  assert.deepEqual(await actuator.delete(obj({ name: 'app' }), testResource('app')), { progress: [], failure: undefined });
  assert.deepEqual(calls, [['DELETE', '/api/users/app']]);
});

test('a delete by id that RabbitMQ refuses is a failure, not done', async () => {
  globalThis.fetch = async () => new Response('down', { status: 503 });
  const s = await actuator.delete(obj({ name: 'app' }), testResource('app'));
  assert.equal(s.failure?.tag, 'transient');
});
