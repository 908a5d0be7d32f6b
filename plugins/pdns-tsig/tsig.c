// PowerDNS TSIG keys as Kubernetes objects (TsigKey.pdns.orchard.dev), written with the
// Orchard C SDK.
//
// - identity: the key's PowerDNS id, its name with a trailing dot (`transfer.example.`);
// - adoption: the key with the same name;
// - import filter: `name`, `algorithm`, matched exactly;
// - immutable: `name`; mutable through the `key` reconciler: `algorithm` and the secret
//   (`keyFrom` names a key of the credentials Secret holding it, base64; without it PowerDNS
//   generates one, which is kept).
//
// PowerDNS 4.7 answers a PUT that changes a key's algorithm by adding a second row (and keeps
// reporting the old one), so a change replaces the key instead: DELETE, then POST with the same
// secret. A failure between the two leaves no key: the host sees it gone and recreates it.
//
// The secret never leaves PowerDNS and the Secret: neither the state nor status.resource
// carries it.
#include <stdlib.h>
#include <string.h>

#include "orchard.h"

typedef struct {
  char *base; // <url>/api/v1/servers/localhost
  char *api_key;
} pdns;

static orc_failure *pdns_for(const orc_object *obj, pdns *out) {
  orc_failure *f = NULL;
  char *url = orc_credential_string(obj, "url", &f);
  if (!url) return f;
  out->api_key = orc_credential_string(obj, "apiKey", &f);
  if (!out->api_key) {
    free(url);
    return f;
  }
  size_t n = strlen(url);
  while (n && url[n - 1] == '/') url[--n] = 0;
  out->base = orc_sprintf("%s/api/v1/servers/localhost", url);
  free(url);
  return NULL;
}

static void pdns_free(pdns *p) {
  free(p->base);
  free(p->api_key);
}

// One request; `path` is under /api/v1/servers/localhost, `body` JSON text or NULL.
static orc_failure *pdns_call(const pdns *p, const char *method, const char *path, const char *body,
                              orc_response *out) {
  char *url = orc_sprintf("%s%s", p->base, path);
  orc_header headers[] = {{"x-api-key", p->api_key}, {"content-type", "application/json"}};
  orc_request req = {method, url, headers, body ? 2 : 1, body, body ? strlen(body) : 0};
  orc_failure *f = orc_http_send(&req, out);
  free(url);
  return f;
}

// The state of a key as PowerDNS has it: {"name", "algorithm"}.
static orc_json *state_of(const orc_json *key) {
  orc_json *s = orc_json_object();
  orc_json_set(s, "name", orc_json_string(orc_json_get_string(key, "name", "")));
  orc_json_set(s, "algorithm", orc_json_string(orc_json_get_string(key, "algorithm", "")));
  return s;
}

// GET /tsigkeys/<id>: *found NULL on 404; else the key with its secret (owned).
static orc_failure *fetch(const pdns *p, const char *id, orc_json **found) {
  *found = NULL;
  if (!*id || strcmp(id, ".") == 0 || strcmp(id, "..") == 0) return NULL; // no such key
  char *seg = orc_path_segment(id);
  char *path = orc_sprintf("/tsigkeys/%s", seg);
  free(seg);
  orc_response r = {0};
  orc_failure *f = pdns_call(p, "GET", path, NULL, &r);
  free(path);
  if (!f && r.status != 404 && !(f = orc_response_check(&r, "get TSIG key")))
    *found = orc_response_json(&r, &f);
  orc_response_free(&r);
  return f;
}

static char *key_id(const char *name) { return orc_sprintf("%s.", name); }

// The secret the spec asks for (owned), NULL when PowerDNS keeps (or generates) its own.
static char *wanted_secret(const orc_object *obj, const orc_json *spec, orc_failure **f) {
  const char *from = orc_json_get_string(spec, "keyFrom", NULL);
  return from ? orc_credential_string(obj, from, f) : NULL;
}

static orc_failure *post_key(const pdns *p, const char *name, const char *algorithm, const char *secret) {
  orc_json *body = orc_json_object();
  orc_json_set(body, "name", orc_json_string(name));
  orc_json_set(body, "algorithm", orc_json_string(algorithm));
  if (secret) orc_json_set(body, "key", orc_json_string(secret));
  char *text = orc_json_dump(body);
  orc_json_free(body);
  orc_response r = {0};
  orc_failure *f = pdns_call(p, "POST", "/tsigkeys", text, &r);
  free(text);
  if (!f) f = orc_response_check(&r, "create TSIG key");
  orc_response_free(&r);
  return f;
}

