// JSON values for the Orchard C SDK: a small DOM with a strict parser (RFC 8259, depth and
// size bounded) and a compact writer. See orchard.h for the ownership rules.
#include "orchard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORC_JSON_MAX_DEPTH 64

static void *orc_xalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) abort(); // out of memory: the host sees a trap and retries the call
  return p;
}

char *orc_strndup(const char *s, size_t n) {
  char *out = orc_xalloc(n + 1);
  if (n) memcpy(out, s, n);
  out[n] = 0;
  return out;
}

char *orc_strdup(const char *s) { return orc_strndup(s, strlen(s)); }

char *orc_vsprintf(const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) return orc_strdup("(invalid format)");
  char *out = orc_xalloc((size_t)n + 1);
  vsnprintf(out, (size_t)n + 1, fmt, ap);
  return out;
}

char *orc_sprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = orc_vsprintf(fmt, ap);
  va_end(ap);
  return out;
}

// -- building values --------------------------------------------------------------------------

static orc_json *orc_json_new(orc_json_type type) {
  orc_json *v = orc_xalloc(sizeof *v);
  v->type = type;
  return v;
}

orc_json *orc_json_null(void) { return orc_json_new(ORC_JSON_NULL); }

orc_json *orc_json_bool(bool b) {
  orc_json *v = orc_json_new(ORC_JSON_BOOL);
  v->boolean = b;
  return v;
}

orc_json *orc_json_number(double d) {
  orc_json *v = orc_json_new(ORC_JSON_NUMBER);
  v->number = d;
  return v;
}

orc_json *orc_json_stringn(const char *s, size_t n) {
  orc_json *v = orc_json_new(ORC_JSON_STRING);
  v->string = orc_strndup(s, n);
  v->len = n;
  return v;
}

orc_json *orc_json_string(const char *s) { return orc_json_stringn(s, strlen(s)); }
orc_json *orc_json_array(void) { return orc_json_new(ORC_JSON_ARRAY); }
orc_json *orc_json_object(void) { return orc_json_new(ORC_JSON_OBJECT); }

static void orc_json_grow(orc_json *v) {
  if (v->len < v->cap) return;
  size_t cap = v->cap ? v->cap * 2 : 4;
  v->items = realloc(v->items, cap * sizeof *v->items);
  if (v->type == ORC_JSON_OBJECT) v->keys = realloc(v->keys, cap * sizeof *v->keys);
  if (!v->items || (v->type == ORC_JSON_OBJECT && !v->keys)) abort();
  v->cap = cap;
}

orc_json *orc_json_push(orc_json *array, orc_json *item) {
  orc_json_grow(array);
  array->items[array->len++] = item;
  return array;
}

orc_json *orc_json_set(orc_json *object, const char *key, orc_json *value) {
  for (size_t i = 0; i < object->len; i++) {
    if (strcmp(object->keys[i], key) == 0) {
      orc_json_free(object->items[i]);
      object->items[i] = value;
      return object;
    }
  }
  orc_json_grow(object);
  object->keys[object->len] = orc_strdup(key);
  object->items[object->len++] = value;
  return object;
}

orc_json *orc_json_take(orc_json *object, const char *key) {
  if (!object || object->type != ORC_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->len; i++) {
    if (strcmp(object->keys[i], key) != 0) continue;
    orc_json *value = object->items[i];
    free(object->keys[i]);
    memmove(object->keys + i, object->keys + i + 1, (object->len - i - 1) * sizeof *object->keys);
    memmove(object->items + i, object->items + i + 1, (object->len - i - 1) * sizeof *object->items);
    object->len--;
    return value;
  }
  return NULL;
}

