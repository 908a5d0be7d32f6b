// Unit tests of `report`, under plain Node: the stub of `orchard:actuator/report` collects.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { report } from '../src/index.js';

test('connection details and drifts are collected natively, values as JSON text', () => {
  report.take();
  report.connectionDetail('password', 's3cret');
  report.connectionDetail('raw', new Uint8Array([0xff]));
  report.drift('kind', 'Native', 'Master');
  report.drift('ttl', undefined, 60);
  report.drift('apiKey', 'a', 'b', true);
  const got = report.take();
  assert.deepEqual(got.connectionDetails, [['password', new TextEncoder().encode('s3cret')], ['raw', new Uint8Array([0xff])]]);
  assert.deepEqual(got.drifts, [
    { field: 'kind', observed: '"Native"', desired: '"Master"', sensitive: false },
    { field: 'ttl', observed: undefined, desired: '60', sensitive: false },
    { field: 'apiKey', observed: '"a"', desired: '"b"', sensitive: true },
  ]);
  assert.deepEqual(report.take(), { connectionDetails: [], drifts: [] });
  assert.throws(() => report.connectionDetail('n', 7), TypeError);
});

test('diff compares dotted fields deeply and reports only on report()', () => {
  const observed = { kind: 'Native', settings: { ttl: 60 }, tags: ['a', 'b'], extra: { x: 1, y: 2 } };
  const desired = { kind: 'Native', settings: { ttl: 300 }, tags: ['a', 'b'], extra: { y: 2, x: 1 }, account: 'a' };
  const d = report.diff(observed, desired, ['kind', 'settings.ttl', 'tags', 'extra', 'account'], { sensitive: ['account'] });
  assert.deepEqual(d.fields, ['settings.ttl', 'account']);
  assert.equal(d.isEmpty(), false);
  assert.deepEqual(report.take().drifts, []);
  assert.equal(d.report(), 2);
  assert.deepEqual(report.take().drifts, [
    { field: 'settings.ttl', observed: '60', desired: '300', sensitive: false },
    { field: 'account', observed: undefined, desired: '"a"', sensitive: true },
  ]);
  assert.ok(new report.Diff().field('n', [1, { a: null }], [1, { a: null }]).isEmpty());
});