static orc_failure *delete_key(const pdns *p, const char *id) {
  if (!*id || strcmp(id, ".") == 0 || strcmp(id, "..") == 0) return NULL; // no such key
  char *seg = orc_path_segment(id);
  char *path = orc_sprintf("/tsigkeys/%s", seg);
  free(seg);
  orc_response r = {0};
  orc_failure *f = pdns_call(p, "DELETE", path, NULL, &r);
  free(path);
  if (!f && r.status != 404) f = orc_response_check(&r, "delete TSIG key");
  orc_response_free(&r);
  return f;
}

// -- the actuator -----------------------------------------------------------------------------

static const char RESOURCE_SCHEMA[] =
    "{\"type\":\"object\",\"required\":[\"name\"],\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":253,"
    "\"pattern\":\"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$\","
    "\"x-kubernetes-validations\":[{\"rule\":\"self == oldSelf\",\"message\":\"name is immutable\"}]},"
    "\"algorithm\":{\"type\":\"string\",\"default\":\"hmac-sha256\",\"enum\":[\"hmac-md5\",\"hmac-sha1\","
    "\"hmac-sha224\",\"hmac-sha256\",\"hmac-sha384\",\"hmac-sha512\"]},"
    "\"keyFrom\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":253,"
    "\"description\":\"Key of the credentials Secret holding the secret (base64)\"}}}";
static const char FILTER_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":253},"
    "\"algorithm\":{\"type\":\"string\",\"maxLength\":32}}}";
static const char OBSERVED_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"algorithm\":{\"type\":\"string\"}}}";

static void describe(orc_description *d) {
  *d = (orc_description){
      .name = "pdns-tsig", .group = "pdns.orchard.dev", .version = "v1alpha1",
      .kind = "TsigKey", .plural = "tsigkeys",
      .resource_schema = RESOURCE_SCHEMA, .filter_schema = FILTER_SCHEMA,
      .observed_schema = OBSERVED_SCHEMA, .needs_credentials = true,
  };
}

static orc_failure *get_by_id(const orc_object *obj, const char *id, orc_resource_out **out) {
  pdns p;
  ORC_TRY(pdns_for(obj, &p));
  orc_json *key = NULL;
  orc_failure *f = fetch(&p, id, &key);
  pdns_free(&p);
  if (key) {
    *out = malloc(sizeof **out);
    if (!*out) abort();
    **out = orc_resource_new(orc_json_get_string(key, "id", id), state_of(key));
    orc_json_free(key);
  }
  return f;
}

static orc_failure *list_for_adoption(const orc_object *obj, orc_resources *out, bool *applies) {
  if (!obj->spec) return NULL; // *applies stays false
  *applies = true;
  char *id = key_id(orc_json_get_string(obj->spec, "name", ""));
  orc_resource_out *found = NULL;
  orc_failure *f = get_by_id(obj, id, &found);
  free(id);
  if (found) {
    orc_resources_push(out, *found);
    free(found);
  }
  return f;
}

static orc_failure *list_for_import(const orc_object *obj, const orc_json *filter, orc_resources *out) {
  pdns p;
  ORC_TRY(pdns_for(obj, &p));
  orc_failure *f = NULL;
  orc_response r = {0};
  orc_json *all = NULL;
  if (!(f = pdns_call(&p, "GET", "/tsigkeys", NULL, &r)) && !(f = orc_response_check(&r, "list TSIG keys")))
    all = orc_response_json(&r, &f);
  orc_response_free(&r);
  pdns_free(&p);
  if (all && all->type != ORC_JSON_ARRAY) f = orc_transient("list TSIG keys: not a JSON array");
  const char *name = orc_json_get_string(filter, "name", NULL);
  const char *algorithm = orc_json_get_string(filter, "algorithm", NULL);
  for (size_t i = 0; !f && i < all->len; i++) {
    const orc_json *k = all->items[i];
    if (name && strcmp(orc_json_get_string(k, "name", ""), name) != 0) continue;
    if (algorithm && strcmp(orc_json_get_string(k, "algorithm", ""), algorithm) != 0) continue;
    orc_resources_push(out, orc_resource_new(orc_json_get_string(k, "id", ""), state_of(k)));
  }
  orc_json_free(all);
  return f;
}

