// RabbitMQ exchanges as Kubernetes objects (RabbitExchange.rabbitmq.orchard.dev), written
// with the Orchard Go SDK; its HTTP goes through net/http's standard client over
// orchard.Transport() (client.go).
//
// An exchange lives in a virtual host: spec.resource.vhostRef names a RabbitVhost object, a
// guarded dependency (the vhost cannot be deleted while exchanges use it).
//
//   - identity: <vhost>/<name>, both percent-encoded (%2F/events for vhost "/");
//   - adoption: the exchange with the same vhost and name;
//   - import filter: vhost (required), name, type, durable, matched exactly;
//   - immutable (RabbitMQ cannot change them): name, type, durable, autoDelete, internal,
//     arguments; mutable through reconcilers: bindings (from other exchanges of the vhost to
//     this one) and alternateExchange (policy: a policy orchard.exchange.<name> matching only
//     this exchange, an optional sub-resource).
package main

import (
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"

	orchard "orchard.dev/sdk"
)

// Binding routes messages of another exchange of the vhost to this one.
type Binding struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routingKey,omitempty"`
}

// Spec is spec.resource.
type Spec struct {
	VhostRef          string         `json:"vhostRef"`
	Name              string         `json:"name"`
	Type              string         `json:"type"`
	Durable           *bool          `json:"durable"`
	AutoDelete        bool           `json:"autoDelete"`
	Internal          bool           `json:"internal"`
	Arguments         map[string]any `json:"arguments"`
	Bindings          []Binding      `json:"bindings"`
	AlternateExchange string         `json:"alternateExchange"`
}

// Filter is spec.import.filter.
type Filter struct {
	Vhost   string  `json:"vhost"`
	Name    *string `json:"name"`
	Type    *string `json:"type"`
	Durable *bool   `json:"durable"`
}

// BoundFrom is a binding as RabbitMQ has it.
type BoundFrom struct {
	Exchange      string `json:"exchange"`
	RoutingKey    string `json:"routingKey"`
	PropertiesKey string `json:"propertiesKey"`
}

// State is what the actuator remembers of an exchange.
type State struct {
	Vhost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"autoDelete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
	Bindings   []BoundFrom    `json:"bindings"`
	// Policy is the definition of the policy orchard.exchange.<name>; nil when there is none.
	Policy map[string]any `json:"policy,omitempty"`
}

const (
	reconcileBindings = "bindings"
	reconcilePolicy   = "policy"
)

func exchangeID(vhost, name string) string { return q(vhost) + "/" + q(name) }

func parseID(id string) (vhost, name string, err error) {
	parts := strings.Split(id, "/")
	if len(parts) == 2 && parts[0] != "" && parts[1] != "" {
		vhost, err1 := url.PathUnescape(parts[0])
		name, err2 := url.PathUnescape(parts[1])
		if err1 == nil && err2 == nil {
			return vhost, name, nil
		}
	}
	return "", "", orchard.InvalidConfiguration("exchange id %q is not <vhost>/<name> (percent-encoded)", id)
}

func policyName(exchange string) string { return "orchard.exchange." + exchange }

func fetch(c *client, vhost, name string, e *exchange) (*orchard.Resource[State], error) {
	if e == nil {
		var err error
		if e, err = c.exchange(vhost, name); err != nil || e == nil {
			return nil, err
		}
	}
	found, err := c.bindingsTo(vhost, name)
	if err != nil {
		return nil, err
	}
	bindings := []BoundFrom{}
	for _, b := range found {
		if b.Source != "" {
			bindings = append(bindings, BoundFrom{b.Source, b.RoutingKey, b.PropertiesKey})
		}
	}
	sort.Slice(bindings, func(i, j int) bool {
		if bindings[i].Exchange != bindings[j].Exchange {
			return bindings[i].Exchange < bindings[j].Exchange
		}
		return bindings[i].RoutingKey < bindings[j].RoutingKey
	})
	p, err := c.policy(vhost, policyName(name))
	if err != nil {
		return nil, err
	}
	state := State{
		Vhost: vhost, Name: name, Type: e.Type, Durable: e.Durable, AutoDelete: e.AutoDelete,
		Internal: e.Internal, Arguments: e.Arguments, Bindings: bindings,
	}
	if state.Arguments == nil {
		state.Arguments = map[string]any{}
	}
	if p != nil {
		state.Policy = p.Definition
		if state.Policy == nil {
			state.Policy = map[string]any{}
		}
	}
	return &orchard.Resource[State]{ID: exchangeID(vhost, name), State: state}, nil
}

