//go:build wasip1

package orchard

import (
	"encoding/json"
	"errors"
	"sort"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	exp "orchard.dev/sdk/internal/wit/exports/export_orchard_actuator_actuator"
	expc "orchard.dev/sdk/internal/wit/exports/export_orchard_actuator_conversion"
	exps "orchard.dev/sdk/internal/wit/exports/export_orchard_shortcuts_shortcuts"
	_ "orchard.dev/sdk/internal/wit/exports/wit_exports" // the //go:wasmexport functions
	wc "orchard.dev/sdk/internal/wit/imports/orchard_actuator_conversion"
	wt "orchard.dev/sdk/internal/wit/imports/orchard_actuator_types"
	ws "orchard.dev/sdk/internal/wit/imports/orchard_shortcuts_shortcuts"
)

// Export registers the actuator the component exports. Call it once, from an init function
// of package main:
//
//	func init() { orchard.Export[Spec, Filter, State](MyActuator{}) }
//
// The component exports the interface conversion too: the actuator's versions when it
// implements Versioned, else none (the kind has one version); and orchard:shortcuts: what it
// declares when it implements ShortcutDeclarer, else none (the generic flow).
func Export[S, F, T any](a Actuator[S, F, T]) {
	e := exporter{NewRaw[S, F, T](a)}
	exp.Impl, expc.Impl, exps.Impl = e, e, e
}

// Shortcuts is the declared Shortcuts as the interface's flags.
func (e exporter) Shortcuts() ws.Shortcut {
	declared := e.r.Shortcuts()
	var flags ws.Shortcut
	if declared.CreateRefusesDuplicates {
		flags |= ws.Shortcut_CreateRefusesDuplicates
	}
	if declared.DeleteIsSynchronous {
		flags |= ws.Shortcut_DeleteIsSynchronous
	}
	if declared.DeleteByID {
		flags |= ws.Shortcut_DeleteById
	}
	return flags
}

// exporter converts between the generated bindings and Raw.
type exporter struct{ r Raw }

func opt[T any](o witTypes.Option[T]) *T {
	if o.IsNone() {
		return nil
	}
	v := o.Some()
	return &v
}

func pairs(list []witTypes.Tuple2[string, string]) map[string]string {
	out := make(map[string]string, len(list))
	for _, p := range list {
		out[p.F0] = p.F1
	}
	return out
}

func rawObject(o wt.ManagedObject) *RawObject {
	obj := &RawObject{
		Name: o.Name, Namespace: o.Namespace, UID: o.Uid, Generation: o.Generation,
		Labels: pairs(o.Labels), Annotations: pairs(o.Annotations), StatusID: opt(o.StatusId),
		Credentials: make(map[string][]byte, len(o.Credentials)),
	}
	if spec := opt(o.Spec); spec != nil {
		raw := json.RawMessage(*spec)
		obj.Spec = &raw
	}
	for _, d := range o.Dependencies {
		dep := Dependency{Name: d.Name, Kind: d.Kind, Object: d.Object, ID: opt(d.Id)}
		if observed := opt(d.Observed); observed != nil {
			dep.Observed = json.RawMessage(*observed)
		}
		obj.Dependencies = append(obj.Dependencies, dep)
	}
	for _, c := range o.Credentials {
		obj.Credentials[c.F0] = c.F1
	}
	return obj
}

func rawResource(r wt.ExternalResource) *RawResource { return &RawResource{ID: r.Id, State: r.State} }

func external(r RawResource) wt.ExternalResource {
	return wt.ExternalResource{Id: r.ID, State: r.State}
}

func externals(list []RawResource) []wt.ExternalResource {
	out := make([]wt.ExternalResource, 0, len(list))
	for _, r := range list {
		out = append(out, external(r))
	}
	return out
}

func failure(f *Failure) wt.Failure {
	switch f.Kind {
	case KindInvalidConfiguration:
		return wt.MakeFailureInvalidConfiguration(f.Message)
	case KindUnrecoverable:
		return wt.MakeFailureUnrecoverable(f.Message)
	default:
		return wt.MakeFailureTransient(f.Message)
	}
}

