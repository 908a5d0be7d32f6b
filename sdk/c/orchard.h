// Orchard C SDK: write an actuator (wit/actuator.wit) in C.
//
// A plugin fills an `orc_actuator` with its functions and exports it with
// ORCHARD_EXPORT(name); sdk/c/build.sh <plugin-dir> <out.wasm> builds the component.
//
// OWNERSHIP RULES (the whole SDK follows them):
//   1. Everything the SDK passes INTO a plugin function (objects, resources, filters, their
//      strings and JSON values) is BORROWED: valid until the function returns; never free it,
//      never keep a pointer to it. Clone what you return (orc_strdup, orc_json_clone). The one
//      exception: the orc_convertible that convert changes in place (see below).
//   2. Everything a plugin function RETURNS or stores in an out-parameter (orc_failure *,
//      orc_status, orc_resource_out, orc_json *, names) is OWNED BY THE SDK afterwards: build it
//      from heap memory (the constructors below do), and do not touch it again.
//   3. Functions that return `char *` or `orc_json *` give the caller ownership: free with
//      free() / orc_json_free(), unless rule 2 hands it on.
//   4. Out of memory aborts the call (a trap: the host retries it). No function returns NULL
//      for lack of memory.
#ifndef ORCHARD_H
#define ORCHARD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

// -- owned strings ------------------------------------------------------------------------------

char *orc_strdup(const char *s);
char *orc_strndup(const char *s, size_t n);
char *orc_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *orc_vsprintf(const char *fmt, va_list ap);

// A growing string; zero-initialise it, append, then orc_sb_finish (owned result).
typedef struct {
  char *ptr;
  size_t len, cap;
} orc_str_builder;
void orc_sb_append(orc_str_builder *b, const char *s, size_t n);
void orc_sb_puts(orc_str_builder *b, const char *s);
char *orc_sb_finish(orc_str_builder *b);

// One URL path segment, percent-encoded ("/" too). Owned.
char *orc_path_segment(const char *s);
// Standard base64 of `n` bytes. Owned.
char *orc_base64(const uint8_t *bytes, size_t n);
// The value of an authorization header for HTTP basic authentication ("Basic ..."). Owned.
char *orc_basic_auth(const char *user, const char *password);

// -- JSON -------------------------------------------------------------------------------------

typedef enum { ORC_JSON_NULL, ORC_JSON_BOOL, ORC_JSON_NUMBER, ORC_JSON_STRING, ORC_JSON_ARRAY, ORC_JSON_OBJECT } orc_json_type;

// A JSON value. Read the fields directly; build with the constructors.
typedef struct orc_json {
  orc_json_type type;
  bool boolean;
  double number;
  char *string;           // ORC_JSON_STRING: NUL-terminated, `len` bytes (may hold NULs)
  size_t len, cap;        // string length, or number of items / members
  struct orc_json **items; // ARRAY items, OBJECT member values
  char **keys;            // OBJECT member names
} orc_json;

// Parses `len` bytes (nested at most 64 deep). NULL on error, with an owned message in
// *error (when error is not NULL).
orc_json *orc_json_parse(const char *text, size_t len, char **error);
// Compact JSON text. Owned.
char *orc_json_dump(const orc_json *v);
void orc_json_free(orc_json *v);
orc_json *orc_json_clone(const orc_json *v);
bool orc_json_equal(const orc_json *a, const orc_json *b);

orc_json *orc_json_null(void);
orc_json *orc_json_bool(bool b);
orc_json *orc_json_number(double d);
orc_json *orc_json_string(const char *s);
orc_json *orc_json_stringn(const char *s, size_t n);
orc_json *orc_json_array(void);
orc_json *orc_json_object(void);
// Appends `item` (taken) to an array; returns the array.
orc_json *orc_json_push(orc_json *array, orc_json *item);
// Sets member `key` (copied) to `value` (taken), replacing an existing one; returns the object.
orc_json *orc_json_set(orc_json *object, const char *key, orc_json *value);
// Removes member `key` from an object and returns it (owned); NULL when absent or not an object.
// Renaming a field: orc_json_set(o, "new", orc_json_take(o, "old")) (when it is there).
orc_json *orc_json_take(orc_json *object, const char *key);

