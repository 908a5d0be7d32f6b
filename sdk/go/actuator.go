package orchard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
)

// Actuator is everything specific to one kind of external resource, with its own types:
// S is spec.resource, F is spec.import.filter and T the state the plugin remembers of an
// external resource (passed back on every call). All three are decoded and encoded with
// encoding/json.
//
// The contract of each method is the one of wit/actuator.wit: every method MUST be
// idempotent; Create MUST NOT do anything fallible after the primary resource exists; GetByID
// returns (nil, nil) when the resource does not exist; Delete SHOULD succeed when it is
// already gone. The calls of one reconcile pass of one object may share an instance (in
// order, one at a time); nothing survives from one object or pass to another: keep no state
// between calls. obj.Context() is the call's context (its deadline: the host's,
// CallDeadlineEnv, less a margin).
//
// Embed Base[S, F, T] for the defaults of the optional methods (ListForAdoption,
// ListForImport, Reconcilers, RunReconciler, Available, Observed). A kind with several API
// versions implements Versioned too (versions.go).
//
// Errors: return a *Failure (Transient, InvalidConfiguration, Unrecoverable), possibly
// wrapped; any other error becomes a Transient failure naming it, and a panic becomes a
// Transient failure whose stack goes to the host's log.
type Actuator[S, F, T any] interface {
	// Describe is the managed kind and its schemas. MUST be pure.
	Describe() Description
	// GetByID is the resource with this id; (nil, nil) when it does not exist.
	GetByID(obj *Object[S], id string) (*Resource[T], error)
	// ListForAdoption lists resources this object would have created; applies=false where
	// adoption does not apply (e.g. no spec).
	ListForAdoption(obj *Object[S]) (found []Resource[T], applies bool, err error)
	// ListForImport lists resources matching the import filter, matched exactly.
	ListForImport(obj *Object[S], filter F) ([]Resource[T], error)
	// Create creates the primary resource. Return Wait(status) as the error to create
	// nothing yet and report progress.
	Create(obj *Object[S]) (*Resource[T], error)
	// Delete deletes the resource; Done when it is already gone.
	Delete(obj *Object[S], res *Resource[T]) (Status, error)
	// Reconcilers names the post-create steps, in order.
	Reconcilers(obj *Object[S], res *Resource[T]) ([]string, error)
	// RunReconciler runs the step `name`; NeedsRefreshStatus after a change.
	RunReconciler(name string, obj *Object[S], res *Resource[T]) (Status, error)
	// Available says whether the resource is ready for use.
	Available(obj *Object[S], res *Resource[T]) (Availability, Status, error)
	// Observed is status.resource (any JSON value); MUST match the observed schema.
	Observed(res *Resource[T]) (any, error)
}

// Base gives the defaults of the optional methods; embed it in your actuator.
type Base[S, F, T any] struct{}

// ListForAdoption: adoption does not apply.
func (Base[S, F, T]) ListForAdoption(*Object[S]) ([]Resource[T], bool, error) {
	return nil, false, nil
}

// ListForImport: import by filter is not supported.
func (Base[S, F, T]) ListForImport(*Object[S], F) ([]Resource[T], error) {
	return nil, InvalidConfiguration("this plugin does not support import by filter")
}

// Reconcilers: none.
func (Base[S, F, T]) Reconcilers(*Object[S], *Resource[T]) ([]string, error) { return nil, nil }

// RunReconciler: there is no reconciler of that name.
func (Base[S, F, T]) RunReconciler(name string, _ *Object[S], _ *Resource[T]) (Status, error) {
	return Status{}, Unrecoverable("no reconciler named %q", name)
}

// Available: always.
func (Base[S, F, T]) Available(*Object[S], *Resource[T]) (Availability, Status, error) {
	return Available, Done(), nil
}

// Observed: the state itself.
func (Base[S, F, T]) Observed(res *Resource[T]) (any, error) { return res.State, nil }

