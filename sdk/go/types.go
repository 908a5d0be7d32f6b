package orchard

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// FailureKind says how the host treats a failure.
type FailureKind int

const (
	// KindTransient is retried with per-object exponential backoff (reason TransientError).
	KindTransient FailureKind = iota
	// KindInvalidConfiguration is terminal: the user must fix the spec (InvalidConfiguration).
	KindInvalidConfiguration
	// KindUnrecoverable is terminal: nothing in the spec can fix it (UnrecoverableError).
	KindUnrecoverable
)

func (k FailureKind) String() string {
	switch k {
	case KindInvalidConfiguration:
		return "invalid-configuration"
	case KindUnrecoverable:
		return "unrecoverable"
	default:
		return "transient"
	}
}

// Failure is why a call failed: the contract's `failure`, as a Go error. Return it (or wrap
// it: errors.As finds it) from any Actuator method. Any other error becomes a Transient failure
// naming it.
type Failure struct {
	Kind    FailureKind
	Message string
}

func (f *Failure) Error() string { return f.Kind.String() + ": " + f.Message }

// Transient is a failure worth retrying (the host retries with backoff).
func Transient(format string, args ...any) *Failure {
	return &Failure{KindTransient, fmt.Sprintf(format, args...)}
}

// InvalidConfiguration is a terminal failure the user fixes in the spec.
func InvalidConfiguration(format string, args ...any) *Failure {
	return &Failure{KindInvalidConfiguration, fmt.Sprintf(format, args...)}
}

// Unrecoverable is a terminal failure nothing in the spec can fix.
func Unrecoverable(format string, args ...any) *Failure {
	return &Failure{KindUnrecoverable, fmt.Sprintf(format, args...)}
}

// AsFailure is the failure an error stands for: the *Failure it wraps, or else a Transient
// failure carrying the error's text.
func AsFailure(err error) *Failure {
	if err == nil {
		return nil
	}
	var f *Failure
	if ok := asFailure(err, &f); ok {
		return f
	}
	var p *Pending
	if asPending(err, &p) {
		return Unrecoverable("plugin error: a waiting status where a failure was expected: %s", p.Status)
	}
	return Transient("plugin error: %v", err)
}

// WaitEvent is what a wait is for.
type WaitEvent int

const (
	Creation WaitEvent = iota
	Ready
	Deletion
	Update
)

// ProgressKind tells the cases of Progress apart.
type ProgressKind int

const (
	// WaitingOnExternal: the host polls again after PollAfter.
	WaitingOnExternal ProgressKind = iota
	// WaitingOnObject: a watch of Target brings the object back.
	WaitingOnObject
	// NeedsRefresh: the external resource changed; the host fetches it again at once.
	NeedsRefresh
)

// ObjectRef names a Kubernetes object in the namespace of the reconciled object.
type ObjectRef struct{ Kind, Name string }

// Progress is work that is not finished yet.
type Progress struct {
	Kind      ProgressKind
	Event     WaitEvent     // WaitingOnExternal, WaitingOnObject
	Message   string        // WaitingOnExternal, NeedsRefresh
	PollAfter time.Duration // WaitingOnExternal; bounded to [0, 2^32 ms)
	Target    ObjectRef     // WaitingOnObject
}

// Status is the outcome of a step: done when it has no progress and no failure.
type Status struct {
	Progress []Progress
	Failure  *Failure
}

// Done is a finished step.
func Done() Status { return Status{} }

// NeedsRefreshStatus reports a change: the host fetches the resource again.
func NeedsRefreshStatus(message string) Status {
	return Status{Progress: []Progress{{Kind: NeedsRefresh, Message: message}}}
}

// WaitExternal waits on the external system; the host polls again after `after`.
func WaitExternal(event WaitEvent, message string, after time.Duration) Status {
	return Status{Progress: []Progress{{Kind: WaitingOnExternal, Event: event, Message: message, PollAfter: after}}}
}

// WaitObject waits on another Kubernetes object (a watch brings this one back).
func WaitObject(kind, name string, event WaitEvent) Status {
	return Status{Progress: []Progress{{Kind: WaitingOnObject, Event: event, Target: ObjectRef{kind, name}}}}
}

