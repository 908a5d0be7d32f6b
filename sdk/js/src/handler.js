// The `ResourceHandler` pattern (OpenChoreo) for optional sub-resources, usable inside a
// reconciler: not required -> delete it if present; required -> fetch it, then create it or
// bring it up to date.

import { fromException } from './errors.js';
import { Status } from './types.js';

/**
 * One optional sub-resource of an external resource. Subclass it (methods may be async):
 * `name`, `isRequired()`, `current()` (`undefined` when absent), `create()`,
 * `update(current)` (returns whether anything changed), `delete(current)` (MUST succeed when
 * it is already gone).
 */
export class ResourceHandler {
  get name() {
    return 'sub-resource';
  }
  isRequired() {
    throw new Error('isRequired is not implemented');
  }
  current() {
    throw new Error('current is not implemented');
  }
  create() {
    throw new Error('create is not implemented');
  }
  update(_current) {
    throw new Error('update is not implemented');
  }
  delete(_current) {
    throw new Error('delete is not implemented');
  }
}

/**
 * Drives one handler through the pattern: `needs-refresh` when anything changed (so that the
 * host fetches the resource again), done when it was already as desired, and a failed status
 * when a step threw.
 * @returns {Promise<Status>}
 */
export async function ensure(handler) {
  try {
    const current = await handler.current();
    const required = await handler.isRequired();
    let what;
    if (!required && current !== undefined) {
      await handler.delete(current);
      what = 'deleted';
    } else if (required && current === undefined) {
      await handler.create();
      what = 'created';
    } else if (required && current !== undefined && (await handler.update(current))) {
      what = 'updated';
    }
    return what ? Status.needsRefresh(`${handler.name} ${what}`) : Status.done();
  } catch (e) {
    return Status.failed(fromException(e));
  }
}
