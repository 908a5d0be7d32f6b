//go:build !wasip1

// Package schema derives the schemas of an Orchard actuator's description (spec.resource,
// spec.import.filter, status.resource) from Go types, in the form a CRD needs.
//
// It is a package of its own so that a plugin that writes its schemas by hand does not carry
// the JSON-Schema library (about 0.5 MB of component). Inside a component the schemas are not
// derived (schema_wasip1.go): sdk/go/build.sh runs Describe and Versions natively.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/invopop/jsonschema"
)

// Of is the schema of T's JSON encoding as a CRD needs it — a structural OpenAPI v3
// schema, everything inline — derived from T's struct tags by github.com/invopop/jsonschema,
// for orchard.Description's ResourceSchema, FilterSchema and ObservedSchema:
//
//	type Spec struct {
//		Name    string         `json:"name" jsonschema:"required,minLength=1,maxLength=255" orchard:"immutable"`
//		Type    string         `json:"type" jsonschema:"default=direct,enum=direct,enum=fanout"`
//		Durable *bool          `json:"durable" jsonschema:"default=true"`
//		Args    map[string]any `json:"arguments"`
//	}
//
// The tags are the library's: `json` names a field (a field without it is named as
// encoding/json names it; "-" leaves it out); `jsonschema` adds keywords (required,
// nullable, minLength, maxLength, pattern, format, enum, default, minimum, maximum,
// multipleOf, minItems, maxItems, description, title); `jsonschema_extras` adds any
// other keyword with a scalar value, e.g. `jsonschema_extras:"x-kubernetes-list-type=set"`.
// A field is required only when its tag says so. The SDK's own tag, `orchard:"immutable"`,
// adds the CEL rule `self == oldSelf` (x-kubernetes-validations, message "<name> is
// immutable").
//
// What a CRD needs and JSON Schema says otherwise is turned into the CRD's form: no $schema,
// $id, $ref or $defs (every type is inline, so a recursive type is refused); a map of any
// value (map[string]any, map[string]json.RawMessage) is {"type": "object",
// "x-kubernetes-preserve-unknown-fields": true}, a field of type any just the latter;
// nullable is "nullable": true; []byte is a string of format byte; an exclusive bound is
// OpenAPI v3's boolean form. What a CRD cannot have (a map with non-string keys,
// uniqueItems, a keyword OpenAPI v3 lacks) makes Of panic naming the field: a bug of
// the plugin, which its first Describe (or a go test calling it) shows.
//
// The answer is a fresh map: change it freely (e.g. add a rule that no tag expresses).
func Of[T any]() map[string]any {
	s, err := For(reflect.TypeFor[T]())
	if err != nil {
		panic(err)
	}
	return s
}

// For is Of for a reflect.Type, with an error instead of a panic.
func For(t reflect.Type) (map[string]any, error) {
	if err := checkNotRecursive(t, nil); err != nil {
		return nil, err
	}
	r := jsonschema.Reflector{
		Anonymous: true, DoNotReference: true, ExpandedStruct: true,
		AllowAdditionalProperties: true, RequiredFromJSONSchemaTags: true,
	}
	text, err := json.Marshal(r.ReflectFromType(t))
	if err != nil {
		return nil, fmt.Errorf("schema of %v: %w", t, err)
	}
	var root any
	if err := json.Unmarshal(text, &root); err != nil {
		return nil, fmt.Errorf("schema of %v: %w", t, err)
	}
	s, ok := root.(map[string]any)
	if !ok {
		s = map[string]any{}
	}
	delete(s, "$schema")
	delete(s, "$id")
	if err := crdForm(t, s, t.String()); err != nil {
		return nil, err
	}
	return s, nil
}

// checkNotRecursive refuses a type that contains itself: a CRD schema has no $ref.
func checkNotRecursive(t reflect.Type, stack []reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return checkNotRecursive(t.Elem(), stack)
	case reflect.Struct:
		for _, s := range stack {
			if s == t {
				return fmt.Errorf("schema of %v: the type contains itself, and a CRD schema cannot refer to one (no $ref)", t)
			}
		}
		stack = append(stack, t)
		for i := 0; i < t.NumField(); i++ {
			if err := checkNotRecursive(t.Field(i).Type, stack); err != nil {
				return err
			}
		}
	}
	return nil
}

