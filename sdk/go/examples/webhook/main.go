// An example of a kind with two API versions, written with the Orchard Go SDK: webhooks of a
// small HTTP service as Kubernetes objects (Webhook.hooks.example.com). The code works at
// v1beta1, the storage version; v1alpha1, the version before, is still served, and the
// apiserver converts between the two through the plugin (versions.go).
//
// The service (its base URL and a token in the credentials Secret) keeps a hook at
// <url>/hooks/<name>: GET, PUT (JSON body) and DELETE.
//
//   - identity: the hook's name (percent-encoded), stored by the host in status.id;
//   - adoption: the hook of the same name;
//   - mutable through the `settings` reconciler: endpoint, events; immutable: name.
//
// Build it with sdk/go/build.sh sdk/go/examples/webhook webhook.wasm; see the "Several API
// versions" section of docs/writing-a-plugin/go.md.
package main

import (
	"net/url"
	"reflect"

	orchard "orchard.dev/sdk"
	"orchard.dev/sdk/schema"
)

// Group is the kind's API group; the conversion's annotations are under it.
const Group = "hooks.example.com"

// Endpoint is where the service sends the events.
type Endpoint struct {
	URL            string `json:"url" jsonschema:"required,minLength=1,maxLength=2048"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"minimum=1,maximum=60"`
}

// Spec is spec.resource at v1beta1, the version every call sees.
type Spec struct {
	Name     string   `json:"name" jsonschema:"required,minLength=1,maxLength=63" orchard:"immutable"`
	Endpoint Endpoint `json:"endpoint" jsonschema:"required"`
	Events   []string `json:"events,omitempty" jsonschema:"maxItems=16"`
}

// Hook is what the service answers, the state the plugin keeps and status.resource (the same
// at both versions).
type Hook struct {
	Name           string   `json:"name"`
	URL            string   `json:"url"`
	TimeoutSeconds int      `json:"timeoutSeconds,omitempty"`
	Events         []string `json:"events,omitempty"`
}

// Webhooks is the actuator; it implements orchard.Versioned too (versions.go).
type Webhooks struct {
	orchard.Base[Spec, struct{}, Hook]
}

func init() { orchard.Export[Spec, struct{}, Hook](Webhooks{}) }

func main() {}

func (Webhooks) Describe() orchard.Description {
	return orchard.Description{
		Name: "webhook", Group: Group, Version: "v1beta1", Kind: "Webhook", Plural: "webhooks",
		ResourceSchema: schema.Of[Spec](), ObservedSchema: schema.Of[Hook](),
		NeedsCredentials: true,
	}
}

// service is the hooks API of the object's credentials.
type service struct{ url, token string }

func serviceFor(obj *orchard.Object[Spec]) (*service, error) {
	base, err := obj.Credential("url")
	if err != nil {
		return nil, err
	}
	token, err := obj.Credential("token")
	if err != nil {
		return nil, err
	}
	return &service{base, token}, nil
}

// send sends r with the token, under the call's context.
func (s *service) send(obj *orchard.Object[Spec], r *orchard.Request) (*orchard.Response, error) {
	return r.Header("authorization", "Bearer "+s.token).WithContext(obj.Context()).Send()
}

func (s *service) hookURL(name string) string { return s.url + "/hooks/" + orchard.PathSegment(name) }

// get is the hook `name`; nil when the service has none.
func (s *service) get(obj *orchard.Object[Spec], name string) (*Hook, error) {
	r, err := s.send(obj, orchard.Get(s.hookURL(name)))
	if err != nil {
		return nil, err
	}
	if r.Status == 404 {
		return nil, nil
	}
	if err := r.Check("get hook " + name); err != nil {
		return nil, err
	}
	var h Hook
	return &h, r.JSON(&h)
}

func (s *service) put(obj *orchard.Object[Spec], spec *Spec) (*Hook, error) {
	h := Hook{Name: spec.Name, URL: spec.Endpoint.URL, TimeoutSeconds: spec.Endpoint.TimeoutSeconds, Events: spec.Events}
	r, err := s.send(obj, orchard.Put(s.hookURL(spec.Name)).JSON(h))
	if err != nil {
		return nil, err
	}
	return &h, r.Check("put hook " + spec.Name)
}

func resource(h *Hook) *orchard.Resource[Hook] {
	return &orchard.Resource[Hook]{ID: orchard.PathSegment(h.Name), State: *h}
}

func (Webhooks) GetByID(obj *orchard.Object[Spec], id string) (*orchard.Resource[Hook], error) {
	s, err := serviceFor(obj)
	if err != nil {
		return nil, err
	}
	name, err := url.PathUnescape(id)
	if err != nil || name == "" {
		return nil, orchard.InvalidConfiguration("hook id %q is not a percent-encoded name", id)
	}
	h, err := s.get(obj, name)
	if err != nil || h == nil {
		return nil, err
	}
	return resource(h), nil
}

func (Webhooks) ListForAdoption(obj *orchard.Object[Spec]) ([]orchard.Resource[Hook], bool, error) {
	if obj.Spec == nil {
		return nil, false, nil
	}
	s, err := serviceFor(obj)
	if err != nil {
		return nil, true, err
	}
	h, err := s.get(obj, obj.Spec.Name)
	if err != nil || h == nil {
		return nil, true, err
	}
	return []orchard.Resource[Hook]{*resource(h)}, true, nil
}

func (Webhooks) Create(obj *orchard.Object[Spec]) (*orchard.Resource[Hook], error) {
	spec, err := obj.RequireSpec()
	if err != nil {
		return nil, err
	}
	s, err := serviceFor(obj)
	if err != nil {
		return nil, err
	}
	// PUT is an upsert: a hook of that name that adoption did not find is not this object's.
	if h, err := s.get(obj, spec.Name); err != nil || h != nil {
		if err == nil {
			err = orchard.Transient("a hook named %s exists already and is not this object's", spec.Name)
		}
		return nil, err
	}
	h, err := s.put(obj, spec)
	if err != nil {
		return nil, err
	}
	return resource(h), nil
}

func (Webhooks) Delete(obj *orchard.Object[Spec], res *orchard.Resource[Hook]) (orchard.Status, error) {
	s, err := serviceFor(obj)
	if err != nil {
		return orchard.Status{}, err
	}
	r, err := s.send(obj, orchard.Delete(s.hookURL(res.State.Name)))
	if err == nil && r.Status != 404 {
		err = r.Check("delete hook " + res.State.Name)
	}
	return orchard.Done(), err
}

func (Webhooks) Reconcilers(*orchard.Object[Spec], *orchard.Resource[Hook]) ([]string, error) {
	return []string{"settings"}, nil
}

func (Webhooks) RunReconciler(name string, obj *orchard.Object[Spec], res *orchard.Resource[Hook]) (orchard.Status, error) {
	if name != "settings" {
		return orchard.Status{}, orchard.Unrecoverable("no reconciler named %q", name)
	}
	spec, err := obj.RequireSpec()
	if err != nil {
		return orchard.Status{}, err
	}
	h := res.State
	if h.URL == spec.Endpoint.URL && h.TimeoutSeconds == spec.Endpoint.TimeoutSeconds && reflect.DeepEqual(h.Events, spec.Events) {
		return orchard.Done(), nil
	}
	s, err := serviceFor(obj)
	if err != nil {
		return orchard.Status{}, err
	}
	if _, err := s.put(obj, spec); err != nil {
		return orchard.Status{}, err
	}
	return orchard.NeedsRefreshStatus("hook settings updated"), nil
}
