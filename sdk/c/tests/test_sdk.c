// Native unit tests of the C SDK's JSON, strings and statuses (no Wasm needed):
//   sdk/c/tests/run.sh
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchard.h"

static int passed, failed;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond) passed++;                                                                            \
    else failed++, fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);         \
  } while (0)

static void round_trip(const char *in, const char *want) {
  char *error = NULL;
  orc_json *v = orc_json_parse(in, strlen(in), &error);
  CHECK(v != NULL);
  if (!v) {
    fprintf(stderr, "  parse %s: %s\n", in, error);
    free(error);
    return;
  }
  char *out = orc_json_dump(v);
  CHECK(strcmp(out, want) == 0);
  if (strcmp(out, want) != 0) fprintf(stderr, "  got %s, want %s\n", out, want);
  free(out);
  orc_json_free(v);
}

static void rejects(const char *in) {
  char *error = NULL;
  orc_json *v = orc_json_parse(in, strlen(in), &error);
  CHECK(v == NULL && error != NULL);
  if (v) fprintf(stderr, "  accepted %s\n", in);
  orc_json_free(v);
  free(error);
}

// The short forms: ORC_TRY / ORC_TRY_STATUS return a helper's failure as is or as a status.
static orc_failure *need_key(const orc_object *obj, char **key) {
  orc_failure *f = NULL;
  *key = orc_credential_string(obj, "apiKey", &f);
  return f;
}

static orc_failure *check_key(const orc_object *obj) {
  char *key = NULL;
  ORC_TRY(need_key(obj, &key));
  free(key);
  return NULL;
}

static orc_status delete_with_key(const orc_object *obj) {
  ORC_TRY_STATUS(check_key(obj));
  char *key = NULL;
  ORC_TRY_STATUS(need_key(obj, &key));
  free(key);
  return orc_done();
}

static void short_forms(void) {
  orc_json *spec = orc_json_parse("{\"name\":\"k\"}", 12, NULL);
  orc_object bare = {.name = "o", .namespace_ = "default", .spec = spec};
  orc_object full = {.name = "o", .namespace_ = "default", .spec = spec,
                     ORC_CREDENTIALS(ORC_CREDENTIAL("url", "http://x"), ORC_CREDENTIAL("apiKey", "s3cret")),
                     ORC_DEPENDENCIES({.name = "zone", .kind = "DnsZone", .object = "z", .id = "z."}),
                     ORC_LABELS({"team", "a"})};
  CHECK(full.n_credentials == 2 && full.credentials[1].len == 6 && full.n_dependencies == 1 && full.n_labels == 1);
  orc_failure *f = NULL;
  CHECK(strcmp(orc_dependency_id(&full, "zone", &f), "z.") == 0 && f == NULL);
  char *key = orc_credential_string(&full, "apiKey", &f);
  CHECK(key && strcmp(key, "s3cret") == 0);
  free(key);
  CHECK(check_key(&full) == NULL);
  f = check_key(&bare);
  CHECK(f && f->kind == ORC_INVALID_CONFIGURATION && strstr(f->message, "apiKey"));
  orc_failure_free(f);
  orc_status s = delete_with_key(&full);
  CHECK(orc_status_is_done(&s));
  orc_status_free(&s);
  s = delete_with_key(&bare);
  CHECK(s.n_progress == 0 && s.failure && s.failure->kind == ORC_INVALID_CONFIGURATION);
  orc_status_free(&s);
  orc_json_free(spec);
}