// Exchange is the actuator.
type Exchange struct {
	orchard.Base[Spec, Filter, State]
}

func immutable(what string) []any {
	return []any{map[string]any{"rule": "self == oldSelf", "message": what + " is immutable"}}
}

func (Exchange) Describe() orchard.Description {
	str := func(max int) map[string]any { return map[string]any{"type": "string", "maxLength": max} }
	return orchard.Description{
		Name: "rabbitmq-exchange", Group: "rabbitmq.orchard.dev", Version: "v1alpha1",
		Kind: "RabbitExchange", Plural: "rabbitexchanges",
		ResourceSchema: map[string]any{
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
		},
		FilterSchema: map[string]any{
			"type": "object", "required": []string{"vhost"},
			"properties": map[string]any{
				"vhost": str(255), "name": str(255), "type": str(255),
				"durable": map[string]any{"type": "boolean"},
			},
		},
		ObservedSchema: map[string]any{
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
		},
		Dependencies:     []orchard.DependencyDecl{orchard.Guarded("vhost", "vhostRef", "RabbitVhost")},
		NeedsCredentials: true,
	}
}

func (Exchange) GetByID(obj *orchard.Object[Spec], id string) (*orchard.Resource[State], error) {
	vhost, name, err := parseID(id)
	if err != nil {
		return nil, err
	}
	c, err := clientFor(obj)
	if err != nil {
		return nil, err
	}
	return fetch(c, vhost, name, nil)
}

func (Exchange) ListForAdoption(obj *orchard.Object[Spec]) ([]orchard.Resource[State], bool, error) {
	if obj.Spec == nil {
		return nil, false, nil
	}
	vhost, err := obj.DependencyID("vhost")
	if err != nil {
		return nil, false, err
	}
	c, err := clientFor(obj)
	if err != nil {
		return nil, false, err
	}
	found, err := fetch(c, vhost, obj.Spec.Name, nil)
	if err != nil || found == nil {
		return nil, true, err
	}
	return []orchard.Resource[State]{*found}, true, nil
}