// Defaulter is a spec type with defaults of its own: the SDK calls SetDefaults (on a pointer
// receiver) after decoding spec.resource. The CRD's schema defaults already apply on the
// cluster; this gives the same values where no API server filled them in (orchard invoke,
// tests).
type Defaulter interface{ SetDefaults() }

// RawObject is the object as it crosses the Wasm boundary: spec as JSON text.
type RawObject = Object[json.RawMessage]

// RawResource is a resource as it crosses the Wasm boundary: state as JSON text.
type RawResource = Resource[string]

// Raw is the actuator contract over JSON text, exactly as it crosses the Wasm boundary. Every
// error and panic of the plugin becomes the contract's failure value here. The export layer
// calls it from the generated bindings; unit tests may call it directly (NewRaw).
type Raw interface {
	Describe() (RawDescription, error)
	GetByID(obj *RawObject, id string) (*RawResource, *Failure)
	ListForAdoption(obj *RawObject) ([]RawResource, bool, *Failure)
	ListForImport(obj *RawObject, filter string) ([]RawResource, *Failure)
	Create(obj *RawObject) (*RawResource, Status)
	Delete(obj *RawObject, res *RawResource) Status
	Reconcilers(obj *RawObject, res *RawResource) ([]string, *Failure)
	RunReconciler(name string, obj *RawObject, res *RawResource) Status
	Available(obj *RawObject, res *RawResource) (Availability, Status)
	Observed(res *RawResource) string
	// Versions is the kind's API versions when the actuator implements Versioned; none (one
	// version) otherwise.
	Versions() ([]RawAPIVersion, error)
	// Convert is Versioned.Convert with the documents checked: one that is not JSON is an
	// InvalidConfiguration failure naming it; an actuator without Versioned refuses
	// (Unrecoverable: it serves one version).
	Convert(obj Convertible, from, to string) (Convertible, *Failure)
	// Shortcuts is what the actuator declares when it implements ShortcutDeclarer; none
	// otherwise.
	Shortcuts() Shortcuts
}

// RawDescription is a Description with its schemas as JSON text.
type RawDescription struct {
	Description
	ResourceSchema, ObservedSchema string
	FilterSchema                   *string
}

type raw[S, F, T any] struct{ a Actuator[S, F, T] }

// NewRaw is the JSON-text face of an actuator.
func NewRaw[S, F, T any](a Actuator[S, F, T]) Raw { return raw[S, F, T]{a} }