// Failed is the status of a failed step (any error: see AsFailure).
func Failed(err error) Status { return Status{Failure: AsFailure(err)} }

// IsDone says whether the step is finished.
func (s Status) IsDone() bool { return len(s.Progress) == 0 && s.Failure == nil }

// And merges two statuses: all progress, and the first failure.
func (s Status) And(o Status) Status {
	out := Status{Progress: append(append([]Progress{}, s.Progress...), o.Progress...), Failure: s.Failure}
	if out.Failure == nil {
		out.Failure = o.Failure
	}
	return out
}

func (s Status) String() string {
	var parts []string
	for _, p := range s.Progress {
		switch p.Kind {
		case NeedsRefresh:
			parts = append(parts, "needs-refresh: "+p.Message)
		case WaitingOnObject:
			parts = append(parts, "waiting on "+p.Target.Kind+"/"+p.Target.Name)
		default:
			parts = append(parts, "waiting: "+p.Message)
		}
	}
	if s.Failure != nil {
		parts = append(parts, s.Failure.Error())
	}
	if len(parts) == 0 {
		return "done"
	}
	return strings.Join(parts, "; ")
}

// Pending is what Create returns (as its error) to create nothing yet and report progress,
// e.g. waiting on a dependency. The host calls Create again.
type Pending struct{ Status Status }

func (p *Pending) Error() string { return "pending: " + p.Status.String() }

// Wait makes a Status the error of Create: nothing was created, try again later.
func Wait(s Status) error { return &Pending{s} }

// Availability says whether the external resource is ready for use.
type Availability int

const (
	Available Availability = iota
	Unavailable
	Unknown
)

// Dependency is a referenced object the host resolved: it exists and is Available.
type Dependency struct {
	Name     string          // the declaration's name in Description.Dependencies
	Kind     string          // kind of the referenced object
	Object   string          // its name (same namespace)
	ID       *string         // its status.id, when it has one
	Observed json.RawMessage // its status.resource, when it has one
}

// DependencyDecl is a field of spec.resource that names another object the actuator needs.
type DependencyDecl struct {
	Name, Field, Kind                   string
	ForCreate, ForDelete, GuardDeletion bool
}

// Guarded is the usual dependency: resolved before create and delete, and the referenced
// object cannot be deleted while this one uses it.
func Guarded(name, field, kind string) DependencyDecl {
	return DependencyDecl{Name: name, Field: field, Kind: kind, ForCreate: true, ForDelete: true, GuardDeletion: true}
}

// Description is what the plugin manages, for the host to build and serve its CRD. The
// schemas are any JSON value (map[string]any, a struct, or json.RawMessage).
type Description struct {
	Name, Group, Version, Kind, Plural string
	ResourceSchema                     any
	FilterSchema                       any // nil: no import by filter
	ObservedSchema                     any
	Dependencies                       []DependencyDecl
	NeedsCredentials                   bool
}

// Object is the Kubernetes object being reconciled, with its spec decoded into S.
type Object[S any] struct {
	Name, Namespace, UID string
	Generation           int64
	Labels, Annotations  map[string]string
	Spec                 *S      // nil for imported (unmanaged) objects
	StatusID             *string // status.id, once known
	Dependencies         []Dependency
	Credentials          map[string][]byte
	ctx                  context.Context // Context
}

// RequireSpec is the spec, or an InvalidConfiguration failure when the object has none.
func (o *Object[S]) RequireSpec() (*S, error) {
	if o.Spec == nil {
		return nil, InvalidConfiguration("%s: this call needs spec.resource", o.Name)
	}
	return o.Spec, nil
}

// Dependency is the resolved dependency `name`.
func (o *Object[S]) Dependency(name string) (*Dependency, error) {
	for i := range o.Dependencies {
		if o.Dependencies[i].Name == name {
			return &o.Dependencies[i], nil
		}
	}
	return nil, Transient("dependency %q was not resolved by the host", name)
}

