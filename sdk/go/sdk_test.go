package orchard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type spec struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (s *spec) SetDefaults() {
	if s.Count == 0 {
		s.Count = 1
	}
}

type state struct {
	Name string `json:"name"`
}

type filter struct {
	Name *string `json:"name"`
}

// fake is an actuator whose answers the tests set.
type fake struct {
	Base[spec, filter, state]
	err    error
	panics bool
}

func (f *fake) Describe() Description {
	return Description{Name: "fake", ResourceSchema: map[string]any{"type": "object"}, ObservedSchema: json.RawMessage(`{"type":"object"}`)}
}

func (f *fake) GetByID(obj *Object[spec], id string) (*Resource[state], error) {
	if f.panics {
		var m map[string]int
		m["boom"] = 1
	}
	if f.err != nil {
		return nil, f.err
	}
	if id == "missing" {
		return nil, nil
	}
	if obj.Spec.Count != 1 && obj.Spec.Count != 2 {
		return nil, Unrecoverable("count %d: defaults not applied", obj.Spec.Count)
	}
	return &Resource[state]{ID: id, State: state{Name: obj.Spec.Name}}, nil
}

func (f *fake) Create(obj *Object[spec]) (*Resource[state], error) {
	if f.err != nil {
		return nil, f.err
	}
	return &Resource[state]{ID: obj.Spec.Name, State: state{Name: obj.Spec.Name}}, nil
}

func (f *fake) Delete(*Object[spec], *Resource[state]) (Status, error) { return Done(), f.err }

func object(specJSON string) *RawObject {
	raw := json.RawMessage(specJSON)
	return &RawObject{Name: "obj", Spec: &raw}
}

func TestGetByIDDecodesTheSpecAndEncodesTheState(t *testing.T) {
	r := NewRaw[spec, filter, state](&fake{})
	res, f := r.GetByID(object(`{"name":"a","count":2}`), "id-1")
	if f != nil || res == nil || res.ID != "id-1" || res.State != `{"name":"a"}` {
		t.Fatalf("got %+v, %v", res, f)
	}
	if res, f := r.GetByID(object(`{"name":"a"}`), "missing"); res != nil || f != nil {
		t.Fatalf("missing: got %+v, %v", res, f)
	}
}

func TestASpecOfTheWrongShapeIsInvalidConfiguration(t *testing.T) {
	r := NewRaw[spec, filter, state](&fake{})
	_, f := r.GetByID(object(`{"name":"a","count":"two"}`), "x")
	if f == nil || f.Kind != KindInvalidConfiguration || !strings.Contains(f.Message, "spec.resource") {
		t.Fatalf("got %v", f)
	}
}

func TestErrorsBecomeFailuresOfTheirKind(t *testing.T) {
	cases := []struct {
		err  error
		kind FailureKind
		text string
	}{
		{InvalidConfiguration("bad %s", "name"), KindInvalidConfiguration, "bad name"},
		{fmt.Errorf("wrapped: %w", Unrecoverable("gone")), KindUnrecoverable, "gone"},
		{errors.New("plain"), KindTransient, "plugin error: plain"},
	}
	for _, c := range cases {
		r := NewRaw[spec, filter, state](&fake{err: c.err})
		_, f := r.GetByID(object(`{"name":"a"}`), "x")
		if f == nil || f.Kind != c.kind || f.Message != c.text {
			t.Errorf("%v: got %v", c.err, f)
		}
	}
}

func TestAPanicIsATransientFailure(t *testing.T) {
	r := NewRaw[spec, filter, state](&fake{panics: true})
	_, f := r.GetByID(object(`{"name":"a"}`), "x")
	if f == nil || f.Kind != KindTransient || !strings.Contains(f.Message, "panic in get-by-id") {
		t.Fatalf("got %v", f)
	}
}

func TestCreateMayWaitAndCreatesNothing(t *testing.T) {
	r := NewRaw[spec, filter, state](&fake{err: Wait(WaitObject("Vhost", "v", Ready))})
	res, s := r.Create(object(`{"name":"a"}`))
	if res != nil || len(s.Progress) != 1 || s.Progress[0].Target.Name != "v" || s.Failure != nil {
		t.Fatalf("got %+v, %v", res, s)
	}
	r = NewRaw[spec, filter, state](&fake{err: Wait(Done())})
	if _, s := r.Create(object(`{"name":"a"}`)); s.Failure == nil || s.Failure.Kind != KindUnrecoverable {
		t.Fatalf("a done wait: got %v", s)
	}
}