static void reports(void) {
  orc_reports_free(&(orc_reports){0});
  orc_report_connection_detail_string("password", "s3cret");
  orc_report_connection_detail("raw", (const uint8_t *)"\xff\0", 2);
  orc_json *native = orc_json_string("Native"), *master = orc_json_string("Master");
  orc_report_drift("kind", native, master, false);
  orc_report_drift_string("apiKey", NULL, "k", true);
  orc_reports r = orc_reports_take();
  CHECK(r.n_details == 2 && strcmp(r.details[0].key, "password") == 0 && r.details[0].len == 6 &&
        memcmp(r.details[0].value, "s3cret", 6) == 0 && r.details[1].len == 2);
  CHECK(r.n_drifts == 2 && strcmp(r.drifts[0].field, "kind") == 0 && strcmp(r.drifts[0].observed, "\"Native\"") == 0 &&
        strcmp(r.drifts[0].desired, "\"Master\"") == 0 && !r.drifts[0].sensitive);
  CHECK(r.drifts[1].observed == NULL && strcmp(r.drifts[1].desired, "\"k\"") == 0 && r.drifts[1].sensitive);
  orc_reports_free(&r);
  r = orc_reports_take();
  CHECK(r.n_details == 0 && r.n_drifts == 0);

  const char *o = "{\"kind\":\"Native\",\"settings\":{\"ttl\":60},\"tags\":[\"a\"]}";
  const char *w = "{\"kind\":\"Native\",\"settings\":{\"ttl\":300},\"tags\":[\"a\"],\"account\":\"a\"}";
  orc_json *observed = orc_json_parse(o, strlen(o), NULL), *desired = orc_json_parse(w, strlen(w), NULL);
  const char *fields[] = {"kind", "settings.ttl", "tags", "account", "settings.none"};
  orc_diff d = orc_diff_fields(observed, desired, fields, 5);
  CHECK(d.len == 2 && strcmp(d.items[0].field, "settings.ttl") == 0 && strcmp(d.items[1].field, "account") == 0);
  r = orc_reports_take();
  CHECK(r.n_drifts == 0);
  CHECK(orc_diff_report(&d) == 2 && d.len == 0 && d.items == NULL);
  r = orc_reports_take();
  CHECK(r.n_drifts == 2 && strcmp(r.drifts[0].observed, "60") == 0 && strcmp(r.drifts[0].desired, "300") == 0 &&
        r.drifts[1].observed == NULL && strcmp(r.drifts[1].desired, "\"a\"") == 0);
  orc_reports_free(&r);
  orc_diff same = {0};
  orc_diff_field(&same, "kind", native, native, false);
  orc_diff_field(&same, "none", NULL, NULL, false);
  CHECK(same.len == 0);
  orc_diff_field(&same, "kind", native, master, true);
  CHECK(same.len == 1 && same.items[0].sensitive);
  orc_diff_free(&same);
  orc_json_free(native);
  orc_json_free(master);
  orc_json_free(observed);
  orc_json_free(desired);
}

// -- several API versions ---------------------------------------------------------------------
// A kind at v1alpha1 ({text}) and v1beta1 ({message: {text, lang}}, stored): a v1alpha1 object
// keeps the lang in the annotation example.com/v1beta1-lang.

#define LANG_KEY "example.com/v1beta1-lang"
static const char V1ALPHA1[] = "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}}}";
static const char V1BETA1[] = "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"object\"}}}";
static const char OBSERVED[] = "{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}";
static int converts;

static void greeting_describe(orc_description *d) {
  *d = (orc_description){.name = "greeting", .group = "example.com", .version = "v1alpha1", .kind = "Greeting",
                         .plural = "greetings", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED};
}

static orc_failure *greeting_convert(orc_convertible *obj, const char *from, const char *to) {
  converts++;
  orc_json *r = obj->resource;
  if (!r) return NULL;
  if (strcmp(from, "v1alpha1") == 0 && strcmp(to, "v1beta1") == 0) {
    orc_json *text = orc_json_take(r, "text");
    char *lang = orc_annotation_take(obj, LANG_KEY);
    if (text || lang) {
      orc_json *message = orc_json_set(orc_json_object(), "text", text ? text : orc_json_null());
      if (lang) orc_json_set(message, "lang", orc_json_string(lang));
      orc_json_set(r, "message", message);
    }
    free(lang);
    return NULL;
  }
  const orc_json *message = orc_json_get(r, "message");
  if (message && message->type != ORC_JSON_OBJECT) return orc_invalid_configuration("spec.resource.message is not an object");
  orc_json *m = orc_json_take(r, "message");
  if (m) {
    orc_json_set(r, "text", orc_json_take(m, "text"));
    const char *lang = orc_json_get_string(m, "lang", NULL);
    orc_annotation_set(obj, LANG_KEY, lang);
    orc_json_free(m);
  }
  return NULL;
}

static const orc_actuator greeting = {
    .describe = greeting_describe,
    .convert = greeting_convert,
    ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED},
                 {.name = "v1beta1", .resource_schema = V1BETA1, .observed_schema = OBSERVED, .storage = true}),
};

// What the export receives: JSON text (NULL: absent) and annotations.
static orc_failure *parse(orc_convertible *c, const char *resource, const char *filter, const char *observed,
                          const orc_label *annotations, size_t n, const char *from) {
  const char *docs[3] = {resource, filter, observed};
  size_t lens[3] = {resource ? strlen(resource) : 0, filter ? strlen(filter) : 0, observed ? strlen(observed) : 0};
  return orc__convertible_parse(c, docs, lens, annotations, n, from);
}

static bool dumps_as(const orc_json *v, const char *want) {
  char *text = v ? orc_json_dump(v) : NULL;
  bool ok = text && strcmp(text, want) == 0;
  if (!ok) fprintf(stderr, "  got %s, want %s\n", text ? text : "(absent)", want);
  free(text);
  return ok;
}

