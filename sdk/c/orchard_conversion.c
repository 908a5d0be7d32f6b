// Several API versions of the Orchard C SDK (see orchard.h): the convertible, the dispatch of
// convert and the check of the version table. Plain C (no bindings): sdk/c/tests/run.sh tests it
// natively; orchard_wasi.c maps the WIT values of orchard:actuator/conversion onto it.
#include "orchard.h"

#include <stdlib.h>
#include <string.h>

#define ORC_VERSIONS_MAX 16 // wit/actuator.wit: at most 16 versions

// -- annotations ------------------------------------------------------------------------------

static long annotation_index(const orc_convertible *obj, const char *key) {
  for (size_t i = 0; i < obj->n_annotations; i++)
    if (strcmp(obj->annotations[i].key, key) == 0) return (long)i;
  return -1;
}

const char *orc_annotation(const orc_convertible *obj, const char *key) {
  long i = annotation_index(obj, key);
  return i < 0 ? NULL : obj->annotations[i].value;
}

char *orc_annotation_take(orc_convertible *obj, const char *key) {
  long i = annotation_index(obj, key);
  if (i < 0) return NULL;
  char *value = (char *)obj->annotations[i].value;
  free((char *)obj->annotations[i].key);
  memmove(obj->annotations + i, obj->annotations + i + 1, (obj->n_annotations - (size_t)i - 1) * sizeof *obj->annotations);
  obj->n_annotations--;
  return value;
}

void orc_annotation_set(orc_convertible *obj, const char *key, const char *value) {
  if (!value) {
    free(orc_annotation_take(obj, key));
    return;
  }
  long i = annotation_index(obj, key);
  if (i >= 0) {
    free((char *)obj->annotations[i].value);
    obj->annotations[i].value = orc_strdup(value);
    return;
  }
  obj->annotations = realloc(obj->annotations, (obj->n_annotations + 1) * sizeof *obj->annotations);
  if (!obj->annotations) abort();
  obj->annotations[obj->n_annotations++] = (orc_label){orc_strdup(key), orc_strdup(value)};
}

void orc_convertible_free(orc_convertible *obj) {
  orc_json_free(obj->resource);
  orc_json_free(obj->filter);
  orc_json_free(obj->observed);
  for (size_t i = 0; i < obj->n_annotations; i++) {
    free((char *)obj->annotations[i].key);
    free((char *)obj->annotations[i].value);
  }
  free(obj->annotations);
  memset(obj, 0, sizeof *obj);
}

// -- what crosses the boundary ----------------------------------------------------------------

static const char *const field_names[3] = {"spec.resource", "spec.import.filter", "status.resource"};

orc_failure *orc__convertible_parse(orc_convertible *out, const char *const docs[3], const size_t lens[3],
                                    const orc_label *annotations, size_t n_annotations, const char *from) {
  memset(out, 0, sizeof *out);
  orc_json **slots[3] = {&out->resource, &out->filter, &out->observed};
  if (n_annotations) {
    // The host sends each key once (a Kubernetes map): copied as they are, in order.
    out->annotations = calloc(n_annotations, sizeof *out->annotations);
    if (!out->annotations) abort();
    for (size_t i = 0; i < n_annotations; i++)
      out->annotations[i] = (orc_label){orc_strdup(annotations[i].key), orc_strdup(annotations[i].value)};
    out->n_annotations = n_annotations;
  }
  for (size_t i = 0; i < 3; i++) {
    if (!docs[i]) continue;
    char *error = NULL;
    *slots[i] = orc_json_parse(docs[i], lens[i], &error);
    if (!*slots[i]) {
      orc_failure *f = orc_invalid_configuration("%s at version %s is not JSON: %s", field_names[i], from,
                                                 error ? error : "invalid JSON");
      free(error);
      orc_convertible_free(out);
      return f;
    }
  }
  return NULL;
}

// -- convert ----------------------------------------------------------------------------------

static const orc_api_version *version_named(const orc_actuator *a, const char *name) {
  for (size_t i = 0; i < a->n_versions; i++)
    if (a->versions[i].name && strcmp(a->versions[i].name, name) == 0) return &a->versions[i];
  return NULL;
}