// pollAfterMs bounds a duration to the contract's u32 milliseconds.
func pollAfterMs(p Progress) uint32 {
	ms := p.PollAfter.Milliseconds()
	if ms < 0 {
		return 0
	}
	if ms > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(ms)
}

func status(s Status) wt.Status {
	out := wt.Status{Progress: []wt.Progress{}, Failure: witTypes.None[wt.Failure]()}
	for _, p := range s.Progress {
		event := wt.WaitEvent(p.Event)
		switch p.Kind {
		case WaitingOnExternal:
			out.Progress = append(out.Progress, wt.MakeProgressWaitingOnExternal(wt.ExternalWait{Event: event, Message: p.Message, PollAfterMs: pollAfterMs(p)}))
		case WaitingOnObject:
			out.Progress = append(out.Progress, wt.MakeProgressWaitingOnObject(wt.ObjectWait{Target: wt.ObjectRef{Kind: p.Target.Kind, Name: p.Target.Name}, Event: event}))
		case NeedsRefresh:
			out.Progress = append(out.Progress, wt.MakeProgressNeedsRefresh(p.Message))
		}
	}
	if s.Failure != nil {
		out.Failure = witTypes.Some(failure(s.Failure))
	}
	return out
}

// builtDescriptionJSON is the description computed at build time (built_description.go), set
// by the file sdk/go/build.sh adds to this package; empty when built otherwise.
var builtDescriptionJSON string

// built is the description computed at build time, if there is one.
func built() *builtDescription {
	if builtDescriptionJSON == "" {
		return nil
	}
	var b builtDescription
	if err := json.Unmarshal([]byte(builtDescriptionJSON), &b); err != nil {
		panic("the description computed at build time: " + err.Error())
	}
	return &b
}

func (e exporter) describe() (RawDescription, error) {
	if b := built(); b != nil {
		if b.DescribeError != "" {
			return RawDescription{}, errors.New(b.DescribeError)
		}
		return b.Description, nil
	}
	return e.r.Describe()
}

func (e exporter) versions() ([]RawAPIVersion, error) {
	if b := built(); b != nil {
		if b.VersionsError != "" {
			return nil, errors.New(b.VersionsError)
		}
		return b.Versions, nil
	}
	return e.r.Versions()
}

func (e exporter) Describe() wt.Description {
	d, err := e.describe()
	if err != nil {
		// describe has no failure in the contract: a trap is what the host expects then.
		panic("describe: " + err.Error())
	}
	out := wt.Description{
		Name: d.Name, Group: d.Group, Version: d.Version, Kind: d.Kind, Plural: d.Plural,
		ResourceSchema: d.ResourceSchema, ObservedSchema: d.ObservedSchema,
		FilterSchema: witTypes.None[string](), Dependencies: []wt.DependencyDecl{},
		NeedsCredentials: d.NeedsCredentials,
	}
	if d.FilterSchema != nil {
		out.FilterSchema = witTypes.Some(*d.FilterSchema)
	}
	for _, x := range d.Dependencies {
		out.Dependencies = append(out.Dependencies, wt.DependencyDecl{
			Name: x.Name, Field: x.Field, Kind: x.Kind,
			ForCreate: x.ForCreate, ForDelete: x.ForDelete, GuardDeletion: x.GuardDeletion,
		})
	}
	return out
}

func (e exporter) GetById(o wt.ManagedObject, id string) witTypes.Result[witTypes.Option[wt.ExternalResource], wt.Failure] {
	res, f := e.r.GetByID(rawObject(o), id)
	if f != nil {
		return witTypes.Err[witTypes.Option[wt.ExternalResource]](failure(f))
	}
	if res == nil {
		return witTypes.Ok[witTypes.Option[wt.ExternalResource], wt.Failure](witTypes.None[wt.ExternalResource]())
	}
	return witTypes.Ok[witTypes.Option[wt.ExternalResource], wt.Failure](witTypes.Some(external(*res)))
}

func (e exporter) ListForAdoption(o wt.ManagedObject) witTypes.Result[witTypes.Option[[]wt.ExternalResource], wt.Failure] {
	found, applies, f := e.r.ListForAdoption(rawObject(o))
	if f != nil {
		return witTypes.Err[witTypes.Option[[]wt.ExternalResource]](failure(f))
	}
	if !applies {
		return witTypes.Ok[witTypes.Option[[]wt.ExternalResource], wt.Failure](witTypes.None[[]wt.ExternalResource]())
	}
	return witTypes.Ok[witTypes.Option[[]wt.ExternalResource], wt.Failure](witTypes.Some(externals(found)))
}