func TestTheDefaultsOfTheOptionalFunctions(t *testing.T) {
	r := NewRaw[spec, filter, state](&fake{})
	if found, applies, f := r.ListForAdoption(object(`{}`)); found != nil || applies || f != nil {
		t.Errorf("adoption: %v %v %v", found, applies, f)
	}
	if _, f := r.ListForImport(object(`{}`), `{}`); f == nil || f.Kind != KindInvalidConfiguration {
		t.Errorf("import: %v", f)
	}
	res := &RawResource{ID: "a", State: `{"name":"a"}`}
	if names, f := r.Reconcilers(object(`{}`), res); len(names) != 0 || f != nil {
		t.Errorf("reconcilers: %v %v", names, f)
	}
	if s := r.RunReconciler("x", object(`{}`), res); s.Failure == nil || s.Failure.Kind != KindUnrecoverable {
		t.Errorf("run-reconciler: %v", s)
	}
	if a, s := r.Available(object(`{}`), res); a != Available || !s.IsDone() {
		t.Errorf("available: %v %v", a, s)
	}
	if got := r.Observed(res); got != `{"name":"a"}` {
		t.Errorf("observed: %s", got)
	}
	if got := r.Observed(&RawResource{ID: "a", State: `not json`}); got != "null" {
		t.Errorf("observed of a bad state: %s", got)
	}
	d, err := r.Describe()
	if err != nil || d.ResourceSchema != `{"type":"object"}` || d.ObservedSchema != `{"type":"object"}` || d.FilterSchema != nil {
		t.Errorf("describe: %+v %v", d, err)
	}
}

type handler struct {
	required bool
	current  *int
	want     int
	calls    []string
}

func (h *handler) Name() string           { return "limit" }
func (h *handler) IsRequired() bool       { return h.required }
func (h *handler) Current() (*int, error) { return h.current, nil }
func (h *handler) Create() error          { h.calls = append(h.calls, "create"); return nil }
func (h *handler) Delete(*int) error      { h.calls = append(h.calls, "delete"); return nil }
func (h *handler) Update(c *int) (bool, error) {
	if *c == h.want {
		return false, nil
	}
	h.calls = append(h.calls, "update")
	return true, nil
}

func TestEnsureCreatesUpdatesDeletesOrLeavesAlone(t *testing.T) {
	one, two := 1, 2
	cases := []struct {
		h    handler
		want string
	}{
		{handler{required: true, want: 1}, "needs-refresh: limit created"},
		{handler{required: true, current: &one, want: 1}, "done"},
		{handler{required: true, current: &two, want: 1}, "needs-refresh: limit updated"},
		{handler{required: false, current: &one}, "needs-refresh: limit deleted"},
		{handler{required: false}, "done"},
	}
	for i, c := range cases {
		if got := Ensure[int](&c.h).String(); got != c.want {
			t.Errorf("case %d: %s, want %s", i, got, c.want)
		}
	}
}

func TestStatusAndKeepsAllProgressAndTheFirstFailure(t *testing.T) {
	s := NeedsRefreshStatus("a").And(Failed(Transient("first"))).And(Failed(Unrecoverable("second")))
	if len(s.Progress) != 1 || s.Failure.Message != "first" {
		t.Fatalf("got %v", s)
	}
}

func TestResponseCheckSortsStatusesByWhoCanFixThem(t *testing.T) {
	for status, kind := range map[int]FailureKind{400: KindInvalidConfiguration, 404: KindTransient, 409: KindTransient, 503: KindTransient} {
		err := (&Response{Status: status, Body: []byte("no")}).Check("put")
		var f *Failure
		if !errors.As(err, &f) || f.Kind != kind {
			t.Errorf("%d: %v", status, err)
		}
	}
	if err := (&Response{Status: 204}).Check("put"); err != nil {
		t.Error(err)
	}
	if got := PathSegment("a/b c~"); got != "a%2Fb%20c~" {
		t.Errorf("PathSegment: %s", got)
	}
	if _, err := Get("ftp://x").Send(); err == nil || AsFailure(err).Kind != KindInvalidConfiguration {
		t.Errorf("invalid URL: %v", err)
	}
}