func jsonText(v any) (string, error) {
	if r, ok := v.(json.RawMessage); ok {
		return string(r), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// guard turns a panic into a Transient failure, its stack into an error log.
func guard(function string, fail func(*Failure)) {
	if r := recover(); r != nil {
		Errorf("%s: panic: %v\n%s", function, r, debug.Stack())
		fail(Transient("plugin error: panic in %s: %v", function, r))
	}
}

func report(function string, err error) *Failure {
	f := AsFailure(err)
	if f != nil && f.Kind == KindTransient && !isFailure(err) {
		Errorf("%s: %v", function, err)
	}
	return f
}

func isFailure(err error) bool {
	var f *Failure
	return asFailure(err, &f)
}

// object decodes the object and starts the call's context; the caller defers done (also
// when err is not nil).
func (r raw[S, F, T]) object(o *RawObject) (obj *Object[S], done context.CancelFunc, err error) {
	ctx, done := callContext(o.ctx)
	typed := &Object[S]{
		Name: o.Name, Namespace: o.Namespace, UID: o.UID, Generation: o.Generation,
		Labels: o.Labels, Annotations: o.Annotations, StatusID: o.StatusID,
		Dependencies: o.Dependencies, Credentials: o.Credentials, ctx: ctx,
	}
	if o.Spec != nil {
		spec := new(S)
		if err := json.Unmarshal(*o.Spec, spec); err != nil {
			return nil, done, InvalidConfiguration("%s: spec.resource: %v", o.Name, err)
		}
		if d, ok := any(spec).(Defaulter); ok {
			d.SetDefaults()
		}
		typed.Spec = spec
	}
	gcCheckpoint()
	return typed, done, nil
}

func (r raw[S, F, T]) resource(res *RawResource) (*Resource[T], error) {
	state := new(T)
	if err := json.Unmarshal([]byte(res.State), state); err != nil {
		return nil, Transient("state of external resource %s: %v", res.ID, err)
	}
	return &Resource[T]{ID: res.ID, State: *state}, nil
}

func raws[T any](found []Resource[T]) ([]RawResource, error) {
	out := make([]RawResource, 0, len(found))
	for i := range found {
		one, err := rawOf(&found[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *one)
	}
	return out, nil
}

func rawOf[T any](res *Resource[T]) (*RawResource, error) {
	if res.ID == "" {
		return nil, Unrecoverable("plugin error: a resource needs a non-empty id")
	}
	text, err := jsonText(res.State)
	if err != nil {
		return nil, Unrecoverable("plugin error: state of %s: %v", res.ID, err)
	}
	return &RawResource{ID: res.ID, State: text}, nil
}

func (r raw[S, F, T]) Describe() (d RawDescription, err error) {
	defer guard("describe", func(f *Failure) { err = f })
	desc := r.a.Describe()
	d.Description = desc
	if d.ResourceSchema, err = jsonText(desc.ResourceSchema); err != nil {
		return d, err
	}
	if d.ObservedSchema, err = jsonText(desc.ObservedSchema); err != nil {
		return d, err
	}
	if desc.FilterSchema != nil {
		text, err := jsonText(desc.FilterSchema)
		if err != nil {
			return d, err
		}
		d.FilterSchema = &text
	}
	return d, nil
}

func (r raw[S, F, T]) GetByID(o *RawObject, id string) (out *RawResource, fail *Failure) {
	defer guard("get-by-id", func(f *Failure) { out, fail = nil, f })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return nil, report("get-by-id", err)
	}
	res, err := r.a.GetByID(obj, id)
	if err != nil {
		return nil, report("get-by-id", err)
	}
	if res == nil {
		return nil, nil
	}
	out, err = rawOf(res)
	return out, report("get-by-id", err)
}

func (r raw[S, F, T]) ListForAdoption(o *RawObject) (out []RawResource, applies bool, fail *Failure) {
	defer guard("list-for-adoption", func(f *Failure) { out, applies, fail = nil, false, f })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return nil, false, report("list-for-adoption", err)
	}
	found, applies, err := r.a.ListForAdoption(obj)
	if err != nil || !applies {
		return nil, false, report("list-for-adoption", err)
	}
	out, err = raws(found)
	return out, err == nil, report("list-for-adoption", err)
}

func (r raw[S, F, T]) ListForImport(o *RawObject, filter string) (out []RawResource, fail *Failure) {
	defer guard("list-for-import", func(f *Failure) { out, fail = nil, f })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return nil, report("list-for-import", err)
	}
	f := new(F)
	if err := json.Unmarshal([]byte(filter), f); err != nil {
		return nil, InvalidConfiguration("%s: spec.import.filter: %v", o.Name, err)
	}
	found, err := r.a.ListForImport(obj, *f)
	if err != nil {
		return nil, report("list-for-import", err)
	}
	out, err = raws(found)
	return out, report("list-for-import", err)
}

func (r raw[S, F, T]) Create(o *RawObject) (out *RawResource, s Status) {
	defer guard("create", func(f *Failure) { out, s = nil, Status{Failure: f} })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return nil, Status{Failure: report("create", err)}
	}
	res, err := r.a.Create(obj)
	var p *Pending
	if err != nil && asPending(err, &p) {
		if p.Status.IsDone() {
			return nil, Status{Failure: Unrecoverable("plugin error: create returned a done status without a resource")}
		}
		return nil, p.Status
	}
	if err == nil && res == nil {
		err = Unrecoverable("plugin error: create returned no resource and no error")
	}
	if err != nil {
		return nil, Status{Failure: report("create", err)}
	}
	out, err = rawOf(res)
	if err != nil {
		return nil, Status{Failure: report("create", err)}
	}
	return out, Done()
}

