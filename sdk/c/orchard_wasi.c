// The Orchard C SDK inside a component: the exported contract (dispatching to the plugin's
// orc_actuator), blocking HTTP over wasi:http, logging and reports. Compiled against the bindings that
// sdk/c/build.sh generates with the pinned wit-bindgen (actuator_plugin.h).
//
// The component is always built for the world versioned-actuator-plugin: a plugin that lists no
// versions exports `conversion` too, answering versions() = [] (one version, as before 0.1.2).
//
// Ownership at the boundary (wit-bindgen's C conventions): the arguments of an export belong
// to it (freed here after the plugin returns); everything an export returns must be heap
// memory, which the generated post-return functions free; arguments passed to an import stay
// the caller's.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shortcut_actuator_plugin.h"
#include "orchard.h"

typedef shortcut_actuator_plugin_string_t wstr;
typedef orchard_actuator_types_managed_object_t wobject;
typedef orchard_actuator_types_external_resource_t wresource;
typedef orchard_actuator_types_status_t wstatus;
typedef orchard_actuator_types_failure_t wfailure;

static const orc_actuator *actuator(void) { return orchard_exported_actuator; }

static char *cstr(const wstr *s) { return orc_strndup((const char *)s->ptr, s->len); }

// Takes a malloc'd NUL-terminated string as a WIT string (no copy).
static wstr wtake(char *s) {
  wstr out = {(uint8_t *)s, strlen(s)};
  if (out.len == 0) {
    free(s);
    out.ptr = NULL;
  }
  return out;
}

static wstr wdup(const char *s) { return wtake(orc_strdup(s ? s : "")); }

// -- logging ----------------------------------------------------------------------------------

void orc_log(orc_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = orc_vsprintf(fmt, ap);
  va_end(ap);
  wstr message = {(uint8_t *)line, strlen(line)};
  orchard_actuator_log_log((orchard_actuator_log_level_t)level, &message);
  free(line);
}

// -- reports ----------------------------------------------------------------------------------

void orc__send_detail(const char *key, const uint8_t *value, size_t len) {
  wstr k = {(uint8_t *)key, strlen(key)};
  shortcut_actuator_plugin_list_u8_t v = {(uint8_t *)value, len};
  orchard_actuator_report_connection_detail(&k, &v);
}

void orc__send_drift(const orc_drift *d) {
  wstr field = {(uint8_t *)d->field, strlen(d->field)};
  wstr observed = {(uint8_t *)d->observed, d->observed ? strlen(d->observed) : 0};
  wstr desired = {(uint8_t *)d->desired, d->desired ? strlen(d->desired) : 0};
  orchard_actuator_report_drift(&field, d->observed ? &observed : NULL, d->desired ? &desired : NULL, d->sensitive);
}

// -- arguments in -----------------------------------------------------------------------------

// An object as the plugin sees it, with the storage behind its borrowed pointers.
typedef struct {
  orc_object obj;
  orc_json *spec;
  char *strings[3], *status_id;
  orc_label *labels, *annotations;
  orc_dependency *deps;
  orc_json **observed;
  orc_credential *creds;
  char **owned; // every other string, freed with the object
  size_t n_owned;
  orc_failure *failure; // a spec that is not JSON
} object_in;

static const char *keep(object_in *in, char *s) {
  in->owned = realloc(in->owned, (in->n_owned + 1) * sizeof *in->owned);
  if (!in->owned) abort();
  in->owned[in->n_owned++] = s;
  return s;
}

static orc_label *labels_in(object_in *in, const shortcut_actuator_plugin_list_tuple2_string_string_t *l) {
  orc_label *out = calloc(l->len + 1, sizeof *out);
  if (!out) abort();
  for (size_t i = 0; i < l->len; i++)
    out[i] = (orc_label){keep(in, cstr(&l->ptr[i].f0)), keep(in, cstr(&l->ptr[i].f1))};
  return out;
}

