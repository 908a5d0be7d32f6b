package main

// The schemas of Describe come from the types' tags (schema.Of). This test keeps the schemas
// as they were written by hand before, and checks that the generated ones are the same JSON
// (keys in any order, arrays in order), so that the CRD never changes by accident: a change
// of a tag that changes the CRD changes this file too, on purpose.
//
// Run it with sdk/go/test.sh plugins/rabbitmq-exchange (the go.work of the build).

import (
	"encoding/json"
	"reflect"
	"testing"

	orchard "orchard.dev/sdk"
)

func immutable(what string) []any {
	return []any{map[string]any{"rule": "self == oldSelf", "message": what + " is immutable"}}
}

func str(max int) map[string]any { return map[string]any{"type": "string", "maxLength": max} }

var handWrittenResource = map[string]any{
	"type":     "object",
	"required": []string{"vhostRef", "name"},
	"properties": map[string]any{
		"vhostRef": map[string]any{"type": "string", "maxLength": 253, "x-kubernetes-validations": immutable("vhostRef")},
		"name": map[string]any{"type": "string", "minLength": 1, "maxLength": 255,
			"x-kubernetes-validations": immutable("name")},
		// Plugin exchange types (x-...) are allowed: RabbitMQ refuses the ones it lacks.
		"type": map[string]any{"type": "string", "default": "direct", "maxLength": 255,
			"pattern": "^(direct|fanout|topic|headers|x-[a-z0-9-]+)$", "x-kubernetes-validations": immutable("type")},
		"durable":    map[string]any{"type": "boolean", "default": true, "x-kubernetes-validations": immutable("durable")},
		"autoDelete": map[string]any{"type": "boolean", "default": false, "x-kubernetes-validations": immutable("autoDelete")},
		"internal":   map[string]any{"type": "boolean", "default": false, "x-kubernetes-validations": immutable("internal")},
		"arguments": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			"x-kubernetes-validations": immutable("arguments")},
		"bindings": map[string]any{"type": "array", "maxItems": 64, "items": map[string]any{
			"type": "object", "required": []string{"exchange"},
			"properties": map[string]any{
				"exchange":   map[string]any{"type": "string", "minLength": 1, "maxLength": 255},
				"routingKey": str(255),
			},
		}},
		"alternateExchange": str(255),
	},
}

var handWrittenFilter = map[string]any{
	"type": "object", "required": []string{"vhost"},
	"properties": map[string]any{
		"vhost": str(255), "name": str(255), "type": str(255),
		"durable": map[string]any{"type": "boolean"},
	},
}

var handWrittenObserved = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"vhost": map[string]any{"type": "string"}, "name": map[string]any{"type": "string"},
		"type": map[string]any{"type": "string"}, "durable": map[string]any{"type": "boolean"},
		"autoDelete": map[string]any{"type": "boolean"}, "internal": map[string]any{"type": "boolean"},
		"arguments": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
		"bindings": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
			"exchange": map[string]any{"type": "string"}, "routingKey": map[string]any{"type": "string"}}}},
		"alternateExchange": map[string]any{"type": "string"},
	},
}

// asJSON is v as the host receives it: JSON text, decoded.
func asJSON(t *testing.T, v any) (any, string) {
	t.Helper()
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back any
	if err := json.Unmarshal(text, &back); err != nil {
		t.Fatal(err)
	}
	canonical, _ := json.Marshal(back)
	return back, string(canonical)
}

func TestTheSchemasFromTheTypesAreTheHandWrittenOnes(t *testing.T) {
	d := Exchange{}.Describe()
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"resource", d.ResourceSchema, handWrittenResource},
		{"filter", d.FilterSchema, handWrittenFilter},
		{"observed", d.ObservedSchema, handWrittenObserved},
	} {
		got, gotText := asJSON(t, c.got)
		want, wantText := asJSON(t, c.want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s schema changed:\n got %s\nwant %s", c.what, gotText, wantText)
		}
	}
}

// The description as it crosses the contract: the same text for the same schemas.
func TestTheDescriptionTextIsTheHandWrittenOne(t *testing.T) {
	d, err := orchard.NewRaw[Spec, Filter, State](Exchange{}).Describe()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		text string
		want any
	}{
		{"resource", d.ResourceSchema, handWrittenResource},
		{"filter", *d.FilterSchema, handWrittenFilter},
		{"observed", d.ObservedSchema, handWrittenObserved},
	} {
		if _, want := asJSON(t, c.want); c.text != want {
			t.Errorf("%s schema text:\n got %s\nwant %s", c.what, c.text, want)
		}
	}
}

// Observed answers what the observed schema describes, as the hand-written map did.
func TestObservedIsTheOldMap(t *testing.T) {
	res := &orchard.Resource[State]{ID: "%2F/ex", State: State{
		Vhost: "/", Name: "ex", Type: "fanout", Durable: true, Arguments: map[string]any{"x": 1.0},
		Bindings: []BoundFrom{{"up", "k", "k~"}}, Policy: map[string]any{"alternate-exchange": "ae"},
	}}
	got, err := Exchange{}.Observed(res)
	if err != nil {
		t.Fatal(err)
	}
	_, gotText := asJSON(t, got)
	_, want := asJSON(t, map[string]any{
		"vhost": "/", "name": "ex", "type": "fanout", "durable": true, "autoDelete": false, "internal": false,
		"arguments": map[string]any{"x": 1}, "bindings": []any{map[string]any{"exchange": "up", "routingKey": "k"}},
		"alternateExchange": "ae",
	})
	if gotText != want {
		t.Fatalf("observed:\n got %s\nwant %s", gotText, want)
	}
	res.State.Policy, res.State.Bindings = nil, nil
	got, _ = Exchange{}.Observed(res)
	if _, text := asJSON(t, got); text != `{"arguments":{"x":1},"autoDelete":false,"bindings":[],"durable":true,"internal":false,"name":"ex","type":"fanout","vhost":"/"}` {
		t.Fatalf("observed without policy: %s", text)
	}
}
