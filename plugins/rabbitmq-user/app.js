// RabbitMQ users as Kubernetes objects (`RabbitUser.rabbitmq.orchard.dev`).
//
// - identity: the user's name, which is also its id;
// - adoption: a user with the same name;
// - import filter: `name`, `tag`, matched exactly;
// - mutable through reconcilers: `tags`, the password (`password`: the value of key
//   `passwordKey` of the credentials Secret; no key, no password) and `permissions` (one
//   entry per vhost); immutable: `name`. Each change back is reported as a drift (the
//   password's as a sensitive one).
// - `generatePassword: true` (instead of `passwordKey`): `create` generates a strong random
//   password, sets it and reports the connection details `username`, `password` and `url` (the
//   management API), which the host writes into the Secret `spec.writeConnectionSecretTo.name`.
//   That Secret is the only copy: RabbitMQ keeps a hash, so later passes keep the password as
//   it is (a user left without one gets a new one, reported again). Lost the Secret? Delete the
//   user (or the object) and let it be created again.
//
// The password never leaves the plugin otherwise: the state and `status.resource` only say
// whether the user has one, and nothing logs it.

import { Actuator, InvalidConfiguration, Status, Type, exportActuator, http, report, schema } from 'orchard-sdk';

const TAGS = 'tags';
const PASSWORD = 'password';
const PERMISSIONS = 'permissions';

class Client {
  constructor(obj) {
    this.base = `${obj.credential('url').replace(/\/+$/, '')}/api`;
    this.auth = [obj.credential('username'), obj.credential('password')];
  }

  async request(method, path, json) {
    return http.request(method, this.base + path, { json, auth: this.auth });
  }

  /** The JSON at `path`; `undefined` on 404. */
  async get(path, what) {
    const r = await this.request('GET', path);
    if (r.status === 404) return undefined;
    return r.raiseForStatus(what).json();
  }

  async send(method, path, what, json) {
    (await this.request(method, path, json)).raiseForStatus(what);
  }

  async remove(path, what) {
    const r = await this.request('DELETE', path);
    if (r.status !== 404) r.raiseForStatus(what);
  }

  user(name) {
    return this.get(`/users/${http.quote(name)}`, `get user ${name}`);
  }

  async users() {
    return (await this.get('/users', 'list users')) ?? [];
  }

  async permissions(name) {
    return (await this.get(`/users/${http.quote(name)}/permissions`, `get permissions of ${name}`)) ?? [];
  }

  /** Creates or updates a user; `credentials` is `{password}` or `{password_hash, hashing_algorithm}`. */
  putUser(name, tags, credentials) {
    return this.send('PUT', `/users/${http.quote(name)}`, `put user ${name}`, { tags: tags.join(','), ...credentials });
  }

  deleteUser(name) {
    return this.remove(`/users/${http.quote(name)}`, `delete user ${name}`);
  }

  setPermission(user, p) {
    return this.send('PUT', `/permissions/${http.quote(p.vhost)}/${http.quote(user)}`, `set permissions of ${user} on vhost ${p.vhost}`, {
      configure: p.configure,
      write: p.write,
      read: p.read,
    });
  }

  deletePermission(user, vhost) {
    return this.remove(`/permissions/${http.quote(vhost)}/${http.quote(user)}`, `delete permissions of ${user} on vhost ${vhost}`);
  }
}

function tagsOf(u) {
  const tags = Array.isArray(u.tags) ? u.tags : String(u.tags || '').split(',');
  return tags.filter((t) => t !== '').sort();
}

async function fetchUser(client, name, u) {
  u = u ?? (await client.user(name));
  if (u === undefined) return undefined;
  const permissions = (await client.permissions(name))
    .map((p) => ({ vhost: p.vhost, configure: p.configure, write: p.write, read: p.read }))
    .sort((a, b) => (a.vhost < b.vhost ? -1 : a.vhost > b.vhost ? 1 : 0));
  return {
    id: u.name,
    state: { name: u.name, tags: tagsOf(u), hasPassword: Boolean(u.password_hash), permissions },
  };
}

const HASHES = { rabbit_password_hashing_sha256: 'SHA-256', rabbit_password_hashing_sha512: 'SHA-512' };

/** Whether `password` is the one behind RabbitMQ's salted hash (base64 of salt[4] ++ H(salt ++ password)). */
async function passwordMatches(user, password) {
  const algorithm = HASHES[user.hashing_algorithm];
  if (!algorithm || !user.password_hash) return false;
  const stored = Uint8Array.from(atob(user.password_hash), (c) => c.charCodeAt(0));
  const salt = stored.slice(0, 4);
  const secret = new TextEncoder().encode(password);
  const salted = new Uint8Array(salt.length + secret.length);
  salted.set(salt);
  salted.set(secret, salt.length);
  const digest = new Uint8Array(await crypto.subtle.digest(algorithm, salted));
  return digest.length === stored.length - 4 && digest.every((b, i) => b === stored[i + 4]);
}