func (r raw[S, F, T]) step(function string, o *RawObject, rr *RawResource, run func(*Object[S], *Resource[T]) (Status, error)) (s Status) {
	defer guard(function, func(f *Failure) { s = Status{Failure: f} })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return Status{Failure: report(function, err)}
	}
	res, err := r.resource(rr)
	if err != nil {
		return Status{Failure: report(function, err)}
	}
	s, err = run(obj, res)
	if err != nil {
		return Status{Failure: report(function, err)}
	}
	return s
}

// Delete is Delete, or IDDeleter.DeleteByID when the actuator declares DeleteByID and the
// host sent no state (JSON null): it deletes by id without reading the resource.
func (r raw[S, F, T]) Delete(o *RawObject, res *RawResource) Status {
	if res != nil && strings.TrimSpace(res.State) == "null" && shortcutsOf(r.a).DeleteByID {
		return r.deleteByID(o, res.ID)
	}
	return r.step("delete", o, res, r.a.Delete)
}

func (r raw[S, F, T]) deleteByID(o *RawObject, id string) (s Status) {
	defer guard("delete", func(f *Failure) { s = Status{Failure: f} })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return Status{Failure: report("delete", err)}
	}
	d, ok := any(r.a).(IDDeleter[S])
	if !ok {
		return Status{Failure: Unrecoverable("this plugin declares the delete-by-id shortcut but does not implement DeleteByID (asked to delete %s)", id)}
	}
	s, err = d.DeleteByID(obj, id)
	if err != nil {
		return Status{Failure: report("delete", err)}
	}
	return s
}

func (r raw[S, F, T]) RunReconciler(name string, o *RawObject, res *RawResource) Status {
	return r.step("run-reconciler "+name, o, res, func(obj *Object[S], res *Resource[T]) (Status, error) {
		return r.a.RunReconciler(name, obj, res)
	})
}

func (r raw[S, F, T]) Reconcilers(o *RawObject, rr *RawResource) (names []string, fail *Failure) {
	defer guard("reconcilers", func(f *Failure) { names, fail = nil, f })
	obj, done, err := r.object(o)
	defer done()
	if err != nil {
		return nil, report("reconcilers", err)
	}
	res, err := r.resource(rr)
	if err != nil {
		return nil, report("reconcilers", err)
	}
	names, err = r.a.Reconcilers(obj, res)
	return names, report("reconcilers", err)
}

func (r raw[S, F, T]) Available(o *RawObject, rr *RawResource) (a Availability, s Status) {
	a = Unknown
	s = r.step("available", o, rr, func(obj *Object[S], res *Resource[T]) (Status, error) {
		var st Status
		var err error
		a, st, err = r.a.Available(obj, res)
		return st, err
	})
	if s.Failure != nil {
		a = Unknown
	}
	return a, s
}

// Observed is JSON text; a state that cannot be read, or an error, gives `null` (an empty
// status.resource) and an error log.
func (r raw[S, F, T]) Observed(rr *RawResource) (out string) {
	defer guard("observed", func(*Failure) { out = "null" })
	res, err := r.resource(rr)
	if err != nil {
		Errorf("observed: %v", err)
		return "null"
	}
	v, err := r.a.Observed(res)
	if err == nil {
		out, err = jsonText(v)
	}
	if err != nil {
		Errorf("observed: %v", err)
		return "null"
	}
	return out
}

func (r raw[S, F, T]) Versions() ([]RawAPIVersion, error) { return rawVersions(r.a) }

func (r raw[S, F, T]) Shortcuts() Shortcuts { return shortcutsOf(r.a) }

func (r raw[S, F, T]) Convert(obj Convertible, from, to string) (Convertible, *Failure) {
	return rawConvert(r.a, obj, from, to)
}

var _ = fmt.Sprintf
