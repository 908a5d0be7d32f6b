// Failures, statuses, object helpers and lists of the Orchard C SDK (see orchard.h).
#include "orchard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static orc_failure *orc_failure_v(orc_failure_kind kind, const char *fmt, va_list ap) {
  orc_failure *f = calloc(1, sizeof *f);
  if (!f) abort();
  f->kind = kind;
  f->message = orc_vsprintf(fmt, ap);
  return f;
}

#define ORC_FAILURE_CTOR(fn, kind)                                                                 \
  orc_failure *fn(const char *fmt, ...) {                                                          \
    va_list ap;                                                                                    \
    va_start(ap, fmt);                                                                             \
    orc_failure *f = orc_failure_v(kind, fmt, ap);                                                 \
    va_end(ap);                                                                                    \
    return f;                                                                                      \
  }
ORC_FAILURE_CTOR(orc_transient, ORC_TRANSIENT)
ORC_FAILURE_CTOR(orc_invalid_configuration, ORC_INVALID_CONFIGURATION)
ORC_FAILURE_CTOR(orc_unrecoverable, ORC_UNRECOVERABLE)

void orc_failure_free(orc_failure *f) {
  if (!f) return;
  free(f->message);
  free(f);
}

orc_status orc_done(void) { return (orc_status){0}; }

orc_status orc_failed(orc_failure *f) { return (orc_status){.failure = f}; }

static orc_status orc_one(orc_progress p) {
  orc_status s = {0};
  s.progress = calloc(1, sizeof *s.progress);
  if (!s.progress) abort();
  s.progress[0] = p;
  s.n_progress = 1;
  return s;
}

orc_status orc_needs_refresh(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  orc_progress p = {.kind = ORC_NEEDS_REFRESH, .message = orc_vsprintf(fmt, ap)};
  va_end(ap);
  return orc_one(p);
}

orc_status orc_wait_external(orc_wait_event event, uint32_t poll_after_ms, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  orc_progress p = {.kind = ORC_WAITING_ON_EXTERNAL, .event = event, .poll_after_ms = poll_after_ms,
                    .message = orc_vsprintf(fmt, ap)};
  va_end(ap);
  return orc_one(p);
}

orc_status orc_wait_object(const char *kind, const char *name, orc_wait_event event) {
  orc_progress p = {.kind = ORC_WAITING_ON_OBJECT, .event = event, .kind_name = orc_strdup(kind),
                    .name = orc_strdup(name)};
  return orc_one(p);
}

bool orc_status_is_done(const orc_status *s) { return s->n_progress == 0 && !s->failure; }

void orc_status_and(orc_status *s, orc_status other) {
  if (other.n_progress) {
    s->progress = realloc(s->progress, (s->n_progress + other.n_progress) * sizeof *s->progress);
    if (!s->progress) abort();
    memcpy(s->progress + s->n_progress, other.progress, other.n_progress * sizeof *other.progress);
    s->n_progress += other.n_progress;
  }
  free(other.progress);
  if (!s->failure) s->failure = other.failure;
  else orc_failure_free(other.failure);
}

void orc_status_free(orc_status *s) {
  for (size_t i = 0; i < s->n_progress; i++) {
    free(s->progress[i].message);
    free(s->progress[i].kind_name);
    free(s->progress[i].name);
  }
  free(s->progress);
  orc_failure_free(s->failure);
  *s = orc_done();
}

const orc_json *orc_require_spec(const orc_object *obj, orc_failure **failure) {
  if (obj->spec) return obj->spec;
  *failure = orc_invalid_configuration("%s: this call needs spec.resource", obj->name);
  return NULL;
}

char *orc_credential_string(const orc_object *obj, const char *key, orc_failure **failure) {
  for (size_t i = 0; i < obj->n_credentials; i++)
    if (strcmp(obj->credentials[i].key, key) == 0)
      return orc_strndup((const char *)obj->credentials[i].value, obj->credentials[i].len);
  *failure = orc_invalid_configuration("%s: the credentials Secret has no key \"%s\"", obj->name, key);
  return NULL;
}

