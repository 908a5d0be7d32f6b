package orchard

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// hosts is a two-version actuator: v1 has `host: "name:port"`, v2 (the description's version
// and the storage one) `host: {name, port}` and an optional `weight` that v1 keeps in an
// annotation.
type hosts struct {
	fake
	err    error
	panics bool
	// bad, when set, is what Convert answers as spec.resource.
	bad string
}

const weightKey = "example.com/v2-weight"

func (h *hosts) Describe() Description {
	return Description{Name: "hosts", Group: "example.com", Version: "v2", Kind: "Host", Plural: "hosts",
		ResourceSchema: map[string]any{"type": "object", "properties": map[string]any{"host": map[string]any{"type": "object"}}},
		ObservedSchema: json.RawMessage(`{"type":"object"}`)}
}

func (h *hosts) Versions() []APIVersion {
	return []APIVersion{
		{Name: "v1", ResourceSchema: map[string]any{"type": "object"}, ObservedSchema: json.RawMessage(`{"type":"object"}`),
			FilterSchema: map[string]any{"type": "object"}},
		h.Describe().APIVersion(true),
	}
}

func (h *hosts) Convert(obj Convertible, from, to string) (Convertible, error) {
	if h.panics {
		var m map[string]int
		m["boom"] = 1
	}
	if h.err != nil {
		return obj, h.err
	}
	if h.bad != "" {
		obj.Resource = json.RawMessage(h.bad)
		return obj, nil
	}
	var err error
	switch {
	case from == to:
	case from == "v1" && to == "v2":
		weight, kept := obj.Annotations[weightKey]
		delete(obj.Annotations, weightKey)
		obj.Resource, err = EditObject(obj.Resource, "spec.resource", func(f map[string]json.RawMessage) error {
			var host string
			if err := json.Unmarshal(f["host"], &host); err != nil {
				return InvalidConfiguration("spec.resource.host is not a string: %v", err)
			}
			name, port, _ := strings.Cut(host, ":")
			f["host"], _ = json.Marshal(map[string]string{"name": name, "port": port})
			if kept {
				f["weight"] = json.RawMessage(weight)
			}
			return nil
		})
	case from == "v2" && to == "v1":
		obj.Resource, err = EditObject(obj.Resource, "spec.resource", func(f map[string]json.RawMessage) error {
			var host struct{ Name, Port string }
			if err := json.Unmarshal(f["host"], &host); err != nil {
				return InvalidConfiguration("spec.resource.host is not an object: %v", err)
			}
			f["host"], _ = json.Marshal(host.Name + ":" + host.Port)
			if w, ok := f["weight"]; ok {
				obj.Annotations[weightKey] = string(w)
				delete(f, "weight")
			}
			return nil
		})
	default:
		err = Unrecoverable("Host has versions v1 and v2; cannot convert %s to %s", from, to)
	}
	return obj, err
}

func TestATwoVersionConversionRoundTrips(t *testing.T) {
	r := NewRaw[spec, filter, state](&hosts{})
	// A big integer and a field the conversion does not know come back byte for byte.
	v2 := Convertible{
		Resource:    json.RawMessage(`{"host":{"name":"a.example.com","port":"443"},"weight":12345678901234567890,"extra":[1.50,"x"]}`),
		Filter:      json.RawMessage(`{"zone":"a"}`),
		Annotations: map[string]string{"other/key": "kept"},
	}
	v1, f := r.Convert(v2, "v2", "v1")
	if f != nil {
		t.Fatal(f)
	}
	if string(v1.Resource) != `{"extra":[1.50,"x"],"host":"a.example.com:443"}` || v1.Annotations[weightKey] != "12345678901234567890" ||
		string(v1.Filter) != `{"zone":"a"}` || v1.Observed != nil || v1.Annotations["other/key"] != "kept" {
		t.Fatalf("at v1: %s %s %s %v", v1.Resource, v1.Filter, v1.Observed, v1.Annotations)
	}
	for _, c := range []struct {
		obj      Convertible
		from, to string
	}{{v2, "v2", "v1"}, {v1, "v1", "v2"}, {Convertible{Resource: json.RawMessage(`{"host":"b:80"}`)}, "v1", "v2"}} {
		if err := CheckRoundTrip(&hosts{}, c.obj, c.from, c.to); err != nil {
			t.Errorf("%s -> %s: %v", c.from, c.to, err)
		}
	}
	versions, err := r.Versions()
	if err != nil || len(versions) != 2 {
		t.Fatalf("versions: %+v %v", versions, err)
	}
	v := versions[1]
	d, _ := r.Describe()
	if v.Name != "v2" || !v.Storage || v.ResourceSchema != d.ResourceSchema || v.ObservedSchema != `{"type":"object"}` || v.FilterSchema != nil {
		t.Errorf("v2: %+v", v)
	}
	if v := versions[0]; v.Name != "v1" || v.Storage || v.FilterSchema == nil || *v.FilterSchema != `{"type":"object"}` {
		t.Errorf("v1: %+v", v)
	}
}

// lossy forgets the weight at v1.
type lossy struct{ hosts }

