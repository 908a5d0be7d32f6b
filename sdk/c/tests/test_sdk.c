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

int main(void) {
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