static orc_status create(const orc_object *obj, orc_resource_out *out) {
  orc_failure *f = NULL;
  const orc_json *spec = orc_require_spec(obj, &f);
  if (!spec) return orc_failed(f);
  const char *name = orc_json_get_string(spec, "name", "");
  const char *algorithm = orc_json_get_string(spec, "algorithm", "hmac-sha256");
  char *secret = wanted_secret(obj, spec, &f);
  ORC_TRY_STATUS(f);
  pdns p;
  if ((f = pdns_for(obj, &p))) {
    free(secret);
    return orc_failed(f);
  }
  // One POST creates the key with everything: nothing fallible follows it.
  f = post_key(&p, name, algorithm, secret);
  free(secret);
  pdns_free(&p);
  if (f) return orc_failed(f);
  char *id = key_id(name);
  orc_json *state = orc_json_object();
  orc_json_set(state, "name", orc_json_string(name));
  orc_json_set(state, "algorithm", orc_json_string(algorithm));
  *out = orc_resource_new(id, state);
  free(id);
  return orc_done();
}

// Reads only res->id: the host deletes by id (delete_by_id), the state then JSON null.
static orc_status delete_(const orc_object *obj, const orc_resource *res) {
  pdns p;
  orc_failure *f = pdns_for(obj, &p);
  if (!f) {
    f = delete_key(&p, res->id);
    pdns_free(&p);
  }
  return f ? orc_failed(f) : orc_done();
}

static orc_failure *reconcilers(const orc_object *obj, const orc_resource *res, orc_names *out) {
  (void)obj, (void)res;
  orc_names_push(out, "key");
  return NULL;
}

// `key`: the algorithm of the spec, and the secret of keyFrom when it is set.
static orc_status run_reconciler(const char *name, const orc_object *obj, const orc_resource *res) {
  if (strcmp(name, "key") != 0) return orc_failed(orc_unrecoverable("no reconciler named \"%s\"", name));
  orc_failure *f = NULL;
  const orc_json *spec = orc_require_spec(obj, &f);
  if (!spec) return orc_failed(f);
  const char *algorithm = orc_json_get_string(spec, "algorithm", "hmac-sha256");
  char *secret = wanted_secret(obj, spec, &f);
  if (f) return orc_failed(f);
  pdns p;
  if ((f = pdns_for(obj, &p))) {
    free(secret);
    return orc_failed(f);
  }
  orc_json *current = NULL;
  orc_status s = orc_done();
  if ((f = fetch(&p, res->id, &current))) {
    s = orc_failed(f);
  } else if (!current) {
    s = orc_failed(orc_transient("TSIG key %s disappeared", res->id));
  } else {
    const char *have_algorithm = orc_json_get_string(current, "algorithm", "");
    const char *have_secret = orc_json_get_string(current, "key", "");
    bool same_algorithm = strcmp(have_algorithm, algorithm) == 0;
    bool same_secret = !secret || strcmp(have_secret, secret) == 0;
    if (!same_algorithm || !same_secret) {
      char *keep = orc_strdup(secret ? secret : have_secret);
      const char *key_name = orc_json_get_string(current, "name", "");
      ORC_INFO("replacing TSIG key %s (%s -> %s%s)", res->id, have_algorithm, algorithm,
               same_secret ? "" : ", new secret");
      if ((f = delete_key(&p, res->id)) || (f = post_key(&p, key_name, algorithm, keep))) s = orc_failed(f);
      else s = orc_needs_refresh("key %s", same_secret ? "algorithm changed" : "replaced");
      free(keep);
    }
  }
  orc_json_free(current);
  free(secret);
  pdns_free(&p);
  return s;
}

static orc_json *observed(const orc_resource *res) {
  orc_json *out = orc_json_object();
  orc_json_set(out, "name", orc_json_string(orc_json_get_string(res->state, "name", "")));
  orc_json_set(out, "algorithm", orc_json_string(orc_json_get_string(res->state, "algorithm", "")));
  return out;
}

static const orc_actuator tsig = {
    .describe = describe,
    .get_by_id = get_by_id,
    .list_for_adoption = list_for_adoption,
    .list_for_import = list_for_import,
    .create = create,
    .delete_ = delete_,
    .reconcilers = reconcilers,
    .run_reconciler = run_reconciler,
    .observed = observed,
    // PowerDNS refuses (409) a TSIG key name that exists, changing nothing, a key is gone once
    // its DELETE answered, and delete_ needs only its id (404 for a gone one is done): the
    // host skips the lookup before a create and the reads before and after a delete
    // (docs/concepts.md "Shortcuts").
    .shortcuts = {.create_refuses_duplicates = true, .delete_is_synchronous = true, .delete_by_id = true},
};
ORCHARD_EXPORT(tsig);
