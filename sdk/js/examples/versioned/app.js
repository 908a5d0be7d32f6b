// An example of a kind with two API versions and the conversion between them (not a plugin to
// deploy: it manages nothing). `Upstream.examples.orchard.dev`:
//
// - v1alpha1: `spec.resource: {name, hosts: [string]}`, `status.resource: {hosts: [string]}`;
// - v1beta1, the storage version and the one this code works at (`describe().version`):
//   `spec.resource: {name, servers: [{host, weight?}]}`, `status.resource: {servers: [{host}]}`.
//
// A round trip loses nothing: at v1alpha1 the weights, which it cannot hold, wait in the
// annotation `examples.orchard.dev/v1beta1-server-weights` (JSON, host -> weight) and come back
// from it at v1beta1. `status.resource` needs no annotation: it has no weights.
//
//   sdk/js/build.sh sdk/js/examples/versioned upstream.wasm
//   orchard invoke upstream.wasm convert --to v1beta1 --object sdk/js/examples/versioned/upstream-v1alpha1.yaml

import { Actuator, InvalidConfiguration, Type, Unrecoverable, exportActuator } from 'orchard-sdk';

const GROUP = 'examples.orchard.dev';
export const WEIGHTS = `${GROUP}/v1beta1-server-weights`;

const Name = Type.String({ minLength: 1, maxLength: 253 });
const Host = Type.String({ minLength: 1, maxLength: 253 });
const Filter = Type.Object({ name: Type.Optional(Name) }, { minProperties: 1 });

const V1alpha1 = {
  name: 'v1alpha1',
  resourceSchema: Type.Object({
    name: Name,
    hosts: Type.Optional(Type.Array(Host, { maxItems: 32, 'x-kubernetes-list-type': 'set' })),
  }),
  filterSchema: Filter,
  observedSchema: Type.Object({ hosts: Type.Optional(Type.Array(Type.String())) }),
  storage: false,
};

const V1beta1 = {
  name: 'v1beta1',
  resourceSchema: Type.Object({
    name: Name,
    servers: Type.Optional(
      Type.Array(Type.Object({ host: Host, weight: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })) }), {
        maxItems: 32, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['host'],
      }),
    ),
  }),
  filterSchema: Filter,
  observedSchema: Type.Object({ servers: Type.Optional(Type.Array(Type.Object({ host: Type.Optional(Type.String()) }))) }),
  storage: true,
};

/** JSON text with sorted keys, so that the same weights always give the same annotation. */
const sortedJson = (map) => JSON.stringify(Object.fromEntries(Object.entries(map).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));

/** The weights kept in the annotations (`{}` without it). */
function weightsOf(annotations) {
  const text = annotations[WEIGHTS];
  if (text === undefined) return {};
  let weights;
  try {
    weights = JSON.parse(text);
  } catch (e) {
    throw new InvalidConfiguration(`annotation ${WEIGHTS} is not JSON: ${e.message}`);
  }
  if (weights === null || typeof weights !== 'object' || Array.isArray(weights) || !Object.values(weights).every(Number.isInteger)) {
    throw new InvalidConfiguration(`annotation ${WEIGHTS} is not a JSON map of host to weight: ${text}`);
  }
  return weights;
}

/** v1alpha1 -> v1beta1: the hosts become servers, with their weights from the annotation. */
function up(obj) {
  const annotations = { ...obj.annotations };
  const weights = weightsOf(annotations);
  let resource = obj.resource;
  if (resource && Array.isArray(resource.hosts)) {
    const { hosts, ...rest } = resource;
    const servers = hosts.map((host) => {
      const weight = weights[host];
      delete weights[host];
      return weight === undefined ? { host } : { host, weight };
    });
    resource = { ...rest, servers };
  }
  // Weights of hosts the object does not list (an annotation edited by hand) stay where they are.
  if (Object.keys(weights).length > 0) annotations[WEIGHTS] = sortedJson(weights);
  else delete annotations[WEIGHTS];
  let observed = obj.observed;
  if (observed && Array.isArray(observed.hosts)) {
    const { hosts, ...rest } = observed;
    observed = { ...rest, servers: hosts.map((host) => ({ host })) };
  }
  return { resource, filter: obj.filter, observed, annotations };
}

/** v1beta1 -> v1alpha1: the servers become their hosts; the weights go into the annotation. */
function down(obj) {
  const annotations = { ...obj.annotations };
  const weights = weightsOf(annotations);
  let resource = obj.resource;
  if (resource && Array.isArray(resource.servers)) {
    const { servers, ...rest } = resource;
    for (const s of servers) if (s.weight !== undefined) weights[s.host] = s.weight;
    resource = { ...rest, hosts: servers.map((s) => s.host) };
  }
  if (Object.keys(weights).length > 0) annotations[WEIGHTS] = sortedJson(weights);
  else delete annotations[WEIGHTS];
  let observed = obj.observed;
  if (observed && Array.isArray(observed.servers)) {
    const { servers, ...rest } = observed;
    observed = { ...rest, hosts: servers.map((s) => s.host) };
  }
  return { resource, filter: obj.filter, observed, annotations };
}

class Upstream extends Actuator {
  describe() {
    return {
      name: 'upstream-example',
      group: GROUP,
      version: V1beta1.name,
      kind: 'Upstream',
      plural: 'upstreams',
      resourceSchema: V1beta1.resourceSchema,
      filterSchema: V1beta1.filterSchema,
      observedSchema: V1beta1.observedSchema,
      dependencies: [],
      needsCredentials: false,
    };
  }

  // Oldest first; `describe().version` with the description's schemas; one storage version.
  versions() {
    return [V1alpha1, V1beta1];
  }

  // Pure: no I/O, nothing but the arguments. The SDK has checked that both names are listed.
  convert(obj, from, to) {
    if (from === to) return obj;
    return from === 'v1alpha1' ? up(obj) : down(obj);
  }

  // The rest of the contract: this example has no external system.
  getById() {
    return undefined;
  }

  create() {
    throw new Unrecoverable('upstream-example manages nothing: it shows versions and convert');
  }

  delete() {}
}

export const actuator = exportActuator(Upstream);