static void object_open(object_in *in, wobject *w) {
  memset(in, 0, sizeof *in);
  orc_object *o = &in->obj;
  o->name = in->strings[0] = cstr(&w->name);
  o->namespace_ = in->strings[1] = cstr(&w->namespace_);
  o->uid = in->strings[2] = cstr(&w->uid);
  o->generation = w->generation;
  o->labels = in->labels = labels_in(in, &w->labels);
  o->n_labels = w->labels.len;
  o->annotations = in->annotations = labels_in(in, &w->annotations);
  o->n_annotations = w->annotations.len;
  if (w->status_id.is_some) o->status_id = in->status_id = cstr(&w->status_id.val);
  if (w->spec.is_some) {
    char *error = NULL;
    in->spec = orc_json_parse((const char *)w->spec.val.ptr, w->spec.val.len, &error);
    if (!in->spec) in->failure = orc_invalid_configuration("%s: spec.resource: %s", o->name, error ? error : "not JSON");
    free(error);
    o->spec = in->spec;
  }
  size_t nd = w->dependencies.len;
  in->deps = calloc(nd + 1, sizeof *in->deps);
  in->observed = calloc(nd + 1, sizeof *in->observed);
  if (!in->deps || !in->observed) abort();
  for (size_t i = 0; i < nd; i++) {
    orchard_actuator_types_dependency_t *d = &w->dependencies.ptr[i];
    in->deps[i].name = keep(in, cstr(&d->name));
    in->deps[i].kind = keep(in, cstr(&d->kind));
    in->deps[i].object = keep(in, cstr(&d->object));
    if (d->id.is_some) in->deps[i].id = keep(in, cstr(&d->id.val));
    if (d->observed.is_some) {
      in->observed[i] = orc_json_parse((const char *)d->observed.val.ptr, d->observed.val.len, NULL);
      in->deps[i].observed = in->observed[i];
    }
  }
  o->dependencies = in->deps;
  o->n_dependencies = nd;
  in->creds = calloc(w->credentials.len + 1, sizeof *in->creds);
  if (!in->creds) abort();
  for (size_t i = 0; i < w->credentials.len; i++) {
    shortcut_actuator_plugin_tuple2_string_list_u8_t *c = &w->credentials.ptr[i];
    uint8_t *value = malloc(c->f1.len + 1);
    if (!value) abort();
    memcpy(value, c->f1.ptr, c->f1.len);
    value[c->f1.len] = 0;
    in->creds[i] = (orc_credential){keep(in, cstr(&c->f0)), (const uint8_t *)keep(in, (char *)value), c->f1.len};
  }
  o->credentials = in->creds;
  o->n_credentials = w->credentials.len;
  orchard_actuator_types_managed_object_free(w);
}

static void object_close(object_in *in) {
  for (size_t i = 0; i < 3; i++) free(in->strings[i]);
  free(in->status_id);
  for (size_t i = 0; i < in->n_owned; i++) free(in->owned[i]);
  free(in->owned);
  for (size_t i = 0; i < in->obj.n_dependencies; i++) orc_json_free(in->observed[i]);
  free(in->observed);
  free(in->deps);
  free(in->labels);
  free(in->annotations);
  free(in->creds);
  orc_json_free(in->spec);
  orc_failure_free(in->failure);
}

typedef struct {
  orc_resource res;
  char *id;
  orc_json *state;
  orc_failure *failure; // a state that is not JSON
} resource_in;

static void resource_open(resource_in *in, wresource *w) {
  memset(in, 0, sizeof *in);
  in->res.id = in->id = cstr(&w->id);
  char *error = NULL;
  in->state = orc_json_parse((const char *)w->state.ptr, w->state.len, &error);
  if (!in->state) in->failure = orc_transient("state of external resource %s: %s", in->id, error ? error : "not JSON");
  free(error);
  in->res.state = in->state;
  orchard_actuator_types_external_resource_free(w);
}

static void resource_close(resource_in *in) {
  free(in->id);
  orc_json_free(in->state);
  orc_failure_free(in->failure);
}

// -- results out ------------------------------------------------------------------------------

static wfailure failure_out(orc_failure *f) {
  wfailure out = {.tag = ORCHARD_ACTUATOR_TYPES_FAILURE_TRANSIENT};
  if (f->kind == ORC_INVALID_CONFIGURATION) out.tag = ORCHARD_ACTUATOR_TYPES_FAILURE_INVALID_CONFIGURATION;
  if (f->kind == ORC_UNRECOVERABLE) out.tag = ORCHARD_ACTUATOR_TYPES_FAILURE_UNRECOVERABLE;
  out.val.transient = wtake(f->message); // the three cases share the layout
  free(f);
  return out;
}