// DependencyID is the status.id of the resolved dependency `name`.
func (o *Object[S]) DependencyID(name string) (string, error) {
	d, err := o.Dependency(name)
	if err != nil {
		return "", err
	}
	if d.ID == nil || *d.ID == "" {
		return "", Transient("dependency %s %s/%s has no status.id yet", name, d.Kind, d.Object)
	}
	return *d.ID, nil
}

// Credential is a value of the credentials Secret, as text.
func (o *Object[S]) Credential(key string) (string, error) {
	v, ok := o.Credentials[key]
	if !ok {
		return "", InvalidConfiguration("%s: the credentials Secret has no key %q", o.Name, key)
	}
	return string(v), nil
}

// Resource is one external resource: its id (status.id) and what the plugin remembers of it.
type Resource[T any] struct {
	ID    string
	State T
}

// NewObject is a test object in one line: named name, in namespace "default", with spec (nil:
// none, as for an imported object) and nothing else; chain the With methods for the rest:
//
//	obj := orchard.NewObject("www", &Spec{Name: "a"}).WithCredential("apiKey", "k").WithStatusID("x")
func NewObject[S any](name string, spec *S) *Object[S] {
	return &Object[S]{Name: name, Namespace: "default", Spec: spec}
}

// NewRawObject is NewObject as the host sends it (what NewRaw's functions take): spec is
// marshalled to JSON text (a string or json.RawMessage is taken as JSON text already; nil:
// no spec). It panics when spec does not marshal: it is for tests.
func NewRawObject(name string, spec any) *RawObject {
	if spec == nil {
		return NewObject[json.RawMessage](name, nil)
	}
	var text json.RawMessage
	switch s := spec.(type) {
	case string:
		text = json.RawMessage(s)
	case json.RawMessage:
		text = s
	default:
		b, err := json.Marshal(spec)
		if err != nil {
			panic(fmt.Sprintf("NewRawObject %s: spec: %v", name, err))
		}
		text = b
	}
	return NewObject(name, &text)
}

// WithNamespace sets the namespace; the With methods change the object and return it.
func (o *Object[S]) WithNamespace(namespace string) *Object[S] { o.Namespace = namespace; return o }

// WithUID sets metadata.uid.
func (o *Object[S]) WithUID(uid string) *Object[S] { o.UID = uid; return o }

// WithGeneration sets metadata.generation.
func (o *Object[S]) WithGeneration(generation int64) *Object[S] { o.Generation = generation; return o }

// WithLabel adds a label.
func (o *Object[S]) WithLabel(key, value string) *Object[S] {
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	o.Labels[key] = value
	return o
}

// WithAnnotation adds an annotation.
func (o *Object[S]) WithAnnotation(key, value string) *Object[S] {
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Annotations[key] = value
	return o
}

// WithStatusID sets status.id.
func (o *Object[S]) WithStatusID(id string) *Object[S] { o.StatusID = &id; return o }

// WithDependency adds a resolved dependency (declaration name, kind, object name) with its
// status.id (empty: none yet).
func (o *Object[S]) WithDependency(name, kind, object, id string) *Object[S] {
	d := Dependency{Name: name, Kind: kind, Object: object}
	if id != "" {
		d.ID = &id
	}
	o.Dependencies = append(o.Dependencies, d)
	return o
}

// WithCredential adds a key of the credentials Secret.
func (o *Object[S]) WithCredential(key, value string) *Object[S] {
	if o.Credentials == nil {
		o.Credentials = map[string][]byte{}
	}
	o.Credentials[key] = []byte(value)
	return o
}

// NewRawResource is a resource as the host sends it: state marshalled to JSON text (a string
// is taken as JSON text already). It panics when state does not marshal: it is for tests.
func NewRawResource(id string, state any) *RawResource {
	if s, ok := state.(string); ok {
		return &RawResource{ID: id, State: s}
	}
	b, err := json.Marshal(state)
	if err != nil {
		panic(fmt.Sprintf("NewRawResource %s: state: %v", id, err))
	}
	return &RawResource{ID: id, State: string(b)}
}
