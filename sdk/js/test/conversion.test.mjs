// Unit tests of the SDK's `conversion` export (world versioned-actuator-plugin), under plain
// Node: the WIT shapes in and out of `actuator.conversion`.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { conversionOf } from '../src/actuator.js';
import { Actuator, InvalidConfiguration, Transient, Type, exportActuator, schema, testConvertible } from '../src/index.js';

class OneVersion extends Actuator {
  describe() {
    return { name: 'one', group: 'example.dev', version: 'v1', kind: 'One', plural: 'ones', resourceSchema: { type: 'object' }, observedSchema: { type: 'object' } };
  }
}

const V1 = { name: 'v1', resourceSchema: Type.Object({ size: Type.Integer() }), observedSchema: '{"type":"object"}', storage: false };
const V2 = {
  name: 'v2',
  resourceSchema: Type.Object({ size: Type.Object({ value: Type.Integer(), unit: Type.Optional(Type.String()) }) }),
  filterSchema: { type: 'object' },
  observedSchema: { type: 'object' },
  storage: true,
};

// v1 `{size: n}` <-> v2 `{size: {value: n, unit}}`; the unit waits in an annotation at v1.
class TwoVersions extends OneVersion {
  versions() {
    return [V1, V2];
  }
  convert(obj, from, to) {
    const r = obj.resource;
    if (r?.size === 'boom') throw new Transient('boom');
    if (r?.size === 'bug') return r.nothing.here;
    if (r?.size === 'nothing') return undefined;
    if (r?.size === 'badAnnotation') return { ...obj, annotations: { 'example.dev/x': 1 } };
    if (r?.size === 'keep') return { resource: r, filter: obj.filter, observed: obj.observed };
    if (from === 'v1' && to === 'v2') {
      const { 'example.dev/unit': unit, ...annotations } = obj.annotations;
      return { ...obj, resource: { size: unit === undefined ? { value: r.size } : { value: r.size, unit } }, annotations };
    }
    if (from === 'v2' && to === 'v1') {
      const annotations = { ...obj.annotations };
      if (r.size.unit !== undefined) annotations['example.dev/unit'] = r.size.unit;
      return { ...obj, resource: { size: r.size.value }, annotations };
    }
    return obj;
  }
}

const rejection = async (p) => {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
};

test('a plugin without versions answers one version, and refuses to convert', async () => {
  const a = exportActuator(OneVersion);
  assert.deepEqual(await a.conversion.versions(), []);
  assert.deepEqual(await rejection(a.conversion.convert(testConvertible({ resource: {} }), 'v1', 'v2')), {
    tag: 'unrecoverable',
    val: 'this plugin serves one API version (asked to convert v1 to v2)',
  });
  // The build's `conversion` export: the module's own, else the actuator's, else one version.
  assert.equal(conversionOf({ actuator: a }), a.conversion);
  const own = { versions: () => [], convert: () => {} };
  assert.equal(conversionOf({ actuator: a, conversion: own }), own);
  assert.deepEqual(await conversionOf({ actuator: {} }).versions(), []);
  assert.throws(() => conversionOf({}).convert(testConvertible(), 'a', 'b'), (e) => e.tag === 'unrecoverable');
});

test('the actuator export keeps its interface alone: conversion is not enumerable', () => {
  const a = exportActuator(TwoVersions);
  assert.ok(!Object.keys(a).includes('conversion'));
  assert.deepEqual(Object.keys(a).sort(), [
    'available', 'create', 'delete', 'describe', 'getById', 'listForAdoption', 'listForImport', 'observed', 'reconcilers', 'runReconciler',
  ]);
  assert.deepEqual(Object.keys(a.conversion).sort(), ['convert', 'versions']);
});

test('versions: schemas (TypeBox, objects or text) as JSON text, no filter schema as none', async () => {
  const vs = await exportActuator(TwoVersions).conversion.versions();
  assert.deepEqual(vs, [
    { name: 'v1', resourceSchema: JSON.stringify(V1.resourceSchema), filterSchema: undefined, observedSchema: '{"type":"object"}', storage: false },
    { name: 'v2', resourceSchema: JSON.stringify(V2.resourceSchema), filterSchema: '{"type":"object"}', observedSchema: '{"type":"object"}', storage: true },
  ]);
  assert.deepEqual(JSON.parse(vs[0].resourceSchema), { type: 'object', required: ['size'], properties: { size: { type: 'integer' } } });
  assert.deepEqual(schema.fields(V2.resourceSchema), ['size']);
});