static void versions(void) {
  CHECK(greeting.n_versions == 2 && greeting.versions[1].storage && !greeting.versions[0].filter_schema);
  CHECK(orc_versions_check(&greeting) == NULL);

  // Round trip from v1beta1 (the lang waits in an annotation at v1alpha1), every other field,
  // document and annotation as it was.
  const orc_label ann[] = {{"team", "a"}, {"example.com/other", "x"}};
  orc_convertible c;
  CHECK(parse(&c, "{\"message\":{\"text\":\"hi\",\"lang\":\"en\"},\"n\":1}", "{\"text\":\"hi\"}", "{\"id\":7}", ann, 2,
              "v1beta1") == NULL);
  orc_convertible want;
  CHECK(parse(&want, "{\"message\":{\"text\":\"hi\",\"lang\":\"en\"},\"n\":1}", "{\"text\":\"hi\"}", "{\"id\":7}", ann, 2,
              "v1beta1") == NULL);
  converts = 0;
  CHECK(orc_convert(&greeting, &c, "v1beta1", "v1alpha1") == NULL);
  CHECK(dumps_as(c.resource, "{\"n\":1,\"text\":\"hi\"}"));
  CHECK(c.n_annotations == 3 && strcmp(orc_annotation(&c, LANG_KEY), "en") == 0 && strcmp(orc_annotation(&c, "team"), "a") == 0);
  CHECK(orc_convert(&greeting, &c, "v1alpha1", "v1beta1") == NULL);
  CHECK(converts == 2);
  CHECK(orc_json_equal(c.resource, want.resource) && orc_json_equal(c.filter, want.filter) &&
        orc_json_equal(c.observed, want.observed));
  CHECK(c.n_annotations == 2 && orc_annotation(&c, LANG_KEY) == NULL && strcmp(orc_annotation(&c, "team"), "a") == 0 &&
        strcmp(orc_annotation(&c, "example.com/other"), "x") == 0);
  // The same version: the SDK answers the object as it is, without calling convert.
  CHECK(orc_convert(&greeting, &c, "v1beta1", "v1beta1") == NULL && converts == 2);
  CHECK(orc_json_equal(c.resource, want.resource));
  orc_convertible_free(&c);
  orc_convertible_free(&want);
  CHECK(c.resource == NULL && c.n_annotations == 0 && c.annotations == NULL);

  // An object without documents converts to one without documents.
  CHECK(parse(&c, NULL, NULL, NULL, NULL, 0, "v1alpha1") == NULL);
  CHECK(orc_convert(&greeting, &c, "v1alpha1", "v1beta1") == NULL && !c.resource && !c.filter && !c.observed);
  orc_convertible_free(&c);

  // A version the table does not list: Unrecoverable, naming both, convert not called.
  CHECK(parse(&c, "{}", NULL, NULL, NULL, 0, "v1alpha1") == NULL);
  converts = 0;
  orc_failure *f = orc_convert(&greeting, &c, "v1alpha1", "v2");
  CHECK(f && f->kind == ORC_UNRECOVERABLE && strstr(f->message, "v1alpha1, v1beta1") && strstr(f->message, "to v2") && converts == 0);
  orc_failure_free(f);
  orc_convertible_free(&c);

  // The plugin's failure is the call's failure, as it is.
  CHECK(parse(&c, "{\"message\":\"hi\"}", NULL, NULL, NULL, 0, "v1beta1") == NULL);
  f = orc_convert(&greeting, &c, "v1beta1", "v1alpha1");
  CHECK(f && f->kind == ORC_INVALID_CONFIGURATION && strcmp(f->message, "spec.resource.message is not an object") == 0);
  orc_failure_free(f);
  orc_convertible_free(&c);

  // A document that is not JSON: InvalidConfiguration naming the field and the version; nothing kept.
  f = parse(&c, "{}", "{\"text\":", NULL, ann, 2, "v1alpha1");
  CHECK(f && f->kind == ORC_INVALID_CONFIGURATION && strstr(f->message, "spec.import.filter at version v1alpha1 is not JSON"));
  CHECK(c.resource == NULL && c.annotations == NULL && c.n_annotations == 0);
  orc_failure_free(f);
  f = parse(&c, NULL, NULL, "nope", NULL, 0, "v1beta1");
  CHECK(f && f->kind == ORC_INVALID_CONFIGURATION && strstr(f->message, "status.resource at version v1beta1"));
  orc_failure_free(f);
  f = parse(&c, "[1,]", NULL, NULL, NULL, 0, "v1beta1");
  CHECK(f && strstr(f->message, "spec.resource at version v1beta1"));
  orc_failure_free(f);

  // No versions by default: one version, convert refuses, the (empty) table checks.
  const orc_actuator plain = {.describe = greeting_describe};
  CHECK(plain.n_versions == 0 && plain.versions == NULL && plain.convert == NULL);
  CHECK(orc_versions_check(&plain) == NULL);
  CHECK(parse(&c, "{}", NULL, NULL, NULL, 0, "v1alpha1") == NULL);
  f = orc_convert(&plain, &c, "v1alpha1", "v1beta1");
  CHECK(f && f->kind == ORC_UNRECOVERABLE && strstr(f->message, "serves one API version"));
  orc_failure_free(f);
  CHECK(orc_convert(&plain, &c, "v1alpha1", "v1alpha1") == NULL);
  orc_convertible_free(&c);

  // Tables the host would refuse.
  const orc_actuator two_storage = {
      .describe = greeting_describe, .convert = greeting_convert,
      ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED, .storage = true},
                   {.name = "v1beta1", .resource_schema = V1BETA1, .observed_schema = OBSERVED, .storage = true})};
  const orc_actuator other_schema = {
      .describe = greeting_describe, .convert = greeting_convert,
      ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1BETA1, .observed_schema = OBSERVED},
                   {.name = "v1beta1", .resource_schema = V1BETA1, .observed_schema = OBSERVED, .storage = true})};
  const orc_actuator unlisted = {
      .describe = greeting_describe, .convert = greeting_convert,
      ORC_VERSIONS({.name = "v1beta1", .resource_schema = V1BETA1, .observed_schema = OBSERVED, .storage = true})};
  const orc_actuator no_convert = {
      .describe = greeting_describe,
      ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED, .storage = true})};
  const orc_actuator bad_name = {
      .describe = greeting_describe, .convert = greeting_convert,
      ORC_VERSIONS({.name = "V1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED, .storage = true})};
  const orc_actuator bad_schema = {
      .describe = greeting_describe, .convert = greeting_convert,
      ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED},
                   {.name = "v1beta1", .resource_schema = "{", .observed_schema = OBSERVED, .storage = true})};
  const struct {
    const orc_actuator *a;
    const char *says;
  } refused[] = {{&two_storage, "exactly one version must be the storage version, 2 are"},
                 {&other_schema, "version v1alpha1 lists other schemas than the description's"},
                 {&unlisted, "the description's version v1alpha1 is not listed"},
                 {&no_convert, "convert is not set"},
                 {&bad_name, "\"V1\" must be a DNS-1123 label"},
                 {&bad_schema, "version v1beta1: resource_schema"}};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    f = orc_versions_check(refused[i].a);
    CHECK(f && f->kind == ORC_UNRECOVERABLE && strstr(f->message, refused[i].says));
    if (f && !strstr(f->message, refused[i].says)) fprintf(stderr, "  got %s\n", f->message);
    orc_failure_free(f);
  }
  CHECK(parse(&c, "{}", NULL, NULL, NULL, 0, "v1alpha1") == NULL);
  f = orc_convert(&no_convert, &c, "v1alpha1", "v1alpha1"); // the same version needs no convert
  CHECK(f == NULL);
  orc_convertible_free(&c);
}