static wstatus status_out(orc_status s) {
  wstatus out = {0};
  if (s.n_progress) {
    out.progress.ptr = calloc(s.n_progress, sizeof *out.progress.ptr);
    if (!out.progress.ptr) abort();
    out.progress.len = s.n_progress;
  }
  for (size_t i = 0; i < s.n_progress; i++) {
    orc_progress *p = &s.progress[i];
    orchard_actuator_types_progress_t *w = &out.progress.ptr[i];
    switch (p->kind) {
    case ORC_WAITING_ON_EXTERNAL:
      w->tag = ORCHARD_ACTUATOR_TYPES_PROGRESS_WAITING_ON_EXTERNAL;
      w->val.waiting_on_external = (orchard_actuator_types_external_wait_t){
          (orchard_actuator_types_wait_event_t)p->event, wtake(p->message ? p->message : orc_strdup("")), p->poll_after_ms};
      p->message = NULL;
      break;
    case ORC_WAITING_ON_OBJECT:
      w->tag = ORCHARD_ACTUATOR_TYPES_PROGRESS_WAITING_ON_OBJECT;
      w->val.waiting_on_object = (orchard_actuator_types_object_wait_t){
          {wtake(p->kind_name ? p->kind_name : orc_strdup("")), wtake(p->name ? p->name : orc_strdup(""))},
          (orchard_actuator_types_wait_event_t)p->event};
      p->kind_name = p->name = NULL;
      break;
    case ORC_NEEDS_REFRESH:
      w->tag = ORCHARD_ACTUATOR_TYPES_PROGRESS_NEEDS_REFRESH;
      w->val.needs_refresh = wtake(p->message ? p->message : orc_strdup(""));
      p->message = NULL;
      break;
    }
  }
  if (s.failure) {
    out.failure.is_some = true;
    out.failure.val = failure_out(s.failure);
    s.failure = NULL;
  }
  orc_status_free(&s);
  return out;
}

static wresource resource_out(orc_resource_out r) {
  char *state = orc_json_dump(r.state);
  orc_json_free(r.state);
  return (wresource){wtake(r.id ? r.id : orc_strdup("")), wtake(state)};
}

static exports_orchard_actuator_actuator_list_external_resource_t resources_out(orc_resources *list) {
  exports_orchard_actuator_actuator_list_external_resource_t out = {0};
  if (list->len) {
    out.ptr = calloc(list->len, sizeof *out.ptr);
    if (!out.ptr) abort();
  }
  for (size_t i = 0; i < list->len; i++) out.ptr[i] = resource_out(list->items[i]);
  out.len = list->len;
  free(list->items);
  return out;
}

static void resources_free(orc_resources *list) {
  for (size_t i = 0; i < list->len; i++) {
    free(list->items[i].id);
    orc_json_free(list->items[i].state);
  }
  free(list->items);
}

// A resource with an empty id cannot be stored: the plugin's mistake, terminal.
static orc_failure *check_ids(const orc_resources *list) {
  for (size_t i = 0; i < list->len; i++)
    if (!list->items[i].id || !*list->items[i].id) return orc_unrecoverable("plugin error: a resource needs a non-empty id");
  return NULL;
}

// -- the exports ------------------------------------------------------------------------------

void exports_orchard_actuator_actuator_describe(orchard_actuator_types_description_t *ret) {
  orc_description d = {0};
  actuator()->describe(&d);
  memset(ret, 0, sizeof *ret);
  ret->name = wdup(d.name);
  ret->group = wdup(d.group);
  ret->version = wdup(d.version);
  ret->kind = wdup(d.kind);
  ret->plural = wdup(d.plural);
  ret->resource_schema = wdup(d.resource_schema);
  ret->observed_schema = wdup(d.observed_schema);
  if (d.filter_schema) {
    ret->filter_schema.is_some = true;
    ret->filter_schema.val = wdup(d.filter_schema);
  }
  if (d.n_dependencies) {
    ret->dependencies.ptr = calloc(d.n_dependencies, sizeof *ret->dependencies.ptr);
    if (!ret->dependencies.ptr) abort();
    ret->dependencies.len = d.n_dependencies;
  }
  for (size_t i = 0; i < d.n_dependencies; i++) {
    const orc_dependency_decl *x = &d.dependencies[i];
    ret->dependencies.ptr[i] = (orchard_actuator_types_dependency_decl_t){
        wdup(x->name), wdup(x->field), wdup(x->kind), x->for_create, x->for_delete, x->guard_deletion};
  }
  ret->needs_credentials = d.needs_credentials;
}

