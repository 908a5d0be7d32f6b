// Greetings as Kubernetes objects (Greeting.greetings.example.com) on a small REST API, written
// with the Orchard C SDK: the example of a kind with two API versions (docs/writing-a-plugin/c.md,
// "Several API versions").
//
// - v1alpha1, the first shape: {name, text};
// - v1beta1, the current one (the description's version, the one every call sees, and the
//   storage version): {name, message: {text, lang}}.
// A v1alpha1 object cannot hold the language: it waits in the annotation
// greetings.example.com/v1beta1-lang, so that v1beta1 -> v1alpha1 -> v1beta1 loses nothing.
//
// The API: GET/PUT/DELETE <url>/greetings/<name>, body {"text", "lang"}; credential `url`.
//   sdk/c/build.sh sdk/c/examples/greeting greeting.wasm
//   orchard invoke greeting.wasm convert --to v1beta1 --object sdk/c/examples/greeting/hello-v1alpha1.yaml
#include <stdlib.h>
#include <string.h>

#include "orchard.h"

#define GROUP "greetings.example.com"
#define LANG_ANNOTATION GROUP "/v1beta1-lang"

// -- the schemas: each version's, the description uses v1beta1's --------------------------------

#define NAME_SCHEMA                                                                                \
  "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,\"pattern\":\"^[a-z0-9-]+$\","   \
  "\"x-kubernetes-validations\":[{\"rule\":\"self == oldSelf\",\"message\":\"immutable\"}]}"
static const char V1ALPHA1[] = "{\"type\":\"object\",\"required\":[\"name\",\"text\"],\"properties\":{" NAME_SCHEMA ","
                               "\"text\":{\"type\":\"string\",\"maxLength\":1024}}}";
static const char V1BETA1[] = "{\"type\":\"object\",\"required\":[\"name\",\"message\"],\"properties\":{" NAME_SCHEMA ","
                              "\"message\":{\"type\":\"object\",\"required\":[\"text\"],\"properties\":{"
                              "\"text\":{\"type\":\"string\",\"maxLength\":1024},"
                              "\"lang\":{\"type\":\"string\",\"maxLength\":35}}}}}";
// status.resource is the same at both versions: convert leaves it as it is.
static const char OBSERVED[] = "{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}";

static void describe(orc_description *d) {
  *d = (orc_description){
      .name = "greeting", .group = GROUP, .version = "v1beta1", .kind = "Greeting", .plural = "greetings",
      .resource_schema = V1BETA1, .observed_schema = OBSERVED, .needs_credentials = true,
  };
}

// -- the conversion -------------------------------------------------------------------------------

// v1alpha1 {text} -> v1beta1 {message: {text, lang}}, the lang from the annotation.
static orc_failure *up(orc_convertible *obj) {
  orc_json *r = obj->resource;
  if (!r) return NULL; // no spec.resource (an imported object): nothing changes shape
  char *lang = orc_annotation_take(obj, LANG_ANNOTATION);
  orc_json *text = orc_json_take(r, "text");
  if (text || lang) {
    orc_json *message = orc_json_set(orc_json_object(), "text", text ? text : orc_json_string(""));
    if (lang) orc_json_set(message, "lang", orc_json_string(lang));
    orc_json_set(r, "message", message);
  }
  free(lang);
  return NULL;
}

// v1beta1 {message: {text, lang}} -> v1alpha1 {text}, the lang into the annotation.
static orc_failure *down(orc_convertible *obj) {
  orc_annotation_set(obj, LANG_ANNOTATION, NULL); // a stale one would come back at v1beta1
  const orc_json *message = orc_json_get(obj->resource, "message");
  if (!message) return NULL;
  if (message->type != ORC_JSON_OBJECT) return orc_invalid_configuration("spec.resource.message is not an object");
  const orc_json *lang = orc_json_get(message, "lang");
  if (lang && lang->type != ORC_JSON_STRING) return orc_invalid_configuration("spec.resource.message.lang is not a string");
  if (lang) orc_annotation_set(obj, LANG_ANNOTATION, lang->string);
  orc_json *m = orc_json_take(obj->resource, "message");
  orc_json *text = orc_json_take(m, "text");
  orc_json_set(obj->resource, "text", text ? text : orc_json_string(""));
  orc_json_free(m);
  return NULL;
}

// The SDK calls it with two different versions of the table (it answers from == to itself).
static orc_failure *convert(orc_convertible *obj, const char *from, const char *to) {
  (void)to;
  return strcmp(from, "v1alpha1") == 0 ? up(obj) : down(obj);
}