// "v1alpha1, v1beta1": the names of the table, for messages. Owned.
static char *version_names(const orc_actuator *a) {
  orc_str_builder b = {0};
  for (size_t i = 0; i < a->n_versions; i++) {
    if (i) orc_sb_puts(&b, ", ");
    orc_sb_puts(&b, a->versions[i].name ? a->versions[i].name : "(null)");
  }
  return orc_sb_finish(&b);
}

orc_failure *orc_convert(const orc_actuator *a, orc_convertible *obj, const char *from, const char *to) {
  if (strcmp(from, to) == 0) return NULL; // nothing to convert: the object as it is
  if (a->n_versions == 0)
    return orc_unrecoverable("this plugin serves one API version (asked to convert %s to %s)", from, to);
  if (!version_named(a, from) || !version_named(a, to)) {
    char *names = version_names(a);
    orc_failure *f = orc_unrecoverable("this plugin serves versions %s: cannot convert %s to %s", names, from, to);
    free(names);
    return f;
  }
  if (!a->convert) return orc_unrecoverable("plugin error: versions are listed but convert is not set");
  return a->convert(obj, from, to);
}

// -- the version table ------------------------------------------------------------------------

static bool dns_label(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-') return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-')) return false;
  return true;
}

// NULL when `text` is a JSON object, else why not (owned).
static char *not_schema(const char *text) {
  if (!text) return orc_strdup("missing");
  char *error = NULL;
  orc_json *v = orc_json_parse(text, strlen(text), &error);
  if (v && v->type != ORC_JSON_OBJECT) error = orc_strdup("not a JSON object");
  if (!v && !error) error = orc_strdup("invalid JSON");
  orc_json_free(v);
  return error;
}

// Both absent, or the same JSON.
static bool same_schema(const char *a, const char *b) {
  if (!a || !b) return a == b;
  orc_json *x = orc_json_parse(a, strlen(a), NULL), *y = orc_json_parse(b, strlen(b), NULL);
  bool same = x && y && orc_json_equal(x, y);
  orc_json_free(x);
  orc_json_free(y);
  return same;
}

orc_failure *orc_versions_check(const orc_actuator *a) {
  if (a->n_versions == 0) return NULL;
  if (a->n_versions > ORC_VERSIONS_MAX)
    return orc_unrecoverable("plugin error: %zu versions listed, at most %d", a->n_versions, ORC_VERSIONS_MAX);
  if (!a->versions) return orc_unrecoverable("plugin error: n_versions is %zu but versions is NULL", a->n_versions);
  if (!a->convert) return orc_unrecoverable("plugin error: versions are listed but convert is not set");
  size_t storage = 0;
  for (size_t i = 0; i < a->n_versions; i++) {
    const orc_api_version *v = &a->versions[i];
    if (!v->name || !dns_label(v->name))
      return orc_unrecoverable("plugin error: version \"%s\" must be a DNS-1123 label", v->name ? v->name : "(null)");
    if (version_named(a, v->name) != v) return orc_unrecoverable("plugin error: version %s is listed twice", v->name);
    const char *what[3] = {"resource_schema", "filter_schema", "observed_schema"};
    const char *schemas[3] = {v->resource_schema, v->filter_schema, v->observed_schema};
    for (size_t k = 0; k < 3; k++) {
      if (k == 1 && !schemas[k]) continue; // no filter at this version
      char *why = not_schema(schemas[k]);
      if (why) {
        orc_failure *f = orc_unrecoverable("plugin error: version %s: %s: %s", v->name, what[k], why);
        free(why);
        return f;
      }
    }
    storage += v->storage;
  }
  if (storage != 1) return orc_unrecoverable("plugin error: exactly one version must be the storage version, %zu are", storage);
  orc_description d = {0};
  if (a->describe) a->describe(&d);
  const orc_api_version *at = d.version ? version_named(a, d.version) : NULL;
  if (!at)
    return orc_unrecoverable("plugin error: the description's version %s is not listed (every call sees it)",
                             d.version ? d.version : "(null)");
  if (!same_schema(at->resource_schema, d.resource_schema) || !same_schema(at->filter_schema, d.filter_schema) ||
      !same_schema(at->observed_schema, d.observed_schema))
    return orc_unrecoverable("plugin error: version %s lists other schemas than the description's, which is at that version",
                             d.version);
  return NULL;
}