func (l *lossy) Convert(obj Convertible, from, to string) (Convertible, error) {
	obj, err := l.hosts.Convert(obj, from, to)
	delete(obj.Annotations, weightKey)
	return obj, err
}

func TestCheckRoundTripShowsWhatALossyConversionLost(t *testing.T) {
	err := CheckRoundTrip(&lossy{}, Convertible{Resource: json.RawMessage(`{"host":{"name":"a","port":"1"},"weight":3}`)}, "v2", "v1")
	if err == nil || !strings.Contains(err.Error(), `spec.resource went {"host":{"name":"a","port":"1"},"weight":3}, came back {"host":{"name":"a","port":"1"}}`) {
		t.Fatalf("got %v", err)
	}
}

func TestAPluginWithoutVersionedAnswersNoVersions(t *testing.T) {
	r := NewRaw[spec, filter, state](&fake{})
	if versions, err := r.Versions(); versions != nil || err != nil {
		t.Fatalf("versions: %v %v", versions, err)
	}
	_, f := r.Convert(Convertible{Resource: json.RawMessage(`{}`)}, "v1", "v2")
	if f == nil || f.Kind != KindUnrecoverable || f.Message != "this plugin serves one API version (asked to convert v1 to v2)" {
		t.Fatalf("convert: %v", f)
	}
}

func TestAConversionErrorIsTheFailureOfItsKind(t *testing.T) {
	cases := []struct {
		h    *hosts
		kind FailureKind
		text string
	}{
		{&hosts{err: InvalidConfiguration("bad host")}, KindInvalidConfiguration, "bad host"},
		{&hosts{err: errors.Join(errors.New("context"), Unrecoverable("no such version"))}, KindUnrecoverable, "no such version"},
		{&hosts{err: errors.New("plain")}, KindTransient, "plugin error: plain"},
		{&hosts{panics: true}, KindTransient, "plugin error: panic in convert: assignment to entry in nil map"},
		{&hosts{bad: `{"host":`}, KindUnrecoverable, "plugin error: convert v2 to v1 answered a spec.resource that is not JSON: unexpected end of JSON input"},
		{&hosts{}, KindUnrecoverable, "Host has versions v1 and v2; cannot convert v2 to v3"},
	}
	for i, c := range cases {
		to := "v1"
		if i == len(cases)-1 {
			to = "v3"
		}
		_, f := NewRaw[spec, filter, state](c.h).Convert(Convertible{Resource: json.RawMessage(`{"host":{"name":"a","port":"1"}}`)}, "v2", to)
		if f == nil || f.Kind != c.kind || f.Message != c.text {
			t.Errorf("case %d: got %v", i, f)
		}
	}
	// A document the conversion cannot read is the user's to fix.
	_, f := NewRaw[spec, filter, state](&hosts{}).Convert(Convertible{Resource: json.RawMessage(`{"host":7}`)}, "v1", "v2")
	if f == nil || f.Kind != KindInvalidConfiguration || !strings.HasPrefix(f.Message, "spec.resource.host is not a string") {
		t.Errorf("a v1 host that is no string: %v", f)
	}
}

func TestADocumentThatIsNotJSONIsAFailureNamingIt(t *testing.T) {
	r := NewRaw[spec, filter, state](&hosts{})
	for field, obj := range map[string]Convertible{
		"spec.resource":      {Resource: json.RawMessage(`{"host":`)},
		"spec.import.filter": {Resource: json.RawMessage(`{}`), Filter: json.RawMessage(`nope`)},
		"status.resource":    {Observed: json.RawMessage(``)},
	} {
		_, f := r.Convert(obj, "v1", "v2")
		if f == nil || f.Kind != KindInvalidConfiguration || !strings.HasPrefix(f.Message, field+" at version v1 is not JSON: ") {
			t.Errorf("%s: got %v", field, f)
		}
	}
	// EditObject names the document it needs to be an object.
	if _, err := EditObject(json.RawMessage(`[1]`), "spec.resource", func(map[string]json.RawMessage) error { return nil }); err == nil ||
		AsFailure(err).Kind != KindInvalidConfiguration || !strings.HasPrefix(AsFailure(err).Message, "spec.resource is not a JSON object") {
		t.Errorf("EditObject of a list: %v", err)
	}
	if doc, err := EditObject(nil, "spec.resource", func(map[string]json.RawMessage) error { panic("called") }); doc != nil || err != nil {
		t.Errorf("EditObject of none: %s %v", doc, err)
	}
}

// byValue implements Versioned on its pointer only.
type byValue struct{ short }

func (*byValue) Versions() []APIVersion                                    { return []APIVersion{{Name: "v1"}} }
func (*byValue) Convert(obj Convertible, _, _ string) (Convertible, error) { return obj, nil }

func TestVersionedOnAPointerExportedAsAValueIsAnError(t *testing.T) {
	_, err := NewRaw[spec, filter, state](byValue{}).Versions()
	if err == nil || !strings.Contains(err.Error(), "orchard.byValue implements orchard.Versioned on a pointer receiver") {
		t.Fatalf("got %v", err)
	}
	if versions, err := NewRaw[spec, filter, state](&byValue{}).Versions(); len(versions) != 1 || err != nil {
		t.Fatalf("a pointer: %v %v", versions, err)
	}
}