static void annotations_and_take(void) {
  orc_convertible c = {0};
  orc_annotation_set(&c, "a", "1");
  orc_annotation_set(&c, "b", "2");
  orc_annotation_set(&c, "a", "3"); // replaced in place
  CHECK(c.n_annotations == 2 && strcmp(c.annotations[0].key, "a") == 0 && strcmp(c.annotations[0].value, "3") == 0);
  orc_annotation_set(&c, "missing", NULL);
  orc_annotation_set(&c, "a", NULL); // removed
  CHECK(c.n_annotations == 1 && orc_annotation(&c, "a") == NULL && strcmp(orc_annotation(&c, "b"), "2") == 0);
  char *b = orc_annotation_take(&c, "b");
  CHECK(b && strcmp(b, "2") == 0 && c.n_annotations == 0 && orc_annotation_take(&c, "b") == NULL);
  free(b);
  orc_convertible_free(&c);

  const char *text = "{\"a\":1,\"b\":[2],\"c\":3}";
  orc_json *o = orc_json_parse(text, strlen(text), NULL);
  orc_json *v = orc_json_take(o, "b");
  CHECK(v && v->type == ORC_JSON_ARRAY && orc_json_get(o, "b") == NULL && o->len == 2);
  CHECK(dumps_as(o, "{\"a\":1,\"c\":3}"));
  CHECK(orc_json_take(o, "b") == NULL && orc_json_take(v, "x") == NULL && orc_json_take(NULL, "x") == NULL);
  orc_json_set(o, "renamed", v);
  CHECK(dumps_as(o, "{\"a\":1,\"c\":3,\"renamed\":[2]}"));
  orc_json_free(o);
}