function keepPassword(u) {
  return { password_hash: u.password_hash ?? '', hashing_algorithm: u.hashing_algorithm };
}

const BOTH_PASSWORDS = 'passwordKey and generatePassword exclude each other: set one of them (or neither, for a user without a password)';

// The schemas of `describe`, with TypeBox (JSON Schema objects; a property is required unless
// `Type.Optional`).
const PATTERN = Type.String({ maxLength: 1024, default: '.*' });

/** `spec.resource`. */
const Spec = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255, ...schema.immutable('name is immutable') }),
    tags: Type.Optional(Type.Array(Type.String({ maxLength: 64, pattern: '^[^,]+$' }), { maxItems: 16 })),
    passwordKey: Type.Optional(Type.String({ maxLength: 253 })),
    generatePassword: Type.Optional(
      Type.Boolean({
        description: 'Instead of passwordKey: generate a password at creation, written to the connection Secret (spec.writeConnectionSecretTo) with username and url.',
      }),
    ),
    permissions: Type.Optional(
      Type.Array(
        Type.Object({ vhost: Type.String({ maxLength: 255 }), configure: Type.Optional(PATTERN), write: Type.Optional(PATTERN), read: Type.Optional(PATTERN) }),
        { maxItems: 64, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['vhost'] },
      ),
    ),
  },
  { 'x-kubernetes-validations': [{ rule: '!has(self.passwordKey) || !has(self.generatePassword) || !self.generatePassword', message: BOTH_PASSWORDS }] },
);

/** `spec.import.filter`: at least one of the two. */
const Filter = Type.Object(
  { name: Type.Optional(Type.String({ maxLength: 255 })), tag: Type.Optional(Type.String({ maxLength: 64 })) },
  { minProperties: 1 },
);

/** `status.resource`: the state (`fetchUser`), which says whether there is a password, never which. */
const Observed = Type.Object({
  name: Type.Optional(Type.String()),
  tags: Type.Optional(Type.Array(Type.String())),
  hasPassword: Type.Optional(Type.Boolean()),
  permissions: Type.Optional(
    Type.Array(
      Type.Object({
        vhost: Type.Optional(Type.String()),
        configure: Type.Optional(Type.String()),
        write: Type.Optional(Type.String()),
        read: Type.Optional(Type.String()),
      }),
    ),
  ),
});

const SPEC_FIELDS = new Set(schema.fields(Spec));

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** 32 characters of [A-Za-z0-9] from the system's CSPRNG (wasi random), unbiased: ~190 bits. */
function generatePassword(length = 32) {
  const limit = 256 - (256 % ALPHABET.length); // bytes past the last full alphabet: rejected
  let out = '';
  while (out.length < length) {
    for (const b of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (b < limit && out.length < length) out += ALPHABET[b % ALPHABET.length];
    }
  }
  return out;
}

class User extends Actuator {
  // RabbitMQ deletes a user before its DELETE answers: the host does not read it back; and it
  // deletes a user by its name (the id), answering 404 for one that is gone: the host does not
  // read it first either (`deleteById`). (Its create is a PUT that creates or updates: it does
  // not refuse duplicates.)
  shortcuts() {
    return { deleteIsSynchronous: true, deleteById: true };
  }

  describe() {
    return {
      name: 'rabbitmq-user',
      group: 'rabbitmq.orchard.dev',
      version: 'v1alpha1',
      kind: 'RabbitUser',
      plural: 'rabbitusers',
      resourceSchema: Spec,
      filterSchema: Filter,
      observedSchema: Observed,
      dependencies: [],
      needsCredentials: true,
    };
  }

  parseSpec(spec) {
    const unknown = Object.keys(spec).filter((k) => !SPEC_FIELDS.has(k));
    if (unknown.length) throw new Error(`unknown field ${JSON.stringify(unknown[0])}`);
    if (spec.generatePassword !== undefined && typeof spec.generatePassword !== 'boolean') throw new Error('generatePassword must be true or false');
    if (spec.passwordKey !== undefined && spec.generatePassword) throw new InvalidConfiguration(BOTH_PASSWORDS);
    return {
      name: spec.name,
      tags: [...(spec.tags ?? [])].sort(),
      passwordKey: spec.passwordKey,
      generatePassword: spec.generatePassword === true,
      permissions: (spec.permissions ?? []).map((p) => ({
        vhost: p.vhost,
        configure: p.configure ?? '.*',
        write: p.write ?? '.*',
        read: p.read ?? '.*',
      })),
    };
  }

