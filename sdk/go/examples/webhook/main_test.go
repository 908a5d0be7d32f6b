package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	orchard "orchard.dev/sdk"
)

func at(resource string, annotations map[string]string) orchard.Convertible {
	return orchard.Convertible{Resource: json.RawMessage(resource), Annotations: annotations}
}

func TestAV1alpha1HookReadsAtV1beta1WithItsURLInTheEndpointAndBack(t *testing.T) {
	alpha := at(`{"name":"deploys","url":"https://ci.example.com/hook","events":["push","tag"]}`, map[string]string{"team": "a"})
	beta, err := Webhooks{}.Convert(alpha, "v1alpha1", "v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	var spec Spec // the v1beta1 document decodes into the code's type
	if err := json.Unmarshal(beta.Resource, &spec); err != nil || spec.Endpoint.URL != "https://ci.example.com/hook" || len(spec.Events) != 2 {
		t.Fatalf("v1beta1: %s (%v)", beta.Resource, err)
	}
	if err := orchard.CheckRoundTrip(Webhooks{}, alpha, "v1alpha1", "v1beta1"); err != nil {
		t.Fatal(err)
	}
}

// Through NewRaw, as the host calls it: the annotations are never nil, and the conversion's
// own copy.
func TestAV1beta1TimeoutWaitsInAnAnnotationAtV1alpha1(t *testing.T) {
	beta := orchard.Convertible{Resource: json.RawMessage(`{"name":"deploys","endpoint":{"url":"https://ci.example.com/hook","timeoutSeconds":30}}`)}
	alpha, f := orchard.NewRaw[Spec, struct{}, Hook](Webhooks{}).Convert(beta, "v1beta1", "v1alpha1")
	if f != nil || string(alpha.Resource) != `{"name":"deploys","url":"https://ci.example.com/hook"}` || alpha.Annotations[TimeoutKey] != "30" {
		t.Fatalf("v1alpha1: %s %v %v", alpha.Resource, alpha.Annotations, f)
	}
	if err := orchard.CheckRoundTrip(Webhooks{}, beta, "v1beta1", "v1alpha1"); err != nil {
		t.Fatal(err)
	}
}

func TestABadTimeoutAnnotationIsAnInvalidConfiguration(t *testing.T) {
	raw := orchard.NewRaw[Spec, struct{}, Hook](Webhooks{})
	_, f := raw.Convert(at(`{"name":"a","url":"u"}`, map[string]string{TimeoutKey: "soon"}), "v1alpha1", "v1beta1")
	if f == nil || f.Kind != orchard.KindInvalidConfiguration || !strings.Contains(f.Message, TimeoutKey) {
		t.Fatalf("got %v", f)
	}
	if _, f := raw.Convert(at(`{}`, nil), "v1alpha1", "v2"); f == nil || f.Kind != orchard.KindUnrecoverable {
		t.Fatalf("an unknown version: got %v", f)
	}
}

func TestTheVersionsListTheDescriptionsWithItsSchemas(t *testing.T) {
	raw := orchard.NewRaw[Spec, struct{}, Hook](Webhooks{})
	d, err := raw.Describe()
	if err != nil {
		t.Fatal(err)
	}
	versions, err := raw.Versions()
	if err != nil || len(versions) != 2 {
		t.Fatalf("%v %v", versions, err)
	}
	if v := versions[1]; v.Name != d.Version || !v.Storage || v.ResourceSchema != d.ResourceSchema || v.ObservedSchema != d.ObservedSchema {
		t.Fatalf("v1beta1: %+v", v)
	}
	var alpha map[string]any
	if err := json.Unmarshal([]byte(versions[0].ResourceSchema), &alpha); err != nil {
		t.Fatal(err)
	}
	if got := alpha["required"]; !reflect.DeepEqual(got, []any{"name", "url"}) || versions[0].Storage {
		t.Fatalf("v1alpha1: %s", versions[0].ResourceSchema)
	}
}