bool exports_orchard_actuator_actuator_get_by_id(wobject *obj, wstr *id, exports_orchard_actuator_actuator_option_external_resource_t *ret,
                                                 wfailure *err) {
  object_in in;
  object_open(&in, obj);
  char *key = cstr(id);
  shortcut_actuator_plugin_string_free(id);
  orc_resource_out *found = NULL;
  orc_failure *f = in.failure;
  in.failure = NULL;
  if (!f) f = actuator()->get_by_id(&in.obj, key, &found);
  if (!f && found && (!found->id || !*found->id)) f = orc_unrecoverable("plugin error: a resource needs a non-empty id");
  free(key);
  object_close(&in);
  if (f) {
    if (found) {
      free(found->id);
      orc_json_free(found->state);
      free(found);
    }
    *err = failure_out(f);
    return false;
  }
  ret->is_some = found != NULL;
  if (found) {
    ret->val = resource_out(*found);
    free(found);
  }
  return true;
}

bool exports_orchard_actuator_actuator_list_for_adoption(wobject *obj, exports_orchard_actuator_actuator_option_list_external_resource_t *ret,
                                                         wfailure *err) {
  object_in in;
  object_open(&in, obj);
  orc_resources list = {0};
  bool applies = false;
  orc_failure *f = in.failure;
  in.failure = NULL;
  if (!f && actuator()->list_for_adoption) f = actuator()->list_for_adoption(&in.obj, &list, &applies);
  if (!f) f = check_ids(&list);
  object_close(&in);
  if (f) {
    resources_free(&list);
    *err = failure_out(f);
    return false;
  }
  ret->is_some = applies;
  if (applies) ret->val = resources_out(&list);
  else resources_free(&list);
  return true;
}

bool exports_orchard_actuator_actuator_list_for_import(wobject *obj, wstr *filter, exports_orchard_actuator_actuator_list_external_resource_t *ret,
                                                       wfailure *err) {
  object_in in;
  object_open(&in, obj);
  char *error = NULL;
  orc_json *parsed = orc_json_parse((const char *)filter->ptr, filter->len, &error);
  shortcut_actuator_plugin_string_free(filter);
  orc_resources list = {0};
  orc_failure *f = in.failure;
  in.failure = NULL;
  if (!f && !parsed) f = orc_invalid_configuration("%s: spec.import.filter: %s", in.obj.name, error ? error : "not JSON");
  if (!f && !actuator()->list_for_import) f = orc_invalid_configuration("this plugin does not support import by filter");
  if (!f) f = actuator()->list_for_import(&in.obj, parsed, &list);
  if (!f) f = check_ids(&list);
  free(error);
  orc_json_free(parsed);
  object_close(&in);
  if (f) {
    resources_free(&list);
    *err = failure_out(f);
    return false;
  }
  *ret = resources_out(&list);
  return true;
}

bool exports_orchard_actuator_actuator_create(wobject *obj, wresource *ret, wstatus *err) {
  object_in in;
  object_open(&in, obj);
  orc_resource_out out = {0};
  orc_status s = orc_done();
  if (in.failure) {
    s = orc_failed(in.failure);
    in.failure = NULL;
  } else {
    s = actuator()->create(&in.obj, &out);
  }
  object_close(&in);
  if (orc_status_is_done(&s) && (!out.id || !*out.id))
    s = orc_failed(orc_unrecoverable("plugin error: create returned a done status without a resource"));
  if (!orc_status_is_done(&s)) {
    free(out.id);
    orc_json_free(out.state);
    *err = status_out(s);
    return false;
  }
  *ret = resource_out(out);
  return true;
}

// A step on an object and a resource; their decoding failures come first.
static orc_status step(wobject *obj, wresource *res, orc_status (*run)(const orc_object *, const orc_resource *, void *),
                       void *ctx) {
  object_in in;
  resource_in r;
  object_open(&in, obj);
  resource_open(&r, res);
  orc_status s;
  if (in.failure) s = orc_failed(in.failure), in.failure = NULL;
  else if (r.failure) s = orc_failed(r.failure), r.failure = NULL;
  else s = run(&in.obj, &r.res, ctx);
  resource_close(&r);
  object_close(&in);
  return s;
}

static orc_status run_delete(const orc_object *o, const orc_resource *r, void *ctx) {
  (void)ctx;
  return actuator()->delete_(o, r);
}

void exports_orchard_actuator_actuator_delete(wobject *obj, wresource *res, wstatus *ret) {
  *ret = status_out(step(obj, res, run_delete, NULL));
}

