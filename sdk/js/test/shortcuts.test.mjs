// The `orchard:shortcuts/shortcuts` export (world shortcut-actuator-plugin, which the build
// always targets): what `exportActuator` makes of `Actuator.shortcuts`, and what the build
// exports for a module.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { shortcutsExportOf } from '../src/actuator.js';
import { Actuator, Status, exportActuator, testObject, testResource } from '../src/index.js';

class Plain extends Actuator {}

class Synchronous extends Actuator {
  shortcuts() {
    return { deleteIsSynchronous: true };
  }
}

class AsProperty extends Actuator {
  get shortcuts() {
    return { createRefusesDuplicates: true, deleteIsSynchronous: false };
  }
}

test('an actuator declares no shortcut by default', () => {
  const a = exportActuator(Plain);
  assert.deepEqual(a.shortcuts.shortcuts(), { createRefusesDuplicates: false, deleteIsSynchronous: false, deleteById: false });
  assert.ok(!Object.keys(a).includes('shortcuts'), 'the actuator export keeps its interface alone');
});

test('shortcuts are read from a method or a property, every flag answered', () => {
  assert.deepEqual(exportActuator(Synchronous).shortcuts.shortcuts(), {
    createRefusesDuplicates: false,
    deleteIsSynchronous: true,
    deleteById: false,
  });
  assert.deepEqual(exportActuator(AsProperty).shortcuts.shortcuts(), {
    createRefusesDuplicates: true,
    deleteIsSynchronous: false,
    deleteById: false,
  });
});

test('a declaration that is not a shortcut, or not a boolean, traps naming it', () => {
  class Misspelt extends Actuator {
    shortcuts() {
      return { deleteIsSync: true };
    }
  }
  class NotBoolean extends Actuator {
    shortcuts() {
      return { deleteIsSynchronous: 'yes' };
    }
  }
  class ByIdNotBoolean extends Actuator {
    shortcuts() {
      return { deleteById: 1 };
    }
  }
  class ByIdMisspelt extends Actuator {
    shortcuts() {
      return { deleteByID: true };
    }
  }
  assert.throws(() => exportActuator(Misspelt).shortcuts.shortcuts(), /Misspelt.shortcuts: "deleteIsSync" is not a shortcut/);
  assert.throws(() => exportActuator(NotBoolean).shortcuts.shortcuts(), /NotBoolean.shortcuts.deleteIsSynchronous must be true or false, got "yes"/);
  assert.throws(() => exportActuator(ByIdNotBoolean).shortcuts.shortcuts(), /ByIdNotBoolean.shortcuts.deleteById must be true or false, got 1/);
  assert.throws(() => exportActuator(ByIdMisspelt).shortcuts.shortcuts(), /ByIdMisspelt.shortcuts: "deleteByID" is not a shortcut \(createRefusesDuplicates, deleteIsSynchronous, deleteById\)/);
});

test("the build exports the module's own shortcuts, else the actuator's, else none", () => {
  const a = exportActuator(Synchronous);
  assert.equal(shortcutsExportOf({ actuator: a }), a.shortcuts);
  const own = { shortcuts: () => ({ createRefusesDuplicates: true, deleteIsSynchronous: true, deleteById: true }) };
  assert.equal(shortcutsExportOf({ actuator: a, shortcuts: own }), own);
  assert.deepEqual(shortcutsExportOf({ actuator: {} }).shortcuts(), { createRefusesDuplicates: false, deleteIsSynchronous: false, deleteById: false });
});

// -- delete-by-id ---------------------------------------------------------------------------

/** Deletes by name; records which method the SDK called, with what. */
class ByName extends Actuator {
  static calls = [];
  shortcuts() {
    return { deleteIsSynchronous: true, deleteById: true };
  }
  delete(obj, res) {
    ByName.calls.push(['delete', obj.name, res.id, res.state]);
    return Status.done();
  }
  deleteById(obj, id) {
    ByName.calls.push(['deleteById', obj.name, id]);
    return id === 'busy' ? Status.waitingOnExternal('deletion', 'still there', 500) : undefined;
  }
}

const DONE = { progress: [], failure: undefined };

test('the delete-by-id flag is answered by the shortcuts export when declared', () => {
  assert.deepEqual(exportActuator(ByName).shortcuts.shortcuts(), {
    createRefusesDuplicates: false,
    deleteIsSynchronous: true,
    deleteById: true,
  });
});

test('a delete with a null state goes to deleteById with the id, for an actuator that declares it', async () => {
  ByName.calls = [];
  const a = exportActuator(ByName);
  assert.deepEqual(await a.delete(testObject('o'), testResource('a.')), DONE);
  assert.deepEqual(await a.delete(testObject('o'), { id: 'b.', state: ' null\n' }), DONE);
  assert.deepEqual(ByName.calls, [['deleteById', 'o', 'a.'], ['deleteById', 'o', 'b.']]);
});

test('what deleteById answers is the delete\'s status', async () => {
  ByName.calls = [];
  const s = await exportActuator(ByName).delete(testObject('o'), testResource('busy'));
  assert.deepEqual(s.progress, [{ tag: 'waiting-on-external', val: { event: 'deletion', message: 'still there', pollAfterMs: 500 } }]);
  assert.equal(s.failure, undefined);
});

test('a delete with a state still goes to delete, for an actuator that declares delete-by-id', async () => {
  ByName.calls = [];
  const a = exportActuator(ByName);
  assert.deepEqual(await a.delete(testObject('o'), testResource('a.', { name: 'a.' })), DONE);
  assert.deepEqual(ByName.calls, [['delete', 'o', 'a.', { name: 'a.' }]]);
});

test('a delete with a null state goes to delete for an actuator that does not declare delete-by-id', async () => {
  const seen = [];
  class Plain extends Actuator {
    delete(_obj, res) {
      seen.push(['delete', res.id, res.state]);
    }
    deleteById(_obj, id) {
      seen.push(['deleteById', id]);
    }
  }
  assert.deepEqual(await exportActuator(Plain).delete(testObject('o'), testResource('a.')), DONE);
  assert.deepEqual(seen, [['delete', 'a.', null]]);
});

test('a plugin that declares delete-by-id without implementing deleteById answers an unrecoverable failure naming it', async () => {
  class DeclaresOnly extends Actuator {
    shortcuts() {
      return { deleteById: true };
    }
    delete() {
      assert.fail('delete must not be called for a delete by id');
    }
  }
  assert.deepEqual(await exportActuator(DeclaresOnly).delete(testObject('o'), testResource('a.')), {
    progress: [],
    failure: { tag: 'unrecoverable', val: 'this plugin declares the delete-by-id shortcut but does not implement deleteById (asked to delete a.)' },
  });
});

test('a failure deleteById throws becomes the delete\'s failed status', async () => {
  class Throws extends Actuator {
    shortcuts() {
      return { deleteById: true };
    }
    deleteById(obj) {
      obj.credential('apiKey');
    }
  }
  const s = await exportActuator(Throws).delete(testObject('o'), testResource('a.'));
  assert.deepEqual(s.failure, { tag: 'invalid-configuration', val: 'credentials Secret has no key "apiKey"' });
});