void orc_json_free(orc_json *v) {
  if (!v) return;
  if (v->type == ORC_JSON_STRING) free(v->string);
  if (v->type == ORC_JSON_ARRAY || v->type == ORC_JSON_OBJECT) {
    for (size_t i = 0; i < v->len; i++) {
      orc_json_free(v->items[i]);
      if (v->type == ORC_JSON_OBJECT) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
  }
  free(v);
}

orc_json *orc_json_clone(const orc_json *v) {
  if (!v) return NULL;
  switch (v->type) {
  case ORC_JSON_NULL: return orc_json_null();
  case ORC_JSON_BOOL: return orc_json_bool(v->boolean);
  case ORC_JSON_NUMBER: return orc_json_number(v->number);
  case ORC_JSON_STRING: return orc_json_stringn(v->string, v->len);
  case ORC_JSON_ARRAY: {
    orc_json *out = orc_json_array();
    for (size_t i = 0; i < v->len; i++) orc_json_push(out, orc_json_clone(v->items[i]));
    return out;
  }
  case ORC_JSON_OBJECT: {
    orc_json *out = orc_json_object();
    for (size_t i = 0; i < v->len; i++) orc_json_set(out, v->keys[i], orc_json_clone(v->items[i]));
    return out;
  }
  }
  return NULL;
}

// -- reading values ---------------------------------------------------------------------------

const orc_json *orc_json_get(const orc_json *object, const char *key) {
  if (!object || object->type != ORC_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->len; i++)
    if (strcmp(object->keys[i], key) == 0) return object->items[i];
  return NULL;
}

const char *orc_json_get_string(const orc_json *object, const char *key, const char *fallback) {
  const orc_json *v = orc_json_get(object, key);
  return v && v->type == ORC_JSON_STRING ? v->string : fallback;
}

bool orc_json_get_bool(const orc_json *object, const char *key, bool fallback) {
  const orc_json *v = orc_json_get(object, key);
  return v && v->type == ORC_JSON_BOOL ? v->boolean : fallback;
}

double orc_json_get_number(const orc_json *object, const char *key, double fallback) {
  const orc_json *v = orc_json_get(object, key);
  return v && v->type == ORC_JSON_NUMBER ? v->number : fallback;
}

bool orc_json_equal(const orc_json *a, const orc_json *b) {
  if (!a || !b) return a == b;
  if (a->type != b->type) return false;
  switch (a->type) {
  case ORC_JSON_NULL: return true;
  case ORC_JSON_BOOL: return a->boolean == b->boolean;
  case ORC_JSON_NUMBER: return a->number == b->number;
  case ORC_JSON_STRING: return a->len == b->len && memcmp(a->string, b->string, a->len) == 0;
  case ORC_JSON_ARRAY:
    if (a->len != b->len) return false;
    for (size_t i = 0; i < a->len; i++)
      if (!orc_json_equal(a->items[i], b->items[i])) return false;
    return true;
  case ORC_JSON_OBJECT:
    if (a->len != b->len) return false;
    for (size_t i = 0; i < a->len; i++)
      if (!orc_json_equal(a->items[i], orc_json_get(b, a->keys[i]))) return false;
    return true;
  }
  return false;
}

// -- parser -----------------------------------------------------------------------------------

typedef struct {
  const char *s, *end;
  int depth;
  char *error;
} orc_parser;

static void orc_fail(orc_parser *p, const char *what) {
  if (!p->error) p->error = orc_sprintf("%s at byte %zu", what, (size_t)(p->end - p->s));
}

static void orc_ws(orc_parser *p) {
  while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static orc_json *orc_parse_value(orc_parser *p);

static int orc_hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool orc_read_u4(orc_parser *p, unsigned *out) {
  if (p->end - p->s < 4) return false;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = orc_hex(p->s[i]);
    if (h < 0) return false;
    v = v * 16 + (unsigned)h;
  }
  p->s += 4;
  *out = v;
  return true;
}

static void orc_put_utf8(orc_str_builder *b, unsigned c) {
  char u[4];
  size_t n;
  if (c < 0x80) u[0] = (char)c, n = 1;
  else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F)), n = 2;
  else if (c < 0x10000)
    u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | ((c >> 6) & 0x3F)), u[2] = (char)(0x80 | (c & 0x3F)), n = 3;
  else
    u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
    u[2] = (char)(0x80 | ((c >> 6) & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F)), n = 4;
  orc_sb_append(b, u, n);
}