const char *orc_dependency_id(const orc_object *obj, const char *name, orc_failure **failure) {
  for (size_t i = 0; i < obj->n_dependencies; i++) {
    const orc_dependency *d = &obj->dependencies[i];
    if (strcmp(d->name, name) != 0) continue;
    if (d->id && *d->id) return d->id;
    *failure = orc_transient("dependency %s %s/%s has no status.id yet", name, d->kind, d->object);
    return NULL;
  }
  *failure = orc_transient("dependency \"%s\" was not resolved by the host", name);
  return NULL;
}

orc_resource_out orc_resource_new(const char *id, orc_json *state) {
  return (orc_resource_out){orc_strdup(id), state};
}

void orc_resources_push(orc_resources *list, orc_resource_out res) {
  if (list->len == list->cap) {
    list->cap = list->cap ? list->cap * 2 : 4;
    list->items = realloc(list->items, list->cap * sizeof *list->items);
    if (!list->items) abort();
  }
  list->items[list->len++] = res;
}

void orc_names_push(orc_names *list, const char *name) {
  if (list->len == list->cap) {
    list->cap = list->cap ? list->cap * 2 : 4;
    list->items = realloc(list->items, list->cap * sizeof *list->items);
    if (!list->items) abort();
  }
  list->items[list->len++] = orc_strdup(name);
}

char *orc_path_segment(const char *s) {
  orc_str_builder b = {0};
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-_.~", c)) {
      orc_sb_append(&b, (const char *)&c, 1);
    } else {
      char esc[4];
      snprintf(esc, sizeof esc, "%%%02X", c);
      orc_sb_append(&b, esc, 3);
    }
  }
  return orc_sb_finish(&b);
}

orc_failure *orc_response_check(const orc_response *r, const char *what) {
  if (r->status >= 200 && r->status < 300) return NULL;
  int n = r->body_len > 1000 ? 1000 : (int)r->body_len;
  const char *body = r->body ? r->body : "";
  bool invalid = r->status >= 400 && r->status < 500 && r->status != 404 && r->status != 408 &&
                 r->status != 409 && r->status != 429;
  return invalid ? orc_invalid_configuration("%s: HTTP %d: %.*s", what, r->status, n, body)
                 : orc_transient("%s: HTTP %d: %.*s", what, r->status, n, body);
}

orc_json *orc_response_json(const orc_response *r, orc_failure **failure) {
  char *error = NULL;
  orc_json *v = orc_json_parse(r->body ? r->body : "", r->body_len, &error);
  if (!v) {
    int n = r->body_len > 200 ? 200 : (int)r->body_len;
    *failure = orc_transient("response is not JSON: %s: %.*s", error ? error : "?", n, r->body ? r->body : "");
    free(error);
  }
  return v;
}

void orc_response_free(orc_response *r) {
  free(r->body);
  r->body = NULL;
  r->body_len = 0;
}

orc_status orc_ensure(const orc_resource_handler *h) {
  orc_json *current = NULL;
  orc_failure *f = h->current(h->ctx, &current);
  const char *what = NULL;
  if (!f) {
    bool required = h->is_required(h->ctx);
    if (!required && current) {
      if (!(f = h->delete_(h->ctx, current))) what = "deleted";
    } else if (required && !current) {
      if (!(f = h->create(h->ctx))) what = "created";
    } else if (required) {
      bool changed = false;
      if (!(f = h->update(h->ctx, current, &changed)) && changed) what = "updated";
    }
  }
  orc_json_free(current);
  if (f) return orc_failed(f);
  return what ? orc_needs_refresh("%s %s", h->name, what) : orc_done();
}

char *orc_base64(const uint8_t *bytes, size_t n) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  orc_str_builder b = {0};
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)bytes[i] << 16 | (i + 1 < n ? (uint32_t)bytes[i + 1] << 8 : 0) | (i + 2 < n ? bytes[i + 2] : 0);
    char out[4] = {alphabet[v >> 18 & 63], alphabet[v >> 12 & 63], i + 1 < n ? alphabet[v >> 6 & 63] : '=',
                   i + 2 < n ? alphabet[v & 63] : '='};
    orc_sb_append(&b, out, 4);
  }
  return orc_sb_finish(&b);
}

char *orc_basic_auth(const char *user, const char *password) {
  char *pair = orc_sprintf("%s:%s", user, password);
  char *token = orc_base64((const uint8_t *)pair, strlen(pair));
  char *out = orc_sprintf("Basic %s", token);
  free(pair);
  free(token);
  return out;
}
