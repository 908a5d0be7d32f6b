// Native tests of the two-version example (sdk/c/examples/greeting): its version table as the
// host checks it, and its conversion both ways through orc_convert, the component's path.
//   sdk/c/tests/run.sh
// Natively there is no HTTP: the example's file is included as is, orc_http_send is a stub.
#include <stdio.h>

#include "../examples/greeting/greeting.c"

orc_failure *orc_http_send(const orc_request *req, orc_response *out) {
  memset(out, 0, sizeof *out);
  return orc_transient("no HTTP in native tests (%s %s)", req->method, req->url);
}

static int passed, failed;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond) passed++;                                                                            \
    else failed++, fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);         \
  } while (0)

static orc_convertible at(const char *resource) {
  orc_convertible c = {.resource = orc_json_parse(resource, strlen(resource), NULL),
                       .observed = orc_json_parse("{\"id\":1}", 8, NULL)};
  orc_annotation_set(&c, "team", "docs");
  return c;
}

static bool same(const orc_convertible *a, const orc_convertible *b) {
  if (!orc_json_equal(a->resource, b->resource) || !orc_json_equal(a->filter, b->filter) ||
      !orc_json_equal(a->observed, b->observed) || a->n_annotations != b->n_annotations)
    return false;
  for (size_t i = 0; i < a->n_annotations; i++) {
    const char *v = orc_annotation(b, a->annotations[i].key);
    if (!v || strcmp(v, a->annotations[i].value) != 0) return false;
  }
  return true;
}

// from -> to -> from gives the object back; at `to` its spec.resource dumps as want_at_to.
static bool round_trip(const char *resource, const char *from, const char *to, const char *want_at_to) {
  orc_convertible obj = at(resource), want = at(resource);
  bool ok = orc_convert(&greeting, &obj, from, to) == NULL;
  char *text = obj.resource ? orc_json_dump(obj.resource) : NULL;
  if (ok && want_at_to && (!text || strcmp(text, want_at_to) != 0)) {
    fprintf(stderr, "  at %s: got %s, want %s\n", to, text ? text : "(absent)", want_at_to);
    ok = false;
  }
  free(text);
  ok = ok && orc_convert(&greeting, &obj, to, from) == NULL && same(&obj, &want);
  orc_convertible_free(&obj);
  orc_convertible_free(&want);
  return ok;
}

int main(void) {
  orc_failure *f = orc_versions_check(&greeting);
  CHECK(f == NULL);
  if (f) fprintf(stderr, "  %s\n", f->message), orc_failure_free(f);

  CHECK(round_trip("{\"name\":\"bonjour\",\"message\":{\"text\":\"Bonjour\",\"lang\":\"fr\"}}", "v1beta1", "v1alpha1",
                   "{\"name\":\"bonjour\",\"text\":\"Bonjour\"}"));
  CHECK(round_trip("{\"name\":\"hi\",\"message\":{\"text\":\"Hi\"}}", "v1beta1", "v1alpha1", "{\"name\":\"hi\",\"text\":\"Hi\"}"));
  CHECK(round_trip("{\"name\":\"hello\",\"text\":\"Hello\"}", "v1alpha1", "v1beta1",
                   "{\"name\":\"hello\",\"message\":{\"text\":\"Hello\"}}"));

  // The language waits in the annotation at v1alpha1.
  orc_convertible obj = at("{\"name\":\"bonjour\",\"message\":{\"text\":\"Bonjour\",\"lang\":\"fr\"}}");
  CHECK(orc_convert(&greeting, &obj, "v1beta1", "v1alpha1") == NULL);
  CHECK(strcmp(orc_annotation(&obj, LANG_ANNOTATION), "fr") == 0 && strcmp(orc_annotation(&obj, "team"), "docs") == 0);
  orc_convertible_free(&obj);

  // An object the conversion cannot read: InvalidConfiguration naming the field.
  obj = at("{\"name\":\"x\",\"message\":\"Bonjour\"}");
  f = orc_convert(&greeting, &obj, "v1beta1", "v1alpha1");
  CHECK(f && f->kind == ORC_INVALID_CONFIGURATION && strstr(f->message, "spec.resource.message"));
  orc_failure_free(f);
  orc_convertible_free(&obj);

  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
