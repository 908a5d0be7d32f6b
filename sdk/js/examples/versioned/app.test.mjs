// The two-version example under plain Node (`npm test` in sdk/js runs it): both directions,
// the round trips, and a bad annotation.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { testConvertible } from 'orchard-sdk';

import { WEIGHTS, actuator } from './app.js';

const { versions, convert } = actuator.conversion;
const parsed = (c) => ({
  resource: c.resource === undefined ? undefined : JSON.parse(c.resource),
  filter: c.filter === undefined ? undefined : JSON.parse(c.filter),
  observed: c.observed === undefined ? undefined : JSON.parse(c.observed),
  annotations: Object.fromEntries(c.annotations),
});
const rejection = async (p) => {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
};

const beta = {
  resource: { name: 'web', servers: [{ host: 'a.example' }, { host: 'b.example', weight: 5 }] },
  filter: { name: 'web' },
  observed: { servers: [{ host: 'a.example' }] },
  annotations: { team: 'web' },
};
const alpha = {
  resource: { name: 'web', hosts: ['a.example', 'b.example'] },
  filter: { name: 'web' },
  observed: { hosts: ['a.example'] },
  annotations: { team: 'web', [WEIGHTS]: '{"b.example":5}' },
};

test('two versions, oldest first; the description is v1beta1, the storage version', async () => {
  const vs = await versions();
  assert.deepEqual(vs.map((v) => [v.name, v.storage]), [['v1alpha1', false], ['v1beta1', true]]);
  const d = actuator.describe();
  const described = vs.find((v) => v.name === d.version);
  assert.equal(described.resourceSchema, d.resourceSchema);
  assert.equal(described.filterSchema, d.filterSchema);
  assert.equal(described.observedSchema, d.observedSchema);
  assert.deepEqual(Object.keys(JSON.parse(vs[0].resourceSchema).properties), ['name', 'hosts']);
});

test('v1beta1 -> v1alpha1 keeps the weights in the annotation, and back', async () => {
  const down = parsed(await convert(testConvertible(beta), 'v1beta1', 'v1alpha1'));
  assert.deepEqual(down, alpha);
  assert.deepEqual(parsed(await convert(testConvertible(down), 'v1alpha1', 'v1beta1')), beta);
});

test('round trips from either version give the object back', async () => {
  const cases = [
    [alpha, 'v1alpha1', 'v1beta1'],
    [beta, 'v1beta1', 'v1alpha1'],
    [{ resource: { name: 'x' }, annotations: {} }, 'v1alpha1', 'v1beta1'],
    [{ resource: { name: 'x', servers: [] }, annotations: {} }, 'v1beta1', 'v1alpha1'],
    [{ observed: { servers: [{ host: 'h' }] }, annotations: { a: 'b' } }, 'v1beta1', 'v1alpha1'],
  ];
  for (const [obj, from, to] of cases) {
    const there = await convert(testConvertible(obj), from, to);
    const back = parsed(await convert(there, to, from));
    assert.deepEqual(back, parsed(testConvertible(obj)), `${from} -> ${to} -> ${from}`);
  }
});

test('an annotation that is not a map of weights is an invalid configuration naming it', async () => {
  const bad = { ...alpha, annotations: { [WEIGHTS]: '[1]' } };
  const e = await rejection(convert(testConvertible(bad), 'v1alpha1', 'v1beta1'));
  assert.equal(e.tag, 'invalid-configuration');
  assert.match(e.val, /annotation examples\.orchard\.dev\/v1beta1-server-weights is not a JSON map/);
});
