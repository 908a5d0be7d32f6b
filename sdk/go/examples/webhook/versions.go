package main

// Webhook's API versions: v1alpha1 kept the endpoint's URL at the top of spec.resource
// (`url`); v1beta1 moved it into `endpoint: {url, timeoutSeconds}`, with a timeout v1alpha1
// cannot hold. A round trip loses nothing: while an object is read at v1alpha1 its timeout
// waits in the annotation hooks.example.com/v1beta1-timeout-seconds, and comes back from it at
// v1beta1. status.resource (Hook) is the same at both versions: only spec.resource changes.

import (
	"encoding/json"

	orchard "orchard.dev/sdk"
	"orchard.dev/sdk/schema"
)

// SpecV1alpha1 is spec.resource at v1alpha1, for its schema: the code works at v1beta1 (Spec),
// the apiserver converts v1alpha1 objects through Convert.
type SpecV1alpha1 struct {
	Name   string   `json:"name" jsonschema:"required,minLength=1,maxLength=63" orchard:"immutable"`
	URL    string   `json:"url" jsonschema:"required,minLength=1,maxLength=2048"`
	Events []string `json:"events,omitempty" jsonschema:"maxItems=16"`
}

// TimeoutKey is the annotation where a v1alpha1 object keeps its v1beta1 timeout (JSON: a
// number): a key under the kind's group, the only ones the host lets a conversion write.
const TimeoutKey = Group + "/v1beta1-timeout-seconds"

// Versions: v1alpha1, then v1beta1 — the description's version, with its schemas, and the
// storage version.
func (w Webhooks) Versions() []orchard.APIVersion {
	return []orchard.APIVersion{
		{Name: "v1alpha1", ResourceSchema: schema.Of[SpecV1alpha1](), ObservedSchema: schema.Of[Hook]()},
		w.Describe().APIVersion(true), // v1beta1 with the description's schemas; the storage version
	}
}

// Convert moves the URL (and the timeout) between `url` and `endpoint`; every other field of
// spec.resource comes back as it went (orchard.EditObject).
func (Webhooks) Convert(obj orchard.Convertible, from, to string) (orchard.Convertible, error) {
	var err error
	switch {
	case from == to:
	case from == "v1alpha1" && to == "v1beta1":
		timeout, kept := obj.Annotations[TimeoutKey]
		delete(obj.Annotations, TimeoutKey)
		obj.Resource, err = orchard.EditObject(obj.Resource, "spec.resource", func(f map[string]json.RawMessage) error {
			url, ok := f["url"]
			if !ok {
				return nil
			}
			endpoint := map[string]json.RawMessage{"url": url}
			if kept { // the timeout this object had at v1beta1
				var seconds int
				if json.Unmarshal([]byte(timeout), &seconds) != nil {
					return orchard.InvalidConfiguration("annotation %s is not a number of seconds: %q", TimeoutKey, timeout)
				}
				endpoint["timeoutSeconds"] = json.RawMessage(timeout)
			}
			text, err := json.Marshal(endpoint)
			delete(f, "url")
			f["endpoint"] = text
			return err
		})
	case from == "v1beta1" && to == "v1alpha1":
		delete(obj.Annotations, TimeoutKey)
		obj.Resource, err = orchard.EditObject(obj.Resource, "spec.resource", func(f map[string]json.RawMessage) error {
			text, ok := f["endpoint"]
			if !ok {
				return nil
			}
			var endpoint map[string]json.RawMessage
			if json.Unmarshal(text, &endpoint) != nil || endpoint["url"] == nil {
				return orchard.InvalidConfiguration("spec.resource.endpoint is not an object with a url: %s", text)
			}
			delete(f, "endpoint")
			f["url"] = endpoint["url"]
			if timeout, ok := endpoint["timeoutSeconds"]; ok { // v1alpha1 has no field for it
				obj.Annotations[TimeoutKey] = string(timeout)
			}
			return nil
		})
	default:
		err = orchard.Unrecoverable("Webhook has versions v1alpha1 and v1beta1; cannot convert %s to %s", from, to)
	}
	return obj, err
}
