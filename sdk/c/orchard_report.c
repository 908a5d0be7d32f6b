// Reports (orchard:actuator/report): serialisation and diffs here; the transport is
// orc__send_detail / orc__send_drift (orchard_wasi.c in a component, the collector below
// natively).
#include <stdlib.h>
#include <string.h>

#include "orchard.h"

void orc_report_connection_detail(const char *key, const uint8_t *value, size_t len) {
  orc__send_detail(key, value, len);
}

void orc_report_connection_detail_string(const char *key, const char *value) {
  orc__send_detail(key, (const uint8_t *)value, value ? strlen(value) : 0);
}

static char *dump(const orc_json *v) { return v ? orc_json_dump(v) : NULL; }

static void drift_free(orc_drift *d) {
  free(d->field);
  free(d->observed);
  free(d->desired);
}

void orc_report_drift(const char *field, const orc_json *observed, const orc_json *desired, bool sensitive) {
  orc_drift d = {orc_strdup(field), dump(observed), dump(desired), sensitive};
  orc__send_drift(&d);
  drift_free(&d);
}

void orc_report_drift_string(const char *field, const char *observed, const char *desired, bool sensitive) {
  orc_json *o = observed ? orc_json_string(observed) : NULL, *w = desired ? orc_json_string(desired) : NULL;
  orc_report_drift(field, o, w, sensitive);
  orc_json_free(o);
  orc_json_free(w);
}

void orc_diff_field(orc_diff *d, const char *field, const orc_json *observed, const orc_json *desired, bool sensitive) {
  bool same = (!observed || !desired) ? observed == desired : orc_json_equal(observed, desired);
  if (same) return;
  d->items = realloc(d->items, (d->len + 1) * sizeof *d->items);
  if (!d->items) abort();
  d->items[d->len++] = (orc_drift){orc_strdup(field), dump(observed), dump(desired), sensitive};
}

static const orc_json *lookup(const orc_json *v, const char *path) {
  char *copy = orc_strdup(path), *save = NULL;
  for (char *key = strtok_r(copy, ".", &save); key && v; key = strtok_r(NULL, ".", &save))
    v = (v->type == ORC_JSON_OBJECT) ? orc_json_get(v, key) : NULL;
  free(copy);
  return v;
}

orc_diff orc_diff_fields(const orc_json *observed, const orc_json *desired, const char *const *fields, size_t n) {
  orc_diff d = {0};
  for (size_t i = 0; i < n; i++)
    orc_diff_field(&d, fields[i], observed ? lookup(observed, fields[i]) : NULL,
                   desired ? lookup(desired, fields[i]) : NULL, false);
  return d;
}

size_t orc_diff_report(orc_diff *d) {
  size_t n = d->len;
  for (size_t i = 0; i < n; i++) orc__send_drift(&d->items[i]);
  orc_diff_free(d);
  return n;
}

void orc_diff_free(orc_diff *d) {
  for (size_t i = 0; i < d->len; i++) drift_free(&d->items[i]);
  free(d->items);
  d->items = NULL;
  d->len = 0;
}

#ifndef __wasm__
#define NATIVE_LIMIT 1024
static orc_reports collected;

void orc__send_detail(const char *key, const uint8_t *value, size_t len) {
  if (collected.n_details >= NATIVE_LIMIT) return;
  collected.details = realloc(collected.details, (collected.n_details + 1) * sizeof *collected.details);
  if (!collected.details) abort();
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) abort();
  if (len) memcpy(copy, value, len);
  collected.details[collected.n_details++] = (orc_detail){orc_strdup(key), copy, len};
}

static char *dup_or_null(const char *s) { return s ? orc_strdup(s) : NULL; }

void orc__send_drift(const orc_drift *d) {
  if (collected.n_drifts >= NATIVE_LIMIT) return;
  collected.drifts = realloc(collected.drifts, (collected.n_drifts + 1) * sizeof *collected.drifts);
  if (!collected.drifts) abort();
  collected.drifts[collected.n_drifts++] =
      (orc_drift){orc_strdup(d->field), dup_or_null(d->observed), dup_or_null(d->desired), d->sensitive};
}

orc_reports orc_reports_take(void) {
  orc_reports got = collected;
  memset(&collected, 0, sizeof collected);
  return got;
}

void orc_reports_free(orc_reports *r) {
  for (size_t i = 0; i < r->n_details; i++) {
    free(r->details[i].key);
    free(r->details[i].value);
  }
  for (size_t i = 0; i < r->n_drifts; i++) drift_free(&r->drifts[i]);
  free(r->details);
  free(r->drifts);
  memset(r, 0, sizeof *r);
}
#endif