test('versions may be an array property; one that is not an array, or a version without a name, traps (logged)', async () => {
  class Property extends OneVersion {
    versions = [V1, V2];
  }
  assert.deepEqual((await exportActuator(Property).conversion.versions()).map((v) => v.name), ['v1', 'v2']);
  class NotAList extends OneVersion {
    versions() {
      return V1;
    }
  }
  await assert.rejects(exportActuator(NotAList).conversion.versions(), TypeError);
  class Nameless extends OneVersion {
    versions() {
      return [{ ...V1, name: '' }];
    }
  }
  await assert.rejects(exportActuator(Nameless).conversion.versions(), /non-empty string name/);
  assert.ok(globalThis.orchardLogs.some(([level, m]) => level === 'error' && m.startsWith('versions: TypeError')));
});

test('convert parses what comes in, serialises what goes out, and round-trips', async () => {
  const { convert } = exportActuator(TwoVersions).conversion;
  const v2 = testConvertible({ resource: { size: { value: 3, unit: 'GiB' } }, filter: { a: 1 }, annotations: { team: 'x' } });
  const v1 = await convert(v2, 'v2', 'v1');
  assert.deepEqual(v1, {
    resource: '{"size":3}', filter: '{"a":1}', observed: undefined,
    annotations: [['team', 'x'], ['example.dev/unit', 'GiB']],
  });
  assert.deepEqual(await convert(v1, 'v1', 'v2'), { ...v2, annotations: [['team', 'x']] });
  // JSON null is a document; absent stays absent.
  const nulls = await convert({ resource: '{"size":1}', filter: undefined, observed: 'null', annotations: [] }, 'v1', 'v1');
  assert.deepEqual(nulls, { resource: '{"size":1}', filter: undefined, observed: 'null', annotations: [] });
});

test('annotations left out of the answer are the ones that came in', async () => {
  const { convert } = exportActuator(TwoVersions).conversion;
  const out = await convert(testConvertible({ resource: { size: 'keep' }, annotations: { a: 'b' } }), 'v1', 'v2');
  assert.deepEqual(out.annotations, [['a', 'b']]);
});

test('a document that is not JSON is an invalid configuration naming the field', async () => {
  const { convert } = exportActuator(TwoVersions).conversion;
  for (const [field, name] of [['resource', 'spec.resource'], ['filter', 'spec.import.filter'], ['observed', 'status.resource']]) {
    const e = await rejection(convert({ ...testConvertible({ resource: { size: 1 } }), [field]: '{' }, 'v1', 'v2'));
    assert.equal(e.tag, 'invalid-configuration');
    assert.ok(e.val.startsWith(`${name} at version v1 is not JSON: `), e.val);
  }
});

test('a version the kind does not list is refused before the plugin sees it', async () => {
  const e = await rejection(exportActuator(TwoVersions).conversion.convert(testConvertible({ resource: { size: 1 } }), 'v1', 'v3'));
  assert.deepEqual(e, { tag: 'invalid-configuration', val: 'version "v3" is not one of the kind\'s versions (v1, v2)' });
});

test('thrown errors map to failures as in every call; a bad answer is a transient failure', async () => {
  class Refuses extends TwoVersions {
    convert(obj, from, to) {
      if (obj.resource.size === 'invalid') throw new InvalidConfiguration('size cannot be converted');
      return super.convert(obj, from, to);
    }
  }
  const { convert } = exportActuator(Refuses).conversion;
  const failure = (size) => rejection(convert(testConvertible({ resource: { size } }), 'v1', 'v2'));
  assert.deepEqual(await failure('invalid'), { tag: 'invalid-configuration', val: 'size cannot be converted' });
  assert.deepEqual(await failure('boom'), { tag: 'transient', val: 'boom' });
  const bug = await failure('bug');
  assert.equal(bug.tag, 'transient');
  assert.match(bug.val, /^plugin error: TypeError/);
  assert.ok(globalThis.orchardLogs.some(([level, m]) => level === 'error' && m.startsWith('convert: unexpected exception')));
  assert.match((await failure('nothing')).val, /^plugin error: TypeError: convert must return/);
  assert.match((await failure('badAnnotation')).val, /^plugin error: TypeError: annotation example\.dev\/x must be a string/);
});