// Member `key` of an object (borrowed); NULL when absent or not an object.
const orc_json *orc_json_get(const orc_json *object, const char *key);
// Typed members, `fallback` when absent or of another type.
const char *orc_json_get_string(const orc_json *object, const char *key, const char *fallback);
bool orc_json_get_bool(const orc_json *object, const char *key, bool fallback);
double orc_json_get_number(const orc_json *object, const char *key, double fallback);

// -- failures and statuses --------------------------------------------------------------------

typedef enum { ORC_TRANSIENT, ORC_INVALID_CONFIGURATION, ORC_UNRECOVERABLE } orc_failure_kind;

// Why a call failed. NULL means no failure.
typedef struct {
  orc_failure_kind kind;
  char *message; // owned
} orc_failure;

// Retried with per-object exponential backoff (reason TransientError).
orc_failure *orc_transient(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Terminal: the user must fix the spec (reason InvalidConfiguration).
orc_failure *orc_invalid_configuration(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Terminal: nothing in the spec can fix it (reason UnrecoverableError).
orc_failure *orc_unrecoverable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void orc_failure_free(orc_failure *f);

typedef enum { ORC_CREATION, ORC_READY, ORC_DELETION, ORC_UPDATE } orc_wait_event;
typedef enum { ORC_WAITING_ON_EXTERNAL, ORC_WAITING_ON_OBJECT, ORC_NEEDS_REFRESH } orc_progress_kind;

typedef struct {
  orc_progress_kind kind;
  orc_wait_event event;
  char *message;          // external wait, needs-refresh (owned)
  uint32_t poll_after_ms; // external wait
  char *kind_name, *name; // object wait: the target (owned)
} orc_progress;

// The outcome of a step: done when it has no progress and no failure.
typedef struct {
  size_t n_progress;
  orc_progress *progress; // owned array
  orc_failure *failure;   // owned, or NULL
} orc_status;

orc_status orc_done(void);
orc_status orc_failed(orc_failure *f); // takes f
orc_status orc_needs_refresh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
orc_status orc_wait_external(orc_wait_event event, uint32_t poll_after_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
orc_status orc_wait_object(const char *kind, const char *name, orc_wait_event event);
bool orc_status_is_done(const orc_status *s);

// Failure propagation, C's `?`: evaluate `expr` (an orc_failure *, or NULL) and return from the
// calling function when it failed. ORC_TRY in functions that return orc_failure *, ORC_TRY_STATUS
// in functions that return orc_status (the failure becomes a failed status). Use them before
// the function holds anything it owns, or free that first: they return at once.
#define ORC_TRY(expr)                                                                              \
  do {                                                                                             \
    orc_failure *orc_try_failure_ = (expr);                                                        \
    if (orc_try_failure_) return orc_try_failure_;                                                 \
  } while (0)
#define ORC_TRY_STATUS(expr)                                                                       \
  do {                                                                                             \
    orc_failure *orc_try_failure_ = (expr);                                                        \
    if (orc_try_failure_) return orc_failed(orc_try_failure_);                                     \
  } while (0)
// Moves the progress and (first) failure of `other` into `s`.
void orc_status_and(orc_status *s, orc_status other);
void orc_status_free(orc_status *s);

typedef enum { ORC_AVAILABLE, ORC_UNAVAILABLE, ORC_UNKNOWN } orc_availability;

// -- the object, resources --------------------------------------------------------------------

typedef struct {
  const char *name, *kind, *object; // declaration name, referenced kind and object name
  const char *id;                   // its status.id, or NULL
  const orc_json *observed;         // its status.resource, or NULL
} orc_dependency;

typedef struct {
  const char *key;
  const uint8_t *value;
  size_t len;
} orc_credential;

typedef struct {
  const char *key, *value;
} orc_label;

// The Kubernetes object being reconciled (borrowed, see rule 1).
typedef struct {
  const char *name, *namespace_, *uid;
  int64_t generation;
  size_t n_labels, n_annotations, n_dependencies, n_credentials;
  const orc_label *labels, *annotations;
  const orc_json *spec;  // spec.resource; NULL for imported (unmanaged) objects
  const char *status_id; // NULL until known
  const orc_dependency *dependencies;
  const orc_credential *credentials;
} orc_object;

// A test object in one line (a compound literal; the arrays live as long as the enclosing block):
//   orc_object obj = {.name = "k", .namespace_ = "default", .spec = spec,
//                     ORC_CREDENTIALS(ORC_CREDENTIAL("url", "http://pdns"), ORC_CREDENTIAL("apiKey", "k")),
//                     ORC_DEPENDENCIES({.name = "zone", .kind = "DnsZone", .object = "z", .id = "z."})};
#define ORC_CREDENTIAL(key_, text) {.key = (key_), .value = (const uint8_t *)(text), .len = strlen(text)}
#define ORC_CREDENTIALS(...)                                                                       \
  .n_credentials = sizeof((orc_credential[]){__VA_ARGS__}) / sizeof(orc_credential),              \
  .credentials = (const orc_credential[]){__VA_ARGS__}
#define ORC_DEPENDENCIES(...)                                                                      \
  .n_dependencies = sizeof((orc_dependency[]){__VA_ARGS__}) / sizeof(orc_dependency),             \
  .dependencies = (const orc_dependency[]){__VA_ARGS__}
#define ORC_LABELS(...)                                                                            \
  .n_labels = sizeof((orc_label[]){__VA_ARGS__}) / sizeof(orc_label), .labels = (const orc_label[]){__VA_ARGS__}

// The spec, or NULL with *failure set (InvalidConfiguration) when the object has none.
const orc_json *orc_require_spec(const orc_object *obj, orc_failure **failure);
// A credential as a NUL-terminated owned string, or NULL with *failure (InvalidConfiguration).
char *orc_credential_string(const orc_object *obj, const char *key, orc_failure **failure);
// The status.id of dependency `name`, or NULL with *failure (Transient).
const char *orc_dependency_id(const orc_object *obj, const char *name, orc_failure **failure);

// An external resource as the SDK passes it in (borrowed).
typedef struct {
  const char *id;
  const orc_json *state;
} orc_resource;

// An external resource as a plugin returns it (owned by the SDK once returned).
typedef struct {
  char *id;
  orc_json *state;
} orc_resource_out;

// id copied, state taken.
orc_resource_out orc_resource_new(const char *id, orc_json *state);

// A list of resources to return (list-for-adoption, list-for-import).
typedef struct {
  size_t len, cap;
  orc_resource_out *items;
} orc_resources;
void orc_resources_push(orc_resources *list, orc_resource_out res);

// A list of names to return (reconcilers). orc_names_push copies the name.
typedef struct {
  size_t len, cap;
  char **items;
} orc_names;
void orc_names_push(orc_names *list, const char *name);

// -- optional sub-resources (the ResourceHandler pattern) -------------------------------------

// One optional sub-resource of an external resource (a policy, a permission...), for
// orc_ensure inside a reconciler. `ctx` is passed to every function. Its current state is a
// JSON value the handler makes (owned by orc_ensure, which frees it).
typedef struct {
  const char *name; // shown in messages, e.g. "policy"
  void *ctx;
  bool (*is_required)(void *ctx);
  orc_failure *(*current)(void *ctx, orc_json **current); // *current = NULL: it does not exist
  orc_failure *(*create)(void *ctx);
  orc_failure *(*update)(void *ctx, const orc_json *current, bool *changed);
  orc_failure *(*delete_)(void *ctx, const orc_json *current); // MUST succeed when already gone
} orc_resource_handler;

// Not required -> delete it if present; required -> create it, or bring it up to date.
// needs-refresh when anything changed, done when it was already as desired, failed otherwise.
orc_status orc_ensure(const orc_resource_handler *h);

// -- describe ---------------------------------------------------------------------------------

typedef struct {
  const char *name, *field, *kind;
  bool for_create, for_delete, guard_deletion;
} orc_dependency_decl;

// What the plugin manages. Schemas are JSON text; static strings are fine here (the SDK copies).
typedef struct {
  const char *name, *group, *version, *kind, *plural;
  const char *resource_schema, *filter_schema /* NULL: no import by filter */, *observed_schema;
  size_t n_dependencies;
  const orc_dependency_decl *dependencies;
  bool needs_credentials;
} orc_description;

// -- shortcuts (orchard:shortcuts 0.1.0; optional) ---------------------------------------------

typedef struct {
  // The system refuses to create a resource whose identifying fields (those list_for_adoption
  // matches on) an existing one has: create then answers a failure and changes nothing. The
  // host skips list_for_adoption before a create and calls it only after a create that
  // failed; list_for_adoption MUST apply (*applies = true) to every object the plugin can
  // create. (PowerDNS answers 409 Conflict for a TSIG key name that exists.)
  bool create_refuses_duplicates;
  // A delete_ that answers done has removed the resource (get_by_id finds nothing from then
  // on): the host releases the object without reading it back.
  bool delete_is_synchronous;
  // delete_ reads nothing of the resource but res->id, and answers done for an id whose
  // resource is gone: the host deletes an object by its status.id without reading the
  // resource first, and delete_ then gets that id and a state that is JSON null. (PowerDNS
  // deletes a TSIG key by its name, and answers 404 for one that is gone.)
  bool delete_by_id;
} orc_shortcuts;

// -- several API versions (orchard:actuator/conversion, WIT 0.1.2; optional) -------------------
//
// A kind whose shape changes (a field renamed, a string that becomes a list) keeps its old API
// versions: the plugin lists them all in a static table and converts one object between any two
// of them. The host lists every version in the CRD, serves the apiserver's conversion webhook and
// calls convert for every object read or written at another version than the stored one
// (docs/schema-evolution.md). A plugin that lists no versions serves one, its description's:
// versions() answers [] and convert refuses, exactly as before 0.1.2.

// One API version of the kind. Schemas are JSON text; static strings are fine (the SDK copies).
typedef struct {
  const char *name;            // a Kubernetes version name: "v1", "v1beta1", "v2alpha3"...
  const char *resource_schema; // OpenAPI v3 schema of spec.resource at this version
  const char *filter_schema;   // of spec.import.filter; NULL: no import by filter at this version
  const char *observed_schema; // of status.resource
  bool storage;                // the version objects are stored at; exactly one says true
} orc_api_version;

// The parts of one object that change shape between versions. Inside convert, everything in it is
// the plugin's to change IN PLACE (an exception to rule 1): the SDK owns it before and after, and
// sends what it holds when convert returns NULL. Replace a document with orc_json_free + a new
// value (or NULL: absent), edit inside one with orc_json_set / orc_json_take, and the annotations
// only with orc_annotation_set / orc_annotation_take.
typedef struct {
  orc_json *resource; // spec.resource; NULL when the object has none
  orc_json *filter;   // spec.import.filter; NULL when the object has none
  orc_json *observed; // status.resource; NULL when the object has none
  // Every annotation of the object, in order (keys and values are heap strings the SDK owns).
  size_t n_annotations;
  orc_label *annotations;
} orc_convertible;

// Annotation `key` (borrowed), NULL when absent.
const char *orc_annotation(const orc_convertible *obj, const char *key);
// Sets annotation `key` to `value` (both copied), replacing an existing one; value NULL removes it.
void orc_annotation_set(orc_convertible *obj, const char *key, const char *value);
// Removes annotation `key` and returns its value (owned); NULL when absent.
char *orc_annotation_take(orc_convertible *obj, const char *key);
// Frees the documents and annotations of obj (not obj itself) and zeroes it: for tests, which
// build one with designated initializers ({.resource = orc_json_parse(...)}) and orc_annotation_set.
void orc_convertible_free(orc_convertible *obj);

// -- the actuator -----------------------------------------------------------------------------

// Every function MUST be idempotent (wit/actuator.wit has the contract). Functions left NULL
// get the defaults: list_for_adoption -> adoption does not apply; list_for_import ->
// InvalidConfiguration; reconcilers -> none; run_reconciler -> Unrecoverable; available ->
// available; observed -> the state itself.
typedef struct {
  void (*describe)(orc_description *out);
  // *out = NULL when the resource does not exist.
  orc_failure *(*get_by_id)(const orc_object *obj, const char *id, orc_resource_out **out);
  orc_failure *(*list_for_adoption)(const orc_object *obj, orc_resources *out, bool *applies);
  orc_failure *(*list_for_import)(const orc_object *obj, const orc_json *filter, orc_resources *out);
  // Done status with *out set: created. A status with progress or a failure: nothing created.
  orc_status (*create)(const orc_object *obj, orc_resource_out *out);
  orc_status (*delete_)(const orc_object *obj, const orc_resource *res);
  orc_failure *(*reconcilers)(const orc_object *obj, const orc_resource *res, orc_names *out);
  orc_status (*run_reconciler)(const char *name, const orc_object *obj, const orc_resource *res);
  orc_availability (*available)(const orc_object *obj, const orc_resource *res, orc_status *status);
  orc_json *(*observed)(const orc_resource *res);

  // Several API versions (optional, see above): the table, oldest first, at most 16; set both
  // with ORC_VERSIONS(...). Left empty: the kind has one version, the description's.
  //   - The table MUST list the description's version, with the description's schemas (the
  //     same strings: that is the version the host watches and every other function sees), and
  //     exactly one storage version. orc_versions_check tests it natively.
  //   - A version still stored in etcd MUST stay listed, and its schema may only gain optional
  //     fields: the host refuses an upgrade that would strand stored objects.
  size_t n_versions;
  const orc_api_version *versions;
  // Converts obj, in place, from version `from` to version `to`: two different names of the
  // table (the SDK answers from == to itself and refuses a name the table does not list).
  //   - MUST preserve every field: converting to another version and back MUST give the object
  //     that went in. What `to` cannot hold goes into an annotation under the kind's group
  //     ("<group>/..."), the only annotations the host writes back; the other ones MUST stay.
  //   - Each document MUST stay a JSON object (or NULL where the object has none).
  //   - MUST NOT do I/O: the host denies every request during the call (orc_http_send fails).
  //   - MUST be pure and deterministic, like describe.
  //   - A failure fails the apiserver's request for this object only; InvalidConfiguration
  //     for an object the conversion cannot read (name the field), Unrecoverable otherwise.
  //     On a failure the SDK drops obj as it is.
  // Documents that are not JSON never reach it: the SDK answers InvalidConfiguration naming the
  // field. Numbers are doubles (orc_json): integers above 2^53 do not survive a round trip.
  orc_failure *(*convert)(orc_convertible *obj, const char *from, const char *to);

  // What the external system guarantees (orchard:shortcuts, docs/concepts.md "Shortcuts"), so
  // that the host skips calls its generic flow makes to stay leak-safe on any system. Left
  // zero: none, the generic flow. Declare only what the system's API documents; the
  // conformance kit checks each.
  orc_shortcuts shortcuts;
} orc_actuator;

// The version table in one line, inside the initializer of a file-scope orc_actuator (as
// ORCHARD_EXPORT wants it) or of a local, non-static one (tests):
//   .convert = convert,
//   ORC_VERSIONS({.name = "v1alpha1", .resource_schema = V1ALPHA1, .observed_schema = OBSERVED},
//                {.name = "v1beta1", .resource_schema = V1BETA1, .observed_schema = OBSERVED, .storage = true}),
#define ORC_VERSIONS(...)                                                                          \
  .n_versions = sizeof((orc_api_version[]){__VA_ARGS__}) / sizeof(orc_api_version),               \
  .versions = (const orc_api_version[]){__VA_ARGS__}

// What the component's convert export does once the documents are parsed, natively callable
// (test a conversion and its round trip through it): from == to leaves obj as it is; a plugin
// without versions, a name its table does not list, or a table without convert is Unrecoverable;
// otherwise a->convert(obj, from, to). obj stays the caller's (orc_convertible_free).
orc_failure *orc_convert(const orc_actuator *a, orc_convertible *obj, const char *from, const char *to);
// Checks a's version table as the host does when it loads the plugin: at most 16 versions,
// names DNS-1123 labels listed once, exactly one storage version, schemas JSON objects, the
// description's version listed with the description's schemas, and convert set. NULL when it
// holds (or there is no table), else an Unrecoverable failure saying what is wrong.
orc_failure *orc_versions_check(const orc_actuator *a);

// The actuator the component exports: ORCHARD_EXPORT(my_actuator) at file scope.
extern const orc_actuator *const orchard_exported_actuator;
#define ORCHARD_EXPORT(actuator) const orc_actuator *const orchard_exported_actuator = &(actuator)

// -- HTTP over wasi:http ----------------------------------------------------------------------

typedef struct {
  const char *name, *value;
} orc_header;

typedef struct {
  const char *method; // "GET", "PUT", ...
  const char *url;    // http(s)://authority/path?query
  const orc_header *headers;
  size_t n_headers;
  const char *body; // may be NULL
  size_t body_len;
} orc_request;

typedef struct {
  int status;
  char *body; // owned, NUL-terminated, body_len bytes
  size_t body_len;
} orc_response;

// Largest response body read (64 MiB); a larger one is a Transient failure.
#define ORC_MAX_RESPONSE_BODY (64u << 20)

// Sends a request and reads the whole response. NULL on any HTTP status; a failure when there
// is no response: InvalidConfiguration when the host's allow-list denies it or the URL is
// invalid, Transient otherwise.
orc_failure *orc_http_send(const orc_request *req, orc_response *out);
// NULL for 2xx; else a failure with status and body: 4xx other than 404, 408, 409, 429 are
// InvalidConfiguration, the rest Transient.
orc_failure *orc_response_check(const orc_response *r, const char *what);
// The body parsed as JSON, or NULL with a Transient *failure.
orc_json *orc_response_json(const orc_response *r, orc_failure **failure);
void orc_response_free(orc_response *r);

// -- logging (into the host's tracing, tagged with plugin and object) -------------------------

typedef enum { ORC_LOG_TRACE, ORC_LOG_DEBUG, ORC_LOG_INFO, ORC_LOG_WARN, ORC_LOG_ERROR } orc_log_level;
void orc_log(orc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ORC_DEBUG(...) orc_log(ORC_LOG_DEBUG, __VA_ARGS__)
#define ORC_INFO(...) orc_log(ORC_LOG_INFO, __VA_ARGS__)
#define ORC_WARN(...) orc_log(ORC_LOG_WARN, __VA_ARGS__)
#define ORC_ERROR(...) orc_log(ORC_LOG_ERROR, __VA_ARGS__)

// -- reports (orchard:actuator/report, WIT 0.1.1) ---------------------------------------------
//
// Connection details: the host writes those of a pass into the Secret named by
// spec.writeConnectionSecretTo.name (owned by the object), never into status, Events or logs.
// Drifts: a field a reconciler changed back to the spec; the host records them in an Event
// DriftCorrected and in status.drift. Arguments stay the caller's. Natively (unit tests)
// nothing is sent: reports are collected in-process, read with orc_reports_take.

// A connection detail: key a Secret data key; a later value of a key replaces an earlier one.
void orc_report_connection_detail(const char *key, const uint8_t *value, size_t len);
// orc_report_connection_detail of a NUL-terminated text.
void orc_report_connection_detail_string(const char *key, const char *value);
// A drift: field was observed and was changed back to desired (NULL: absent); sensitive values
// are masked by the host.
void orc_report_drift(const char *field, const orc_json *observed, const orc_json *desired, bool sensitive);
// orc_report_drift of two strings (NULL: absent), JSON-quoted here.
void orc_report_drift_string(const char *field, const char *observed, const char *desired, bool sensitive);

// One drift; observed and desired are JSON text (NULL: absent).
typedef struct {
  char *field, *observed, *desired;
  bool sensitive;
} orc_drift;

// The fields whose observed and desired values differ; orc_diff_report sends them (nothing is
// sent before). Zero-initialise: orc_diff d = {0};
typedef struct {
  orc_drift *items;
  size_t len;
} orc_diff;

// Adds field to d when observed and desired differ (orc_json_equal; NULL: absent).
void orc_diff_field(orc_diff *d, const char *field, const orc_json *observed, const orc_json *desired, bool sensitive);
// Compares two JSON objects on each of fields, a dotted path ("settings.ttl"); a field missing on
// one side is absent there.
orc_diff orc_diff_fields(const orc_json *observed, const orc_json *desired, const char *const *fields, size_t n);
// Reports every difference as a drift, frees d; returns how many.
size_t orc_diff_report(orc_diff *d);
void orc_diff_free(orc_diff *d);

#ifndef __wasm__
// Natively: what was reported since the last call (the collector is emptied); free with
// orc_reports_free. At most 1024 of each kind are kept.
typedef struct {
  char *key;
  uint8_t *value;
  size_t len;
} orc_detail;
typedef struct {
  orc_detail *details;
  size_t n_details;
  orc_drift *drifts;
  size_t n_drifts;
} orc_reports;
orc_reports orc_reports_take(void);
void orc_reports_free(orc_reports *r);
#endif

// The convertible the convert export receives: docs[] is spec.resource, spec.import.filter and
// status.resource as JSON text (NULL: absent), annotations copied. A document that is not JSON
// is an InvalidConfiguration failure naming the field and version `from` (out is then freed).
orc_failure *orc__convertible_parse(orc_convertible *out, const char *const docs[3], const size_t lens[3],
                                    const orc_label *annotations, size_t n_annotations, const char *from);

// The transport of the reports (orchard_wasi.c in a component, the collector natively).
void orc__send_detail(const char *key, const uint8_t *value, size_t len);
void orc__send_drift(const orc_drift *d);

#ifdef __cplusplus
}
#endif
#endif