static orc_status run_named(const orc_object *o, const orc_resource *r, void *ctx) {
  if (!actuator()->run_reconciler) return orc_failed(orc_unrecoverable("no reconciler named \"%s\"", (const char *)ctx));
  return actuator()->run_reconciler((const char *)ctx, o, r);
}

void exports_orchard_actuator_actuator_run_reconciler(wstr *name, wobject *obj, wresource *res, wstatus *ret) {
  char *n = cstr(name);
  shortcut_actuator_plugin_string_free(name);
  *ret = status_out(step(obj, res, run_named, n));
  free(n);
}

typedef struct {
  orc_names names;
  orc_availability availability;
} outputs;

static orc_status run_reconcilers(const orc_object *o, const orc_resource *r, void *ctx) {
  outputs *out = ctx;
  orc_failure *f = actuator()->reconcilers ? actuator()->reconcilers(o, r, &out->names) : NULL;
  return f ? orc_failed(f) : orc_done();
}

bool exports_orchard_actuator_actuator_reconcilers(wobject *obj, wresource *res, shortcut_actuator_plugin_list_string_t *ret, wfailure *err) {
  outputs out = {0};
  orc_status s = step(obj, res, run_reconcilers, &out);
  if (s.failure) {
    for (size_t i = 0; i < out.names.len; i++) free(out.names.items[i]);
    free(out.names.items);
    *err = failure_out(s.failure);
    s.failure = NULL;
    orc_status_free(&s);
    return false;
  }
  orc_status_free(&s);
  ret->len = out.names.len;
  ret->ptr = out.names.len ? calloc(out.names.len, sizeof *ret->ptr) : NULL;
  if (out.names.len && !ret->ptr) abort();
  for (size_t i = 0; i < out.names.len; i++) ret->ptr[i] = wtake(out.names.items[i]);
  free(out.names.items);
  return true;
}

static orc_status run_available(const orc_object *o, const orc_resource *r, void *ctx) {
  outputs *out = ctx;
  orc_status s = orc_done();
  out->availability = actuator()->available ? actuator()->available(o, r, &s) : ORC_AVAILABLE;
  return s;
}

void exports_orchard_actuator_actuator_available(wobject *obj, wresource *res, exports_orchard_actuator_actuator_tuple2_availability_status_t *ret) {
  outputs out = {.availability = ORC_UNKNOWN};
  orc_status s = step(obj, res, run_available, &out);
  ret->f0 = (orchard_actuator_types_availability_t)(s.failure ? ORC_UNKNOWN : out.availability);
  ret->f1 = status_out(s);
}

// JSON text; a state that is not JSON gives `null` (an empty status.resource) and an error log.
void exports_orchard_actuator_actuator_observed(wresource *res, wstr *ret) {
  resource_in r;
  resource_open(&r, res);
  orc_json *out = NULL;
  if (r.failure) ORC_ERROR("observed: %s", r.failure->message);
  else out = actuator()->observed ? actuator()->observed(&r.res) : orc_json_clone(r.res.state);
  *ret = wtake(out ? orc_json_dump(out) : orc_strdup("null"));
  orc_json_free(out);
  resource_close(&r);
}

// -- several API versions (orchard:actuator/conversion) --------------------------------------

typedef exports_orchard_actuator_conversion_convertible_t wconvertible;
typedef exports_orchard_actuator_conversion_option_json_t wdoc;

// The plugin's table, copied (the generated post-return frees what an export returns).
void exports_orchard_actuator_conversion_versions(exports_orchard_actuator_conversion_list_api_version_t *ret) {
  const orc_actuator *a = actuator();
  memset(ret, 0, sizeof *ret);
  if (!a->n_versions || !a->versions) return; // one version: the description's
  ret->ptr = calloc(a->n_versions, sizeof *ret->ptr);
  if (!ret->ptr) abort();
  ret->len = a->n_versions;
  for (size_t i = 0; i < a->n_versions; i++) {
    const orc_api_version *v = &a->versions[i];
    exports_orchard_actuator_conversion_api_version_t *w = &ret->ptr[i];
    w->name = wdup(v->name);
    w->resource_schema = wdup(v->resource_schema);
    w->observed_schema = wdup(v->observed_schema);
    if (v->filter_schema) {
      w->filter_schema.is_some = true;
      w->filter_schema.val = wdup(v->filter_schema);
    }
    w->storage = v->storage;
  }
}

static wdoc doc_out(orc_json *v) {
  wdoc out = {0};
  if (v) {
    out.is_some = true;
    out.val = wtake(orc_json_dump(v));
  }
  return out;
}