func (e exporter) ListForImport(o wt.ManagedObject, filter string) witTypes.Result[[]wt.ExternalResource, wt.Failure] {
	found, f := e.r.ListForImport(rawObject(o), filter)
	if f != nil {
		return witTypes.Err[[]wt.ExternalResource](failure(f))
	}
	return witTypes.Ok[[]wt.ExternalResource, wt.Failure](externals(found))
}

func (e exporter) Create(o wt.ManagedObject) witTypes.Result[wt.ExternalResource, wt.Status] {
	res, s := e.r.Create(rawObject(o))
	if res == nil {
		return witTypes.Err[wt.ExternalResource](status(s))
	}
	return witTypes.Ok[wt.ExternalResource, wt.Status](external(*res))
}

func (e exporter) Delete(o wt.ManagedObject, r wt.ExternalResource) wt.Status {
	return status(e.r.Delete(rawObject(o), rawResource(r)))
}

func (e exporter) Reconcilers(o wt.ManagedObject, r wt.ExternalResource) witTypes.Result[[]string, wt.Failure] {
	names, f := e.r.Reconcilers(rawObject(o), rawResource(r))
	if f != nil {
		return witTypes.Err[[]string](failure(f))
	}
	if names == nil {
		names = []string{}
	}
	return witTypes.Ok[[]string, wt.Failure](names)
}

func (e exporter) RunReconciler(name string, o wt.ManagedObject, r wt.ExternalResource) wt.Status {
	return status(e.r.RunReconciler(name, rawObject(o), rawResource(r)))
}

func (e exporter) Available(o wt.ManagedObject, r wt.ExternalResource) (wt.Availability, wt.Status) {
	a, s := e.r.Available(rawObject(o), rawResource(r))
	return wt.Availability(a), status(s)
}

func (e exporter) Observed(r wt.ExternalResource) string { return e.r.Observed(rawResource(r)) }

func (e exporter) Versions() []wc.ApiVersion {
	versions, err := e.versions()
	if err != nil {
		// versions has no failure in the contract: a trap is what the host expects then.
		panic("versions: " + err.Error())
	}
	out := make([]wc.ApiVersion, 0, len(versions))
	for _, v := range versions {
		one := wc.ApiVersion{
			Name: v.Name, ResourceSchema: v.ResourceSchema, ObservedSchema: v.ObservedSchema,
			FilterSchema: witTypes.None[string](), Storage: v.Storage,
		}
		if v.FilterSchema != nil {
			one.FilterSchema = witTypes.Some(*v.FilterSchema)
		}
		out = append(out, one)
	}
	return out
}

func document(o witTypes.Option[string]) json.RawMessage {
	if o.IsNone() {
		return nil
	}
	text := o.Some()
	return append(json.RawMessage{}, text...)
}

func maybe(doc json.RawMessage) witTypes.Option[string] {
	if doc == nil {
		return witTypes.None[string]()
	}
	return witTypes.Some(string(doc))
}

func (e exporter) Convert(c wc.Convertible, from, to string) witTypes.Result[wc.Convertible, wt.Failure] {
	out, f := e.r.Convert(Convertible{
		Resource: document(c.Resource), Filter: document(c.Filter), Observed: document(c.Observed),
		Annotations: pairs(c.Annotations),
	}, from, to)
	if f != nil {
		return witTypes.Err[wc.Convertible](failure(f))
	}
	keys := make([]string, 0, len(out.Annotations))
	for k := range out.Annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	annotations := make([]witTypes.Tuple2[string, string], 0, len(keys))
	for _, k := range keys {
		annotations = append(annotations, witTypes.Tuple2[string, string]{F0: k, F1: out.Annotations[k]})
	}
	return witTypes.Ok[wc.Convertible, wt.Failure](wc.Convertible{
		Resource: maybe(out.Resource), Filter: maybe(out.Filter), Observed: maybe(out.Observed),
		Annotations: annotations,
	})
}