// -- the API --------------------------------------------------------------------------------------

static orc_failure *call(const orc_object *obj, const char *method, const char *name, const orc_json *body,
                         orc_response *r) {
  orc_failure *f = NULL;
  char *base = orc_credential_string(obj, "url", &f);
  if (!base) return f;
  char *segment = orc_path_segment(name);
  char *url = orc_sprintf("%s/greetings/%s", base, segment);
  char *text = body ? orc_json_dump(body) : NULL;
  orc_header headers[] = {{"content-type", "application/json"}};
  orc_request req = {.method = method, .url = url, .headers = headers, .n_headers = body ? 1 : 0, .body = text,
                     .body_len = text ? strlen(text) : 0};
  f = orc_http_send(&req, r);
  free(text);
  free(url);
  free(segment);
  free(base);
  return f;
}

// The state: {name, text, lang}.
static orc_resource_out resource(const char *name, const orc_json *got) {
  orc_json *state = orc_json_object();
  orc_json_set(state, "name", orc_json_string(name));
  orc_json_set(state, "text", orc_json_string(orc_json_get_string(got, "text", "")));
  orc_json_set(state, "lang", orc_json_string(orc_json_get_string(got, "lang", "")));
  return orc_resource_new(name, state);
}

static orc_failure *put(const orc_object *obj, const orc_json *spec) {
  const orc_json *message = orc_json_get(spec, "message");
  orc_json *body = orc_json_object();
  orc_json_set(body, "text", orc_json_string(orc_json_get_string(message, "text", "")));
  orc_json_set(body, "lang", orc_json_string(orc_json_get_string(message, "lang", "")));
  orc_response r = {0};
  orc_failure *f = call(obj, "PUT", orc_json_get_string(spec, "name", ""), body, &r);
  if (!f) f = orc_response_check(&r, "put greeting");
  orc_response_free(&r);
  orc_json_free(body);
  return f;
}

static orc_failure *get_by_id(const orc_object *obj, const char *id, orc_resource_out **out) {
  orc_response r = {0};
  orc_failure *f = call(obj, "GET", id, NULL, &r);
  if (!f && r.status != 404 && !(f = orc_response_check(&r, "get greeting"))) {
    orc_json *got = orc_response_json(&r, &f);
    if (got) {
      *out = malloc(sizeof **out);
      if (!*out) abort();
      **out = resource(id, got);
    }
    orc_json_free(got);
  }
  orc_response_free(&r);
  return f;
}

static orc_status create(const orc_object *obj, orc_resource_out *out) {
  orc_failure *f = NULL;
  const orc_json *spec = orc_require_spec(obj, &f);
  if (!spec || (f = put(obj, spec))) return orc_failed(f);
  *out = resource(orc_json_get_string(spec, "name", ""), orc_json_get(spec, "message"));
  return orc_done();
}

static orc_status delete_(const orc_object *obj, const orc_resource *res) {
  orc_response r = {0};
  orc_failure *f = call(obj, "DELETE", res->id, NULL, &r);
  if (!f && r.status != 404) f = orc_response_check(&r, "delete greeting");
  orc_response_free(&r);
  return f ? orc_failed(f) : orc_done();
}

static orc_failure *reconcilers(const orc_object *obj, const orc_resource *res, orc_names *out) {
  (void)obj, (void)res;
  orc_names_push(out, "message");
  return NULL;
}

static orc_status run_reconciler(const char *name, const orc_object *obj, const orc_resource *res) {
  (void)name;
  orc_failure *f = NULL;
  const orc_json *spec = orc_require_spec(obj, &f);
  if (!spec) return orc_failed(f);
  const orc_json *message = orc_json_get(spec, "message");
  if (strcmp(orc_json_get_string(res->state, "text", ""), orc_json_get_string(message, "text", "")) == 0 &&
      strcmp(orc_json_get_string(res->state, "lang", ""), orc_json_get_string(message, "lang", "")) == 0)
    return orc_done();
  f = put(obj, spec);
  return f ? orc_failed(f) : orc_needs_refresh("greeting updated");
}

static const orc_actuator greeting = {
    .describe = describe,
    .get_by_id = get_by_id,
    .create = create,
    .delete_ = delete_,
    .reconcilers = reconcilers,
    .run_reconciler = run_reconciler,
    // Oldest first; v1beta1 is the description's version (same schemas) and the storage one.
    ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED},
                 {.name = "v1beta1", .resource_schema = V1BETA1, .observed_schema = OBSERVED, .storage = true}),
    .convert = convert,
};
ORCHARD_EXPORT(greeting);