// short is an actuator written the short way: every method returns the error of a helper as is.
type short struct{ Base[spec, filter, state] }

func (short) Describe() Description { return Description{Name: "short"} }
func (short) GetByID(obj *Object[spec], id string) (*Resource[state], error) {
	if _, err := obj.DependencyID("parent"); err != nil {
		return nil, err
	}
	return &Resource[state]{ID: id, State: state{Name: obj.Spec.Name}}, nil
}
func (short) Create(obj *Object[spec]) (*Resource[state], error) {
	key, err := obj.Credential("apiKey")
	if err != nil {
		return nil, err
	}
	return &Resource[state]{ID: key, State: state{Name: obj.Spec.Name}}, nil
}
func (short) Delete(obj *Object[spec], _ *Resource[state]) (Status, error) {
	_, err := obj.Credential("apiKey")
	return Done(), err
}

func TestNewObjectBuildsATestObjectInOneLine(t *testing.T) {
	o := NewObject("www", &spec{Name: "a"}).WithNamespace("ns").WithUID("u").WithGeneration(2).
		WithLabel("l", "1").WithAnnotation("a", "2").WithStatusID("x").
		WithDependency("parent", "Parent", "p", "p-1").WithCredential("apiKey", "k")
	if o.Name != "www" || o.Namespace != "ns" || o.UID != "u" || o.Generation != 2 || o.Labels["l"] != "1" ||
		o.Annotations["a"] != "2" || *o.StatusID != "x" || o.Spec.Name != "a" {
		t.Fatalf("got %+v", o)
	}
	if id, err := o.DependencyID("parent"); id != "p-1" || err != nil {
		t.Fatalf("dependency: %q, %v", id, err)
	}
	if k, err := o.Credential("apiKey"); k != "k" || err != nil {
		t.Fatalf("credential: %q, %v", k, err)
	}
	if o := NewObject[spec]("i", nil); o.Namespace != "default" || o.Spec != nil {
		t.Fatalf("imported: %+v", o)
	}
	for _, in := range []any{map[string]any{"name": "a"}, `{"name":"a"}`, json.RawMessage(`{"name":"a"}`)} {
		if r := NewRawObject("www", in); string(*r.Spec) != `{"name":"a"}` || r.Namespace != "default" {
			t.Fatalf("raw %v: %s", in, *r.Spec)
		}
	}
	if r := NewRawObject("www", nil); r.Spec != nil {
		t.Fatalf("no spec: %+v", r)
	}
	if res := NewRawResource("a", state{Name: "a"}); res.State != `{"name":"a"}` {
		t.Fatalf("resource: %+v", res)
	}
}

func TestAHelpersErrorReturnedAsIsIsTheRightStatus(t *testing.T) {
	r := NewRaw[spec, filter, state](short{})
	res := NewRawResource("a", state{Name: "a"})
	want := InvalidConfiguration(`obj: the credentials Secret has no key "apiKey"`)
	if _, s := r.Create(NewRawObject("obj", spec{Name: "a"})); s.Failure == nil || *s.Failure != *want || len(s.Progress) != 0 {
		t.Fatalf("create: %v", s)
	}
	if s := r.Delete(NewRawObject("obj", spec{Name: "a"}), res); s.Failure == nil || *s.Failure != *want {
		t.Fatalf("delete: %v", s)
	}
	if s := r.Delete(NewRawObject("obj", spec{Name: "a"}).WithCredential("apiKey", "k"), res); !s.IsDone() {
		t.Fatalf("delete with the key: %v", s)
	}
	if out, s := r.Create(NewRawObject("obj", spec{Name: "a"}).WithCredential("apiKey", "k")); out == nil || out.ID != "k" || !s.IsDone() {
		t.Fatalf("create with the key: %+v, %v", out, s)
	}
	if _, f := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "a"); f == nil || f.Kind != KindTransient {
		t.Fatalf("get-by-id without the dependency: %v", f)
	}
}
