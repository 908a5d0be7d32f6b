package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	orchard "orchard.dev/sdk"
)

// canonical is v as JSON text with sorted keys, for comparisons.
func canonical(t *testing.T, v any) string {
	t.Helper()
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back any
	if err := json.Unmarshal(text, &back); err != nil {
		t.Fatal(err)
	}
	text, _ = json.Marshal(back)
	return string(text)
}

type schemaItem struct {
	Key   string `json:"key" jsonschema:"required,minLength=1"`
	Value string `json:"value,omitempty"`
}

type schemaEmbedded struct {
	Labels map[string]string `json:"labels"`
}

type schemaSpec struct {
	schemaEmbedded
	Name      string            `json:"name" jsonschema:"required,maxLength=63,pattern=^[a-z]+$" orchard:"immutable"`
	Kind      string            `json:"kind" jsonschema:"default=a,enum=a,enum=b"`
	Enabled   *bool             `json:"enabled" jsonschema:"default=true"`
	Count     int               `json:"count" jsonschema:"minimum=1,maximum=10,default=3"`
	Ratio     float64           `json:"ratio" jsonschema:"exclusiveMaximum=1"`
	Items     []schemaItem      `json:"items" jsonschema:"maxItems=8" jsonschema_extras:"x-kubernetes-list-type=map,x-kubernetes-list-map-keys=key"`
	Tags      []string          `json:"tags" jsonschema_extras:"x-kubernetes-list-type=set"`
	Extra     map[string]any    `json:"extra"`
	Raw       json.RawMessage   `json:"raw"`
	Anything  any               `json:"anything"`
	Secret    []byte            `json:"secret"`
	When      time.Time         `json:"when"`
	Maybe     *string           `json:"maybe" jsonschema:"nullable"`
	Counts    map[string]int    `json:"counts"`
	Described string            `json:"described" jsonschema:"description=what it is"`
	Ignored   string            `json:"-"`
	hidden    string            //nolint:unused
	Headers   map[string]string `json:"headers,omitempty"`
}

func TestSchemaOfIsStructuralAndInline(t *testing.T) {
	got := canonical(t, Of[schemaSpec]())
	want := canonical(t, map[string]any{
		"type":     "object",
		"required": []string{"name"},
		"properties": map[string]any{
			"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"name": map[string]any{"type": "string", "maxLength": 63, "pattern": "^[a-z]+$",
				"x-kubernetes-validations": []any{map[string]any{"rule": "self == oldSelf", "message": "name is immutable"}}},
			"kind":    map[string]any{"type": "string", "default": "a", "enum": []string{"a", "b"}},
			"enabled": map[string]any{"type": "boolean", "default": true},
			"count":   map[string]any{"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
			"ratio":   map[string]any{"type": "number", "maximum": 1, "exclusiveMaximum": true},
			"items": map[string]any{"type": "array", "maxItems": 8,
				"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []string{"key"},
				"items": map[string]any{"type": "object", "required": []string{"key"}, "properties": map[string]any{
					"key": map[string]any{"type": "string", "minLength": 1}, "value": map[string]any{"type": "string"}}}},
			"tags":      map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "x-kubernetes-list-type": "set"},
			"extra":     map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			"raw":       map[string]any{"x-kubernetes-preserve-unknown-fields": true},
			"anything":  map[string]any{"x-kubernetes-preserve-unknown-fields": true},
			"secret":    map[string]any{"type": "string", "format": "byte"},
			"when":      map[string]any{"type": "string", "format": "date-time"},
			"maybe":     map[string]any{"type": "string", "nullable": true},
			"counts":    map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}},
			"described": map[string]any{"type": "string", "description": "what it is"},
			"headers":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		},
	})
	if got != want {
		t.Fatalf("schema:\n got %s\nwant %s", got, want)
	}
	for _, k := range []string{`"$schema"`, `"$id"`, `"$ref"`, `"$defs"`} {
		if strings.Contains(got, k) {
			t.Fatalf("%s is left: %s", k, got)
		}
	}
}

func TestSchemaOfAnEmptyStructIsAnObject(t *testing.T) {
	if got := canonical(t, Of[struct{}]()); got != `{"type":"object"}` {
		t.Fatal(got)
	}
}

func TestSchemaOfEachCallIsAFreshMap(t *testing.T) {
	a := Of[schemaItem]()
	a["properties"].(map[string]any)["key"].(map[string]any)["maxLength"] = 3
	if b := Of[schemaItem](); strings.Contains(canonical(t, b), "maxLength") {
		t.Fatal(canonical(t, b))
	}
}

type recursive struct {
	Children []recursive `json:"children"`
}

type intKeys struct {
	ByNumber map[int]string `json:"byNumber"`
}

type unique struct {
	Set []string `json:"set" jsonschema:"uniqueItems=true"`
}

type badTag struct {
	Name string `json:"name" orchard:"imutable"`
}

func TestWhatACRDCannotHaveIsRefusedNamingTheField(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[recursive](), "contains itself"},
		{reflect.TypeFor[intKeys](), "schema.intKeys.byNumber: a map's keys must be strings"},
		{reflect.TypeFor[unique](), "schema.unique.set: a CRD cannot have uniqueItems"},
		{reflect.TypeFor[badTag](), `schema.badTag.name: unknown orchard tag "imutable"`},
	} {
		if _, err := For(c.typ); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.typ, err, c.want)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "contains itself") {
			t.Fatalf("SchemaOf did not panic: %v", r)
		}
	}()
	Of[recursive]()
}

// A Describe whose schema cannot be made fails the call (the panic becomes a failure).
func TestADescribeWhoseSchemaPanicsFails(t *testing.T) {
	raw := orchard.NewRaw[recursive, struct{}, schemaItem](panickySchema{})
	if _, err := raw.Describe(); err == nil || !strings.Contains(err.Error(), "contains itself") {
		t.Fatalf("describe: %v", err)
	}
}

type panickySchema struct {
	orchard.Base[recursive, struct{}, schemaItem]
}

func (panickySchema) Describe() orchard.Description {
	return orchard.Description{Name: "p", ResourceSchema: Of[recursive](), ObservedSchema: Of[schemaItem]()}
}

func (panickySchema) GetByID(*orchard.Object[recursive], string) (*orchard.Resource[schemaItem], error) {
	return nil, nil
}

func (panickySchema) Create(*orchard.Object[recursive]) (*orchard.Resource[schemaItem], error) {
	return nil, nil
}

func (panickySchema) Delete(*orchard.Object[recursive], *orchard.Resource[schemaItem]) (orchard.Status, error) {
	return orchard.Done(), nil
}