// A string literal; p->s is after the opening quote. Returns the bytes in *b.
static bool orc_parse_string_into(orc_parser *p, orc_str_builder *b) {
  while (p->s < p->end) {
    unsigned char c = (unsigned char)*p->s++;
    if (c == '"') return true;
    if (c < 0x20) return orc_fail(p, "control character in string"), false;
    if (c != '\\') {
      orc_sb_append(b, (const char *)&c, 1);
      continue;
    }
    if (p->s >= p->end) break;
    char e = *p->s++;
    switch (e) {
    case '"': orc_sb_append(b, "\"", 1); break;
    case '\\': orc_sb_append(b, "\\", 1); break;
    case '/': orc_sb_append(b, "/", 1); break;
    case 'b': orc_sb_append(b, "\b", 1); break;
    case 'f': orc_sb_append(b, "\f", 1); break;
    case 'n': orc_sb_append(b, "\n", 1); break;
    case 'r': orc_sb_append(b, "\r", 1); break;
    case 't': orc_sb_append(b, "\t", 1); break;
    case 'u': {
      unsigned c1;
      if (!orc_read_u4(p, &c1)) return orc_fail(p, "invalid \\u escape"), false;
      if (c1 >= 0xD800 && c1 < 0xDC00) {
        unsigned c2;
        if (p->end - p->s < 2 || p->s[0] != '\\' || p->s[1] != 'u') return orc_fail(p, "lone surrogate"), false;
        p->s += 2;
        if (!orc_read_u4(p, &c2) || c2 < 0xDC00 || c2 > 0xDFFF) return orc_fail(p, "invalid surrogate pair"), false;
        c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
      } else if (c1 >= 0xDC00 && c1 <= 0xDFFF) {
        return orc_fail(p, "lone surrogate"), false;
      }
      orc_put_utf8(b, c1);
      break;
    }
    default: return orc_fail(p, "invalid escape"), false;
    }
  }
  orc_fail(p, "unterminated string");
  return false;
}

static orc_json *orc_parse_string(orc_parser *p) {
  orc_str_builder b = {0};
  if (!orc_parse_string_into(p, &b)) {
    free(b.ptr);
    return NULL;
  }
  orc_json *v = orc_json_new(ORC_JSON_STRING);
  v->len = b.len;
  v->string = orc_sb_finish(&b);
  return v;
}

static orc_json *orc_parse_number(orc_parser *p) {
  const char *start = p->s;
  if (p->s < p->end && *p->s == '-') p->s++;
  if (p->s >= p->end) return orc_fail(p, "invalid number"), NULL;
  if (*p->s == '0') p->s++;
  else if (*p->s >= '1' && *p->s <= '9')
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') p->s++;
  else return orc_fail(p, "invalid number"), NULL;
  if (p->s < p->end && *p->s == '.') {
    p->s++;
    if (p->s >= p->end || *p->s < '0' || *p->s > '9') return orc_fail(p, "invalid number"), NULL;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') p->s++;
  }
  if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
    p->s++;
    if (p->s < p->end && (*p->s == '+' || *p->s == '-')) p->s++;
    if (p->s >= p->end || *p->s < '0' || *p->s > '9') return orc_fail(p, "invalid number"), NULL;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') p->s++;
  }
  char buf[64];
  size_t n = (size_t)(p->s - start);
  if (n >= sizeof buf) return orc_fail(p, "number too long"), NULL;
  memcpy(buf, start, n);
  buf[n] = 0;
  return orc_json_number(strtod(buf, NULL));
}

static bool orc_literal(orc_parser *p, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0) return false;
  p->s += n;
  return true;
}

static orc_json *orc_parse_value(orc_parser *p) {
  orc_ws(p);
  if (p->s >= p->end) return orc_fail(p, "unexpected end"), NULL;
  char c = *p->s;
  if (c == '"') {
    p->s++;
    return orc_parse_string(p);
  }
  if (c == '-' || (c >= '0' && c <= '9')) return orc_parse_number(p);
  if (orc_literal(p, "true")) return orc_json_bool(true);
  if (orc_literal(p, "false")) return orc_json_bool(false);
  if (orc_literal(p, "null")) return orc_json_null();
  if (c != '[' && c != '{') return orc_fail(p, "unexpected character"), NULL;
  if (++p->depth > ORC_JSON_MAX_DEPTH) return orc_fail(p, "nested too deeply"), NULL;
  p->s++;
  bool object = c == '{';
  orc_json *v = object ? orc_json_object() : orc_json_array();
  orc_ws(p);
  if (p->s < p->end && *p->s == (object ? '}' : ']')) {
    p->s++;
    p->depth--;
    return v;
  }
  for (;;) {
    orc_str_builder key = {0};
    if (object) {
      orc_ws(p);
      if (p->s >= p->end || *p->s != '"') goto fail_key;
      p->s++;
      if (!orc_parse_string_into(p, &key)) goto fail_key;
      orc_ws(p);
      if (p->s >= p->end || *p->s != ':') goto fail_key;
      p->s++;
    }
    orc_json *item = orc_parse_value(p);
    if (!item) {
      free(key.ptr);
      goto fail;
    }
    if (object) {
      char *k = orc_sb_finish(&key);
      orc_json_set(v, k, item);
      free(k);
    } else {
      orc_json_push(v, item);
    }
    orc_ws(p);
    if (p->s < p->end && *p->s == ',') {
      p->s++;
      continue;
    }
    if (p->s < p->end && *p->s == (object ? '}' : ']')) {
      p->s++;
      p->depth--;
      return v;
    }
    orc_fail(p, object ? "expected , or }" : "expected , or ]");
    goto fail;
  fail_key:
    free(key.ptr);
    orc_fail(p, "invalid object key");
    goto fail;
  }
fail:
  orc_json_free(v);
  return NULL;
}