func (Exchange) ListForImport(obj *orchard.Object[Spec], f Filter) ([]orchard.Resource[State], error) {
	c, err := clientFor(obj)
	if err != nil {
		return nil, err
	}
	all, err := c.exchanges(f.Vhost)
	if err != nil {
		return nil, err
	}
	out := []orchard.Resource[State]{}
	for i := range all {
		e := &all[i]
		if e.Name == "" || (f.Name != nil && e.Name != *f.Name) || (f.Type != nil && e.Type != *f.Type) ||
			(f.Durable != nil && e.Durable != *f.Durable) {
			continue
		}
		r, err := fetch(c, f.Vhost, e.Name, e)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (Exchange) Create(obj *orchard.Object[Spec]) (*orchard.Resource[State], error) {
	spec, err := obj.RequireSpec()
	if err != nil {
		return nil, err
	}
	vhost, err := obj.DependencyID("vhost")
	if err != nil {
		return nil, err
	}
	c, err := clientFor(obj)
	if err != nil {
		return nil, err
	}
	durable := spec.Durable == nil || *spec.Durable
	kind := spec.Type
	if kind == "" {
		kind = "direct"
	}
	arguments := spec.Arguments
	if arguments == nil {
		arguments = map[string]any{}
	}
	// One declaration creates the exchange with every immutable property: nothing fallible
	// follows it (bindings and the policy have their reconcilers).
	if err := c.putExchange(vhost, spec.Name, map[string]any{
		"type": kind, "durable": durable, "auto_delete": spec.AutoDelete,
		"internal": spec.Internal, "arguments": arguments,
	}); err != nil {
		return nil, err
	}
	return &orchard.Resource[State]{ID: exchangeID(vhost, spec.Name), State: State{
		Vhost: vhost, Name: spec.Name, Type: kind, Durable: durable, AutoDelete: spec.AutoDelete,
		Internal: spec.Internal, Arguments: arguments, Bindings: []BoundFrom{},
	}}, nil
}

func (Exchange) Delete(obj *orchard.Object[Spec], res *orchard.Resource[State]) (orchard.Status, error) {
	c, err := clientFor(obj)
	if err != nil {
		return orchard.Status{}, err
	}
	s := res.State
	exists, err := c.vhostExists(s.Vhost)
	if err != nil || !exists {
		return orchard.Done(), err // the vhost, and so the exchange, is gone
	}
	if err := c.deletePolicy(s.Vhost, policyName(s.Name)); err != nil {
		return orchard.Status{}, err
	}
	return orchard.Done(), c.deleteExchange(s.Vhost, s.Name)
}

func (Exchange) Reconcilers(*orchard.Object[Spec], *orchard.Resource[State]) ([]string, error) {
	return []string{reconcileBindings, reconcilePolicy}, nil
}

func (Exchange) RunReconciler(name string, obj *orchard.Object[Spec], res *orchard.Resource[State]) (orchard.Status, error) {
	spec, err := obj.RequireSpec()
	if err != nil {
		return orchard.Status{}, err
	}
	c, err := clientFor(obj)
	if err != nil {
		return orchard.Status{}, err
	}
	s := &res.State
	switch name {
	case reconcileBindings:
		type key struct{ exchange, routingKey string }
		want := map[key]bool{}
		for _, b := range spec.Bindings {
			want[key{b.Exchange, b.RoutingKey}] = true
		}
		have := map[key]BoundFrom{}
		for _, b := range s.Bindings {
			have[key{b.Exchange, b.RoutingKey}] = b
		}
		changed := false
		for _, b := range spec.Bindings {
			k := key{b.Exchange, b.RoutingKey}
			if _, ok := have[k]; !ok {
				if err := c.bind(s.Vhost, b.Exchange, s.Name, b.RoutingKey); err != nil {
					return orchard.Status{}, err
				}
				have[k], changed = BoundFrom{}, true
			}
		}
		for _, b := range s.Bindings {
			if !want[key{b.Exchange, b.RoutingKey}] {
				if err := c.unbind(s.Vhost, b.Exchange, s.Name, b.PropertiesKey); err != nil {
					return orchard.Status{}, err
				}
				changed = true
			}
		}
		if changed {
			return orchard.NeedsRefreshStatus("bindings updated"), nil
		}
		return orchard.Done(), nil
	case reconcilePolicy:
		desired := map[string]any{}
		if spec.AlternateExchange != "" {
			desired["alternate-exchange"] = spec.AlternateExchange
		}
		return orchard.Ensure[map[string]any](&policyHandler{c, s, desired}), nil
	}
	return orchard.Base[Spec, Filter, State]{}.RunReconciler(name, obj, res)
}

// policyHandler is the exchange's own policy, for what an exchange cannot change after
// declaration (its alternate exchange).
type policyHandler struct {
	c       *client
	state   *State
	desired map[string]any
}

func (p *policyHandler) Name() string     { return "policy" }
func (p *policyHandler) IsRequired() bool { return len(p.desired) > 0 }
func (p *policyHandler) Current() (*map[string]any, error) {
	if p.state.Policy == nil {
		return nil, nil
	}
	return &p.state.Policy, nil
}
func (p *policyHandler) Create() error {
	return p.c.putPolicy(p.state.Vhost, policyName(p.state.Name), map[string]any{
		"pattern": "^" + regexp.QuoteMeta(p.state.Name) + "$", "apply-to": "exchanges",
		"priority": 100, "definition": p.desired,
	})
}
func (p *policyHandler) Update(current *map[string]any) (bool, error) {
	if sameDefinition(*current, p.desired) {
		return false, nil
	}
	return true, p.Create()
}
func (p *policyHandler) Delete(*map[string]any) error {
	return p.c.deletePolicy(p.state.Vhost, policyName(p.state.Name))
}

func sameDefinition(a, b map[string]any) bool {
	return reflect.DeepEqual(a, b)
}

func (Exchange) Observed(res *orchard.Resource[State]) (any, error) {
	s := res.State
	bindings := []map[string]string{}
	for _, b := range s.Bindings {
		bindings = append(bindings, map[string]string{"exchange": b.Exchange, "routingKey": b.RoutingKey})
	}
	out := map[string]any{
		"vhost": s.Vhost, "name": s.Name, "type": s.Type, "durable": s.Durable,
		"autoDelete": s.AutoDelete, "internal": s.Internal, "arguments": s.Arguments, "bindings": bindings,
	}
	if ae, ok := s.Policy["alternate-exchange"].(string); ok {
		out["alternateExchange"] = ae
	}
	return out, nil
}

func init() { orchard.Export[Spec, Filter, State](Exchange{}) }

func main() {}