  /** The password the spec asks for, from the credentials Secret; `undefined` for none. */
  password(obj) {
    const key = obj.requireSpec().passwordKey;
    return key === undefined ? undefined : obj.credential(key);
  }

  /** Sets a new generated password on the user and reports it with how to connect. */
  async setGeneratedPassword(obj, client, name, tags) {
    const password = generatePassword();
    await client.putUser(name, tags, { password });
    report.connectionDetail('username', name);
    report.connectionDetail('password', password);
    report.connectionDetail('url', obj.credential('url'));
  }

  getById(obj, id) {
    return fetchUser(new Client(obj), id);
  }

  async listForAdoption(obj) {
    if (obj.spec === undefined) return undefined;
    // The name is the user's identity: at most one can match.
    const found = await fetchUser(new Client(obj), obj.spec.name);
    return found ? [found] : [];
  }

  async listForImport(obj, filter) {
    const client = new Client(obj);
    const matches = (await client.users()).filter(
      (u) => (filter.name === undefined || u.name === filter.name) && (filter.tag === undefined || tagsOf(u).includes(filter.tag)),
    );
    return Promise.all(matches.map((u) => fetchUser(client, u.name, u)));
  }

  async create(obj) {
    const spec = obj.requireSpec();
    const client = new Client(obj);
    // One request creates the user with its tags and password: nothing fallible follows it
    // (permissions have their reconciler).
    if (spec.generatePassword) {
      await this.setGeneratedPassword(obj, client, spec.name, spec.tags);
      return { id: spec.name, state: { name: spec.name, tags: spec.tags, hasPassword: true, permissions: [] } };
    }
    const password = this.password(obj);
    await client.putUser(spec.name, spec.tags, password === undefined ? { password_hash: '' } : { password });
    return { id: spec.name, state: { name: spec.name, tags: spec.tags, hasPassword: password !== undefined, permissions: [] } };
  }

  delete(obj, res) {
    return this.deleteById(obj, res.id);
  }

  /** By the name alone, read by nobody first: a user already gone (404) is done. */
  async deleteById(obj, id) {
    await new Client(obj).deleteUser(id);
    return Status.done();
  }

  reconcilers() {
    return [TAGS, PASSWORD, PERMISSIONS];
  }

  async runReconciler(name, obj, res) {
    const spec = obj.requireSpec();
    const client = new Client(obj);
    if (name === TAGS) {
      const diff = report.diff(res.state, spec, ['tags']);
      if (diff.isEmpty()) return Status.done();
      const u = await client.user(res.id);
      if (u === undefined) return Status.needsRefresh('user is gone');
      await client.putUser(res.id, spec.tags, keepPassword(u));
      diff.report();
      return Status.needsRefresh('tags updated');
    }
    if (name === PASSWORD) {
      const u = await client.user(res.id);
      if (u === undefined) return Status.needsRefresh('user is gone');
      if (spec.generatePassword) {
        // The generated password is in the connection Secret only: keep whatever is set.
        if (u.password_hash) return Status.done();
        await this.setGeneratedPassword(obj, client, res.id, tagsOf(u));
        report.drift('hasPassword', false, true);
        return Status.needsRefresh('password generated');
      }
      const password = this.password(obj);
      if (password === undefined) {
        if (!u.password_hash) return Status.done();
        await client.putUser(res.id, tagsOf(u), { password_hash: '' });
        report.drift('hasPassword', true, false);
        return Status.needsRefresh('password removed');
      }
      if (await passwordMatches(u, password)) return Status.done();
      await client.putUser(res.id, tagsOf(u), { password });
      // Masked by the host; the values say which, never the password.
      if (u.password_hash) report.drift('password', 'another password', `credentials key ${spec.passwordKey}`, true);
      else report.drift('hasPassword', false, true);
      return Status.needsRefresh('password updated');
    }
    if (name === PERMISSIONS) {
      const have = new Map(res.state.permissions.map((p) => [p.vhost, p]));
      const want = new Map(spec.permissions.map((p) => [p.vhost, p]));
      let changed = false;
      for (const [vhost, p] of want) {
        const h = have.get(vhost);
        if (!h || h.configure !== p.configure || h.write !== p.write || h.read !== p.read) {
          await client.setPermission(res.id, p);
          report.drift(`permissions.${vhost}`, h, p);
          changed = true;
        }
      }
      for (const [vhost, h] of have) {
        if (!want.has(vhost)) {
          await client.deletePermission(res.id, vhost);
          report.drift(`permissions.${vhost}`, h, undefined);
          changed = true;
        }
      }
      return changed ? Status.needsRefresh('permissions updated') : Status.done();
    }
    return super.runReconciler(name, obj, res);
  }
}

export const actuator = exportActuator(User);