int main(void) {
  versions();
  annotations_and_take();
  reports();
  short_forms();
  round_trip(" {\"a\" : [1, 2.5, -3e2, true, false, null], \"b\": {}} ", "{\"a\":[1,2.5,-300,true,false,null],\"b\":{}}");
  round_trip("\"tab\\tquote\\\" slash\\/ \\u00e9 \\ud83d\\ude00\"", "\"tab\\tquote\\\" slash/ \xc3\xa9 \xf0\x9f\x98\x80\"");
  round_trip("\"\\u0001\"", "\"\\u0001\"");
  round_trip("{\"a\":1,\"a\":2}", "{\"a\":2}");
  round_trip("9007199254740993", "9007199254740992");
  rejects("");
  rejects("{");
  rejects("[1,]");
  rejects("{\"a\" 1}");
  rejects("01");
  rejects("1.");
  rejects("\"\\ud800\"");
  rejects("\"ctl\x01\"");
  rejects("tru");
  rejects("{} x");
  // Nesting is bounded.
  char deep[200];
  memset(deep, '[', 100);
  memset(deep + 100, ']', 100);
  char *error = NULL;
  CHECK(orc_json_parse(deep, 200, &error) == NULL && error && strstr(error, "invalid JSON"));
  free(error);
  orc_json *ok = orc_json_parse(deep + 40, 120, NULL); // 60 deep parses
  CHECK(ok != NULL);
  orc_json_free(ok);

  // Reading and building.
  const char *obj_text = "{\"name\":\"k\",\"n\":3,\"on\":true}";
  orc_json *o = orc_json_parse(obj_text, strlen(obj_text), NULL);
  CHECK(o && strcmp(orc_json_get_string(o, "name", ""), "k") == 0);
  CHECK(orc_json_get_number(o, "n", 0) == 3);
  CHECK(orc_json_get_bool(o, "on", false));
  CHECK(strcmp(orc_json_get_string(o, "n", "fallback"), "fallback") == 0);
  CHECK(orc_json_get(o, "missing") == NULL);
  orc_json *copy = orc_json_clone(o);
  CHECK(orc_json_equal(o, copy));
  orc_json_set(copy, "n", orc_json_number(4));
  CHECK(!orc_json_equal(o, copy));
  orc_json_free(copy);
  orc_json_free(o);
  orc_json *built = orc_json_push(orc_json_array(), orc_json_string("a\"b"));
  char *text = orc_json_dump(built);
  CHECK(strcmp(text, "[\"a\\\"b\"]") == 0);
  free(text);
  orc_json_free(built);

  // Strings and statuses.
  char *seg = orc_path_segment("a/b c~");
  CHECK(strcmp(seg, "a%2Fb%20c~") == 0);
  free(seg);
  char *b64 = orc_base64((const uint8_t *)"abcd", 4);
  CHECK(strcmp(b64, "YWJjZA==") == 0);
  free(b64);
  char *auth = orc_basic_auth("user", "pw");
  CHECK(strcmp(auth, "Basic dXNlcjpwdw==") == 0);
  free(auth);
  orc_status s = orc_done();
  CHECK(orc_status_is_done(&s));
  orc_status_and(&s, orc_needs_refresh("x %d", 1));
  orc_status_and(&s, orc_failed(orc_invalid_configuration("bad %s", "spec")));
  orc_status_and(&s, orc_failed(orc_transient("second")));
  CHECK(s.n_progress == 1 && strcmp(s.progress[0].message, "x 1") == 0);
  CHECK(s.failure && s.failure->kind == ORC_INVALID_CONFIGURATION && strcmp(s.failure->message, "bad spec") == 0);
  orc_status_free(&s);

  orc_response r = {.status = 422, .body = "{\"error\":\"no\"}", .body_len = 14};
  orc_failure *f = orc_response_check(&r, "create key");
  CHECK(f && f->kind == ORC_INVALID_CONFIGURATION && strstr(f->message, "HTTP 422"));
  orc_failure_free(f);
  r.status = 503;
  f = orc_response_check(&r, "create key");
  CHECK(f && f->kind == ORC_TRANSIENT);
  orc_failure_free(f);
  r.status = 201;
  CHECK(orc_response_check(&r, "create key") == NULL);

  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