// openAPIKeywords are the keywords of a CRD's schema (k8s.io/apiextensions JSONSchemaProps)
// that a structural schema may have; x-kubernetes-* are allowed too.
var openAPIKeywords = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "default": true,
	"maximum": true, "exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true,
	"maxLength": true, "minLength": true, "pattern": true, "maxItems": true, "minItems": true,
	"multipleOf": true, "enum": true, "maxProperties": true, "minProperties": true,
	"required": true, "items": true, "allOf": true, "oneOf": true, "anyOf": true, "not": true,
	"properties": true, "additionalProperties": true, "nullable": true, "example": true,
	"externalDocs": true,
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// crdForm turns the library's schema s of type t (where is its path, for errors) into a
// CRD's, and applies the orchard tags.
func crdForm(t reflect.Type, s map[string]any, where string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// nullable: the library's {"oneOf": [X, {"type": "null"}]} is X with "nullable": true.
	if one, ok := s["oneOf"].([]any); ok && len(one) == 2 {
		if null, ok := one[1].(map[string]any); ok && len(null) == 1 && null["type"] == "null" {
			if x, ok := one[0].(map[string]any); ok {
				delete(s, "oneOf")
				for k, v := range x {
					s[k] = v
				}
				s["nullable"] = true
			}
		}
	}
	if s["contentEncoding"] == "base64" { // []byte
		delete(s, "contentEncoding")
		s["format"] = "byte"
	}
	for _, bound := range []string{"exclusiveMaximum", "exclusiveMinimum"} {
		if v, ok := s[bound]; ok {
			if _, isBool := v.(bool); !isBool {
				s[strings.ToLower(bound[9:10])+bound[10:]] = v // maximum / minimum
				s[bound] = true
			}
		}
	}
	if ex, ok := s["examples"].([]any); ok {
		delete(s, "examples")
		if len(ex) > 0 {
			s["example"] = ex[0]
		}
	}
	if key, ok := s["x-kubernetes-list-map-keys"].(string); ok { // one key from jsonschema_extras
		s["x-kubernetes-list-map-keys"] = []any{key}
	}
	if props, ok := s["properties"].(map[string]any); ok && len(props) == 0 {
		delete(s, "properties")
	}
	if t != nil {
		switch {
		case t == rawMessageType || t.Kind() == reflect.Interface:
			s["x-kubernetes-preserve-unknown-fields"] = true
		case t.Kind() == reflect.Map:
			if t.Key().Kind() != reflect.String {
				return fmt.Errorf("schema of %s: a map's keys must be strings in a CRD (%v)", where, t)
			}
			if e := t.Elem(); e == rawMessageType || e.Kind() == reflect.Interface {
				s["x-kubernetes-preserve-unknown-fields"] = true
			}
		}
	}
	if s["uniqueItems"] == true {
		return fmt.Errorf("schema of %s: a CRD cannot have uniqueItems (use jsonschema_extras:\"x-kubernetes-list-type=set\")", where)
	}
	delete(s, "uniqueItems")
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !openAPIKeywords[k] && !strings.HasPrefix(k, "x-kubernetes-") {
			return fmt.Errorf("schema of %s: %q is not a keyword of a CRD's schema", where, k)
		}
	}

	// The parts, with their Go types where the library took them from.
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
		elem = t.Elem()
	}
	if items, ok := s["items"].(map[string]any); ok {
		if err := crdForm(elem, items, where+"[]"); err != nil {
			return err
		}
	}
	if add, ok := s["additionalProperties"].(map[string]any); ok {
		if err := crdForm(elem, add, where+"[*]"); err != nil {
			return err
		}
	}
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		if list, ok := s[k].([]any); ok {
			for _, one := range list {
				if m, ok := one.(map[string]any); ok {
					if err := crdForm(nil, m, where); err != nil {
						return err
					}
				}
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	fields := map[string]reflect.StructField{}
	if t != nil && t.Kind() == reflect.Struct {
		collectFields(t, fields)
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, ok := props[name].(map[string]any)
		if !ok { // true: a field of any value
			p = map[string]any{}
			props[name] = p
		}
		f, known := fields[name]
		var ft reflect.Type
		if known {
			ft = f.Type
		}
		if err := crdForm(ft, p, where+"."+name); err != nil {
			return err
		}
		if known {
			if err := orchardTag(f, name, p, where+"."+name); err != nil {
				return err
			}
		}
	}
	return nil
}

// collectFields maps the JSON names of t's fields to them, embedded structs' fields included,
// as encoding/json names them.
func collectFields(t reflect.Type, out map[string]reflect.StructField) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")
		if tag[0] == "-" && len(tag) == 1 {
			continue
		}
		if f.Anonymous && tag[0] == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collectFields(et, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag[0] != "" {
			name = tag[0]
		}
		if _, seen := out[name]; !seen {
			out[name] = f
		}
	}
}

// orchardTag applies the `orchard` tag of field f (JSON name `name`) to its schema p.
func orchardTag(f reflect.StructField, name string, p map[string]any, where string) error {
	tag, ok := f.Tag.Lookup("orchard")
	if !ok {
		return nil
	}
	for _, word := range strings.Split(tag, ",") {
		switch strings.TrimSpace(word) {
		case "":
		case "immutable":
			rules, _ := p["x-kubernetes-validations"].([]any)
			p["x-kubernetes-validations"] = append(rules,
				map[string]any{"rule": "self == oldSelf", "message": name + " is immutable"})
		default:
			return fmt.Errorf("schema of %s: unknown orchard tag %q (known: immutable)", where, word)
		}
	}
	return nil
}