bool exports_orchard_actuator_conversion_convert(wconvertible *obj, wstr *from, wstr *to, wconvertible *ret, wfailure *err) {
  char *f_name = cstr(from), *t_name = cstr(to);
  shortcut_actuator_plugin_string_free(from);
  shortcut_actuator_plugin_string_free(to);
  // Borrowed views of the arguments, copied by the parse; the arguments are freed before the
  // plugin runs.
  wdoc *docs[3] = {&obj->resource, &obj->filter, &obj->observed};
  const char *texts[3] = {0};
  size_t lens[3] = {0};
  for (size_t i = 0; i < 3; i++) {
    if (!docs[i]->is_some) continue;
    texts[i] = docs[i]->val.ptr ? (const char *)docs[i]->val.ptr : "";
    lens[i] = docs[i]->val.len;
  }
  size_t n = obj->annotations.len;
  orc_label *annotations = calloc(n + 1, sizeof *annotations);
  if (!annotations) abort();
  for (size_t i = 0; i < n; i++)
    annotations[i] = (orc_label){cstr(&obj->annotations.ptr[i].f0), cstr(&obj->annotations.ptr[i].f1)};
  orc_convertible c;
  orc_failure *f = orc__convertible_parse(&c, texts, lens, NULL, 0, f_name);
  exports_orchard_actuator_conversion_convertible_free(obj);
  if (!f) {
    c.annotations = annotations; // the copies, handed over
    c.n_annotations = n;
  } else {
    for (size_t i = 0; i < n; i++) {
      free((char *)annotations[i].key);
      free((char *)annotations[i].value);
    }
    free(annotations);
  }
  if (!f) f = orc_convert(actuator(), &c, f_name, t_name);
  free(f_name);
  free(t_name);
  if (f) {
    orc_convertible_free(&c);
    *err = failure_out(f);
    return false;
  }
  memset(ret, 0, sizeof *ret);
  ret->resource = doc_out(c.resource);
  ret->filter = doc_out(c.filter);
  ret->observed = doc_out(c.observed);
  if (c.n_annotations) {
    ret->annotations.ptr = calloc(c.n_annotations, sizeof *ret->annotations.ptr);
    if (!ret->annotations.ptr) abort();
    ret->annotations.len = c.n_annotations;
  }
  for (size_t i = 0; i < c.n_annotations; i++) {
    ret->annotations.ptr[i].f0 = wdup(c.annotations[i].key);
    ret->annotations.ptr[i].f1 = wdup(c.annotations[i].value);
  }
  orc_convertible_free(&c);
  return true;
}

// -- HTTP over wasi:http ------------------------------------------------------------------------

#define ORC_WRITE_CHUNK 4096 // what one blocking-write-and-flush accepts (wasi:io)
#define ORC_READ_CHUNK (64u << 10)

static orc_failure *error_code(const orc_request *req, const wasi_http_types_error_code_t *code) {
  if (code->tag == WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_DENIED)
    return orc_invalid_configuration("request to %s denied by the host's allow-list", req->url);
  return orc_transient("HTTP transport error: %s %s: error code %d", req->method, req->url, code->tag);
}

static wasi_http_types_method_t method_of(const char *m) {
  static const char *known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
  for (uint8_t i = 0; i < sizeof known / sizeof *known; i++)
    if (strcmp(m, known[i]) == 0) return (wasi_http_types_method_t){.tag = i};
  wasi_http_types_method_t other = {.tag = WASI_HTTP_TYPES_METHOD_OTHER};
  other.val.other = (wstr){(uint8_t *)m, strlen(m)}; // borrowed: an import argument
  return other;
}