orc_json *orc_json_parse(const char *text, size_t len, char **error) {
  orc_parser p = {text, text + len, 0, NULL};
  orc_json *v = orc_parse_value(&p);
  if (v) {
    orc_ws(&p);
    if (p.s != p.end) {
      orc_fail(&p, "trailing characters");
      orc_json_free(v);
      v = NULL;
    }
  }
  if (!v && p.error) {
    // Position from the start, not the end.
    size_t at = (size_t)(p.s - text);
    free(p.error);
    p.error = orc_sprintf("invalid JSON at byte %zu", at);
  }
  if (error) *error = p.error;
  else free(p.error);
  return v;
}

// -- writer -----------------------------------------------------------------------------------

void orc_sb_append(orc_str_builder *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    b->ptr = realloc(b->ptr, cap);
    if (!b->ptr) abort();
    b->cap = cap;
  }
  memcpy(b->ptr + b->len, s, n);
  b->len += n;
  b->ptr[b->len] = 0;
}

void orc_sb_puts(orc_str_builder *b, const char *s) { orc_sb_append(b, s, strlen(s)); }

char *orc_sb_finish(orc_str_builder *b) {
  if (!b->ptr) return orc_strdup("");
  char *out = b->ptr;
  b->ptr = NULL;
  b->len = b->cap = 0;
  return out;
}

static void orc_write_string(orc_str_builder *b, const char *s, size_t n) {
  orc_sb_append(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"') orc_sb_append(b, "\\\"", 2);
    else if (c == '\\') orc_sb_append(b, "\\\\", 2);
    else if (c == '\n') orc_sb_append(b, "\\n", 2);
    else if (c == '\r') orc_sb_append(b, "\\r", 2);
    else if (c == '\t') orc_sb_append(b, "\\t", 2);
    else if (c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c), orc_sb_append(b, esc, 6);
    else orc_sb_append(b, (const char *)&c, 1);
  }
  orc_sb_append(b, "\"", 1);
}

static void orc_write(orc_str_builder *b, const orc_json *v) {
  char num[32];
  switch (v ? v->type : ORC_JSON_NULL) {
  case ORC_JSON_NULL: orc_sb_puts(b, "null"); break;
  case ORC_JSON_BOOL: orc_sb_puts(b, v->boolean ? "true" : "false"); break;
  case ORC_JSON_NUMBER:
    if (!isfinite(v->number)) orc_sb_puts(b, "null");
    else if (v->number == (double)(long long)v->number && fabs(v->number) < 9007199254740992.0)
      snprintf(num, sizeof num, "%lld", (long long)v->number), orc_sb_puts(b, num);
    else snprintf(num, sizeof num, "%.17g", v->number), orc_sb_puts(b, num);
    break;
  case ORC_JSON_STRING: orc_write_string(b, v->string, v->len); break;
  case ORC_JSON_ARRAY:
    orc_sb_append(b, "[", 1);
    for (size_t i = 0; i < v->len; i++) {
      if (i) orc_sb_append(b, ",", 1);
      orc_write(b, v->items[i]);
    }
    orc_sb_append(b, "]", 1);
    break;
  case ORC_JSON_OBJECT:
    orc_sb_append(b, "{", 1);
    for (size_t i = 0; i < v->len; i++) {
      if (i) orc_sb_append(b, ",", 1);
      orc_write_string(b, v->keys[i], strlen(v->keys[i]));
      orc_sb_append(b, ":", 1);
      orc_write(b, v->items[i]);
    }
    orc_sb_append(b, "}", 1);
    break;
  }
}

char *orc_json_dump(const orc_json *v) {
  orc_str_builder b = {0};
  orc_write(&b, v);
  return orc_sb_finish(&b);
}
