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
	"orchard.dev/sdk/schema"
)

// Binding routes messages of another exchange of the vhost to this one.
type Binding struct {
	Exchange   string `json:"exchange" jsonschema:"required,minLength=1,maxLength=255"`
	RoutingKey string `json:"routingKey,omitempty" jsonschema:"maxLength=255"`
}

// Spec is spec.resource. Its tags are its CRD schema (schema.Of in Describe).
type Spec struct {
	VhostRef string `json:"vhostRef" jsonschema:"required,maxLength=253" orchard:"immutable"`
	Name     string `json:"name" jsonschema:"required,minLength=1,maxLength=255" orchard:"immutable"`
	// Plugin exchange types (x-...) are allowed: RabbitMQ refuses the ones it lacks.
	Type              string         `json:"type" jsonschema:"default=direct,maxLength=255,pattern=^(direct|fanout|topic|headers|x-[a-z0-9-]+)$" orchard:"immutable"`
	Durable           *bool          `json:"durable" jsonschema:"default=true" orchard:"immutable"`
	AutoDelete        bool           `json:"autoDelete" jsonschema:"default=false" orchard:"immutable"`
	Internal          bool           `json:"internal" jsonschema:"default=false" orchard:"immutable"`
	Arguments         map[string]any `json:"arguments" orchard:"immutable"`
	Bindings          []Binding      `json:"bindings" jsonschema:"maxItems=64"`
	AlternateExchange string         `json:"alternateExchange" jsonschema:"maxLength=255"`
}

// Filter is spec.import.filter.
type Filter struct {
	Vhost   string  `json:"vhost" jsonschema:"required,maxLength=255"`
	Name    *string `json:"name" jsonschema:"maxLength=255"`
	Type    *string `json:"type" jsonschema:"maxLength=255"`
	Durable *bool   `json:"durable"`
}

// Observed is status.resource: the state without the bindings' properties keys, and the
// policy's alternate exchange.
type Observed struct {
	Vhost             string            `json:"vhost"`
	Name              string            `json:"name"`
	Type              string            `json:"type"`
	Durable           bool              `json:"durable"`
	AutoDelete        bool              `json:"autoDelete"`
	Internal          bool              `json:"internal"`
	Arguments         map[string]any    `json:"arguments"`
	Bindings          []ObservedBinding `json:"bindings"`
	AlternateExchange string            `json:"alternateExchange,omitempty"`
}

// ObservedBinding is a binding in status.resource.
type ObservedBinding struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routingKey"`
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

func (Exchange) Describe() orchard.Description {
	return orchard.Description{
		Name: "rabbitmq-exchange", Group: "rabbitmq.orchard.dev", Version: "v1alpha1",
		Kind: "RabbitExchange", Plural: "rabbitexchanges",
		// From the types' tags; main_test.go checks them against the schemas written by hand
		// before, so that the CRD does not change by accident.
		ResourceSchema:   schema.Of[Spec](),
		FilterSchema:     schema.Of[Filter](),
		ObservedSchema:   schema.Of[Observed](),
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
	out := Observed{
		Vhost: s.Vhost, Name: s.Name, Type: s.Type, Durable: s.Durable, AutoDelete: s.AutoDelete,
		Internal: s.Internal, Arguments: s.Arguments, Bindings: []ObservedBinding{},
	}
	for _, b := range s.Bindings {
		out.Bindings = append(out.Bindings, ObservedBinding{b.Exchange, b.RoutingKey})
	}
	if ae, ok := s.Policy["alternate-exchange"].(string); ok {
		out.AlternateExchange = ae
	}
	return out, nil
}

func init() { orchard.Export[Spec, Filter, State](Exchange{}) }

func main() {}