orc_failure *orc_http_send(const orc_request *req, orc_response *out) {
  memset(out, 0, sizeof *out);
  const char *url = req->url;
  bool https = strncmp(url, "https://", 8) == 0;
  if (!https && strncmp(url, "http://", 7) != 0) return orc_invalid_configuration("invalid URL \"%s\"", url);
  const char *authority = url + (https ? 8 : 7);
  const char *slash = strchr(authority, '/');
  size_t authority_len = slash ? (size_t)(slash - authority) : strlen(authority);
  if (authority_len == 0) return orc_invalid_configuration("invalid URL \"%s\"", url);
  const char *path = slash ? slash : "/";

  // Headers (names lower-cased), and content-length for a body.
  size_t n = req->n_headers + (req->body_len ? 1 : 0);
  wasi_http_types_tuple2_field_name_field_value_t *entries = calloc(n + 1, sizeof *entries);
  char **names = calloc(n + 1, sizeof *names);
  if (!entries || !names) abort();
  char length[24];
  for (size_t i = 0; i < req->n_headers; i++) {
    names[i] = orc_strdup(req->headers[i].name);
    for (char *c = names[i]; *c; c++)
      if (*c >= 'A' && *c <= 'Z') *c += 'a' - 'A';
    entries[i].f0 = (wstr){(uint8_t *)names[i], strlen(names[i])};
    entries[i].f1 = (wasi_http_types_field_value_t){(uint8_t *)req->headers[i].value, strlen(req->headers[i].value)};
  }
  if (req->body_len) {
    snprintf(length, sizeof length, "%zu", req->body_len);
    entries[n - 1].f0 = (wstr){(uint8_t *)"content-length", 14};
    entries[n - 1].f1 = (wasi_http_types_field_value_t){(uint8_t *)length, strlen(length)};
  }
  wasi_http_types_list_tuple2_field_name_field_value_t list = {entries, n};
  wasi_http_types_own_fields_t fields;
  wasi_http_types_header_error_t header_error;
  bool ok = wasi_http_types_static_fields_from_list(&list, &fields, &header_error);
  for (size_t i = 0; i < req->n_headers; i++) free(names[i]);
  free(names);
  free(entries);
  if (!ok) return orc_invalid_configuration("%s %s: invalid header", req->method, url);

  wasi_http_types_own_outgoing_request_t request = wasi_http_types_constructor_outgoing_request(fields);
  wasi_http_types_borrow_outgoing_request_t borrowed = wasi_http_types_borrow_outgoing_request(request);
  wasi_http_types_method_t method = method_of(req->method);
  wasi_http_types_scheme_t scheme = {.tag = https ? WASI_HTTP_TYPES_SCHEME_HTTPS : WASI_HTTP_TYPES_SCHEME_HTTP};
  wstr auth = {(uint8_t *)authority, authority_len}, pq = {(uint8_t *)path, strlen(path)};
  if (!wasi_http_types_method_outgoing_request_set_method(borrowed, &method) ||
      !wasi_http_types_method_outgoing_request_set_scheme(borrowed, &scheme) ||
      !wasi_http_types_method_outgoing_request_set_authority(borrowed, &auth) ||
      !wasi_http_types_method_outgoing_request_set_path_with_query(borrowed, &pq)) {
    wasi_http_types_outgoing_request_drop_own(request);
    return orc_invalid_configuration("invalid URL \"%s\"", url);
  }
  // Write and finish the body before handing the request over: the reliable order.
  wasi_http_types_own_outgoing_body_t body;
  if (!wasi_http_types_method_outgoing_request_body(borrowed, &body)) {
    wasi_http_types_outgoing_request_drop_own(request);
    return orc_transient("HTTP transport error: %s %s: no request body", req->method, url);
  }
  if (req->body_len) {
    wasi_http_types_own_output_stream_t stream;
    if (!wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(body), &stream)) {
      wasi_http_types_outgoing_body_drop_own(body);
      wasi_http_types_outgoing_request_drop_own(request);
      return orc_transient("HTTP transport error: %s %s: no body stream", req->method, url);
    }
    for (size_t i = 0; i < req->body_len; i += ORC_WRITE_CHUNK) {
      size_t len = req->body_len - i < ORC_WRITE_CHUNK ? req->body_len - i : ORC_WRITE_CHUNK;
      shortcut_actuator_plugin_list_u8_t chunk = {(uint8_t *)req->body + i, len};
      wasi_io_streams_stream_error_t serr;
      if (!wasi_io_streams_method_output_stream_blocking_write_and_flush(wasi_io_streams_borrow_output_stream(stream), &chunk, &serr)) {
        wasi_io_streams_output_stream_drop_own(stream);
        wasi_http_types_outgoing_body_drop_own(body);
        wasi_http_types_outgoing_request_drop_own(request);
        return orc_transient("HTTP transport error: %s %s: writing body", req->method, url);
      }
    }
    wasi_io_streams_output_stream_drop_own(stream);
  }
  wasi_http_types_error_code_t code;
  if (!wasi_http_types_static_outgoing_body_finish(body, NULL, &code)) {
    wasi_http_types_outgoing_request_drop_own(request);
    return orc_transient("HTTP transport error: %s %s: finishing body", req->method, url);
  }
  wasi_http_outgoing_handler_own_future_incoming_response_t future;
  if (!wasi_http_outgoing_handler_handle(request, NULL, &future, &code)) return error_code(req, &code);
  wasi_http_types_borrow_future_incoming_response_t fb = wasi_http_types_borrow_future_incoming_response(future);
  wasi_http_types_own_pollable_t pollable = wasi_http_types_method_future_incoming_response_subscribe(fb);
  wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(pollable));
  wasi_io_poll_pollable_drop_own(pollable);
  wasi_http_types_result_result_own_incoming_response_error_code_void_t outcome;
  bool ready = wasi_http_types_method_future_incoming_response_get(fb, &outcome);
  wasi_http_types_future_incoming_response_drop_own(future);
  if (!ready) return orc_transient("HTTP transport error: %s %s: no response", req->method, url);
  if (outcome.is_err) return orc_transient("HTTP transport error: %s %s: response already taken", req->method, url);
  if (outcome.val.ok.is_err) return error_code(req, &outcome.val.ok.val.err);
  wasi_http_types_own_incoming_response_t response = outcome.val.ok.val.ok;
  wasi_http_types_borrow_incoming_response_t rb = wasi_http_types_borrow_incoming_response(response);
  out->status = wasi_http_types_method_incoming_response_status(rb);
  wasi_http_types_own_incoming_body_t incoming;
  if (!wasi_http_types_method_incoming_response_consume(rb, &incoming)) {
    wasi_http_types_incoming_response_drop_own(response);
    return orc_transient("HTTP transport error: %s %s: response body already taken", req->method, url);
  }
  wasi_http_types_own_input_stream_t in;
  if (!wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(incoming), &in)) {
    wasi_http_types_incoming_body_drop_own(incoming);
    wasi_http_types_incoming_response_drop_own(response);
    return orc_transient("HTTP transport error: %s %s: no response body stream", req->method, url);
  }
  orc_str_builder b = {0};
  orc_failure *f = NULL;
  for (;;) {
    shortcut_actuator_plugin_list_u8_t chunk;
    wasi_io_streams_stream_error_t serr;
    if (!wasi_io_streams_method_input_stream_blocking_read(wasi_io_streams_borrow_input_stream(in), ORC_READ_CHUNK, &chunk, &serr)) {
      if (serr.tag != WASI_IO_STREAMS_STREAM_ERROR_CLOSED) {
        wasi_io_error_error_drop_own(serr.val.last_operation_failed);
        f = orc_transient("HTTP transport error: %s %s: reading body", req->method, url);
      }
      break;
    }
    if (b.len + chunk.len > ORC_MAX_RESPONSE_BODY) {
      shortcut_actuator_plugin_list_u8_free(&chunk);
      f = orc_transient("%s %s: response body larger than %u bytes", req->method, url, ORC_MAX_RESPONSE_BODY);
      break;
    }
    orc_sb_append(&b, (const char *)chunk.ptr, chunk.len);
    shortcut_actuator_plugin_list_u8_free(&chunk);
  }
  wasi_io_streams_input_stream_drop_own(in);
  wasi_http_types_future_trailers_drop_own(wasi_http_types_static_incoming_body_finish(incoming));
  wasi_http_types_incoming_response_drop_own(response);
  if (f) {
    free(b.ptr);
    return f;
  }
  out->body_len = b.len;
  out->body = orc_sb_finish(&b);
  return NULL;
}

// -- orchard:shortcuts (0.1.0) ----------------------------------------------------------------

exports_orchard_shortcuts_shortcuts_shortcut_t exports_orchard_shortcuts_shortcuts_shortcuts(void) {
  const orc_actuator *a = actuator();
  exports_orchard_shortcuts_shortcuts_shortcut_t flags = 0;
  if (a->shortcuts.create_refuses_duplicates)
    flags |= EXPORTS_ORCHARD_SHORTCUTS_SHORTCUTS_SHORTCUT_CREATE_REFUSES_DUPLICATES;
  if (a->shortcuts.delete_is_synchronous)
    flags |= EXPORTS_ORCHARD_SHORTCUTS_SHORTCUTS_SHORTCUT_DELETE_IS_SYNCHRONOUS;
  if (a->shortcuts.delete_by_id)
    flags |= EXPORTS_ORCHARD_SHORTCUTS_SHORTCUTS_SHORTCUT_DELETE_BY_ID;
  return flags;
}
