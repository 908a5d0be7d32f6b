package orchard

// Several API versions of the managed kind (orchard:actuator/conversion, WIT 0.1.2): an
// actuator that also implements Versioned lists its versions and converts between them; the
// host puts every version in the CRD, serves the apiserver's conversion webhook and calls
// Convert in the sandbox. Every Go component exports the interface: an actuator that does not
// implement Versioned answers no versions, so its kind has one, its description's (exactly as
// a component built before 0.1.2). See docs/schema-evolution.md.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"
)

// APIVersion is one API version of the kind. The schemas are any JSON value, as in
// Description (map[string]any, schema.Of[T](), json.RawMessage).
type APIVersion struct {
	// Name is a Kubernetes version name: v1, v1beta1, v2alpha3…
	Name string
	// ResourceSchema is the OpenAPI v3 schema of spec.resource at this version.
	ResourceSchema any
	// FilterSchema is the schema of spec.import.filter at this version; nil: no import by
	// filter.
	FilterSchema any
	// ObservedSchema is the schema of status.resource at this version.
	ObservedSchema any
	// Storage marks the version objects are stored at. Exactly one version MUST say true.
	Storage bool
}

// APIVersion is the description's own version as an APIVersion, with the description's
// schemas: the version Versions MUST list, since it is the one every Actuator method sees.
//
//	func (Hooks) Versions() []orchard.APIVersion {
//		return []orchard.APIVersion{
//			{Name: "v1alpha1", ResourceSchema: schema.Of[SpecV1alpha1](), ObservedSchema: schema.Of[Observed]()},
//			Hooks{}.Describe().APIVersion(true), // v1beta1, the storage version
//		}
//	}
func (d Description) APIVersion(storage bool) APIVersion {
	return APIVersion{
		Name: d.Version, ResourceSchema: d.ResourceSchema, FilterSchema: d.FilterSchema,
		ObservedSchema: d.ObservedSchema, Storage: storage,
	}
}

// Convertible is the part of one object that changes shape between versions: the plugin's
// own documents, as JSON text (nil: the object has none), and the object's annotations. The
// host keeps the rest of the object (metadata, managementPolicy, credentialsRef, conditions,
// status.id…) as it is.
type Convertible struct {
	// Resource is spec.resource; nil when the object has none.
	Resource json.RawMessage
	// Filter is spec.import.filter; nil when the object has none.
	Filter json.RawMessage
	// Observed is status.resource; nil when the object has none.
	Observed json.RawMessage
	// Annotations are the object's annotations (never nil in Convert). A conversion MAY keep
	// what the other version cannot hold under keys of the kind's group (<group>/…), so that a
	// round trip loses nothing: the host writes back only those keys, and keeps every other
	// annotation as it was.
	Annotations map[string]string
}

// Versioned is what an actuator implements, beside Actuator, when its kind has several API
// versions. The SDK detects it on the value given to Export (or NewRaw). Mind the receiver:
// methods on a pointer are found only when a pointer is exported (Versions fails, naming the
// type, when a value was).
//
// Contract (wit/actuator.wit, interface conversion):
//   - Versions MUST be pure (same answer every time, no I/O) and list every version, oldest
//     first, at most 16; it MUST list the description's Version with the description's
//     schemas (Description.APIVersion gives it), since every Actuator method works at that
//     version and the apiserver converts the rest; exactly one version MUST be Storage.
//     An empty list means one version, as when Versioned is not implemented.
//   - Convert converts obj from version `from` to version `to` (two names Versions lists; it
//     SHOULD answer obj unchanged when they are equal). It MUST preserve every field:
//     converting to another version and back MUST give the object that went in (the
//     conformance kit checks it on the plugin's sample; CheckRoundTrip does in a unit test).
//     What `to` cannot hold goes into an annotation under the kind's group. It MUST NOT do
//     I/O: the host denies every request during the call (the request fails as a denied one).
//     It SHOULD leave alone what it does not convert (EditObject keeps every other field byte
//     for byte; decoding into map[string]any would turn big integers into float64s).
//   - Errors are failures as for every other method: return a *Failure (InvalidConfiguration
//     for a document the user must fix, Unrecoverable for a pair of versions this plugin does
//     not know), possibly wrapped; any other error becomes a Transient failure, a panic too.
//     A failure fails the apiserver's request for that object, with a message naming the
//     plugin, the object and the failure; the host goes on.
type Versioned interface {
	Versions() []APIVersion
	Convert(obj Convertible, from, to string) (Convertible, error)
}

// RawAPIVersion is an APIVersion with its schemas as JSON text.
type RawAPIVersion struct {
	Name                           string
	ResourceSchema, ObservedSchema string
	FilterSchema                   *string
	Storage                        bool
}

// rawVersions is Raw.Versions of an actuator a.
func rawVersions(a any) (out []RawAPIVersion, err error) {
	defer guard("versions", func(f *Failure) { out, err = nil, f })
	v, ok := a.(Versioned)
	if !ok {
		if t := reflect.TypeOf(a); t != nil && t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(reflect.TypeFor[Versioned]()) {
			return nil, fmt.Errorf("%v implements orchard.Versioned on a pointer receiver, and was exported as a value: export &%v{…} (or use value receivers)", t, t.Name())
		}
		return nil, nil
	}
	for _, one := range v.Versions() {
		r := RawAPIVersion{Name: one.Name, Storage: one.Storage}
		if r.ResourceSchema, err = jsonText(one.ResourceSchema); err != nil {
			return nil, fmt.Errorf("version %s: resource schema: %w", one.Name, err)
		}
		if r.ObservedSchema, err = jsonText(one.ObservedSchema); err != nil {
			return nil, fmt.Errorf("version %s: observed schema: %w", one.Name, err)
		}
		if one.FilterSchema != nil {
			text, err := jsonText(one.FilterSchema)
			if err != nil {
				return nil, fmt.Errorf("version %s: filter schema: %w", one.Name, err)
			}
			r.FilterSchema = &text
		}
		out = append(out, r)
	}
	return out, nil
}

// the documents of a Convertible, with the names the contract gives them.
func (c *Convertible) documents() []struct {
	field string
	doc   *json.RawMessage
} {
	return []struct {
		field string
		doc   *json.RawMessage
	}{{"spec.resource", &c.Resource}, {"spec.import.filter", &c.Filter}, {"status.resource", &c.Observed}}
}

// rawConvert is Raw.Convert of an actuator a: the documents checked on the way in (a
// document that is not JSON is an InvalidConfiguration failure naming it) and on the way out
// (an Unrecoverable one: a bug of the plugin).
func rawConvert(a any, obj Convertible, from, to string) (out Convertible, fail *Failure) {
	defer guard("convert", func(f *Failure) { out, fail = Convertible{}, f })
	v, ok := a.(Versioned)
	if !ok {
		return Convertible{}, Unrecoverable("this plugin serves one API version (asked to convert %s to %s)", from, to)
	}
	for _, d := range obj.documents() {
		if *d.doc == nil {
			continue
		}
		if err := checkJSON(*d.doc); err != nil {
			return Convertible{}, InvalidConfiguration("%s at version %s is not JSON: %v", d.field, from, err)
		}
	}
	// The plugin's own copy: what it changes in place is not the caller's (a test's).
	obj.Annotations = maps.Clone(obj.Annotations)
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	gcCheckpoint()
	out, err := v.Convert(obj, from, to)
	if err != nil {
		return Convertible{}, report("convert", err)
	}
	for _, d := range out.documents() {
		if *d.doc == nil {
			continue
		}
		if err := checkJSON(*d.doc); err != nil {
			return Convertible{}, Unrecoverable("plugin error: convert %s to %s answered a %s that is not JSON: %v", from, to, d.field, err)
		}
	}
	return out, nil
}

// checkJSON is nil when doc is one JSON value, else the decoder's error.
func checkJSON(doc json.RawMessage) error {
	var skip json.RawMessage
	return json.Unmarshal(doc, &skip)
}

// EditObject is the usual shape of a conversion of one document: doc (a JSON object) decoded
// one level deep, every field's value kept as JSON text, edit renames, moves or rewrites the
// fields it converts, and the object is encoded again — so that every field edit does not
// touch comes back byte for byte (numbers too). A nil doc (the object has none) stays nil and
// edit is not called. `field` names the document in the error when doc is not a JSON object
// (an InvalidConfiguration failure); edit's own error is returned as it is.
//
//	obj.Resource, err = orchard.EditObject(obj.Resource, "spec.resource", func(f map[string]json.RawMessage) error {
//		f["endpoint"], _ = json.Marshal(Endpoint{URL: …})
//		delete(f, "url")
//		return nil
//	})
func EditObject(doc json.RawMessage, field string, edit func(fields map[string]json.RawMessage) error) (json.RawMessage, error) {
	if doc == nil {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil || fields == nil {
		if err == nil {
			err = fmt.Errorf("null")
		}
		return nil, InvalidConfiguration("%s is not a JSON object: %v", field, err)
	}
	if err := edit(fields); err != nil {
		return nil, err
	}
	text, err := jsonText(fields)
	if err != nil {
		return nil, Unrecoverable("plugin error: %s: %v", field, err)
	}
	return json.RawMessage(text), nil
}

// CheckRoundTrip converts obj from version `from` to `to` and back, through the same checks
// as the host's calls (NewRaw), and says what differs when the object that comes back is not
// the one that went in (JSON documents compared as values, numbers by their text;
// annotations key by key). For unit tests of a Versioned actuator:
//
//	if err := orchard.CheckRoundTrip(Hooks{}, orchard.Convertible{Resource: json.RawMessage(`{…}`)}, "v1alpha1", "v1beta1"); err != nil {
//		t.Fatal(err)
//	}
func CheckRoundTrip(v Versioned, obj Convertible, from, to string) error {
	there, f := rawConvert(v, obj, from, to)
	if f != nil {
		return fmt.Errorf("convert %s to %s: %w", from, to, f)
	}
	back, f := rawConvert(v, there, to, from)
	if f != nil {
		return fmt.Errorf("convert %s back to %s: %w", to, from, f)
	}
	if diff := convertibleDiff(obj, back); diff != "" {
		return fmt.Errorf("%s to %s and back is not the object that went in: %s", from, to, diff)
	}
	return nil
}

func convertibleDiff(want, got Convertible) string {
	var diffs []string
	wd, gd := want.documents(), got.documents()
	for i := range wd {
		if !sameDocument(*wd[i].doc, *gd[i].doc) {
			diffs = append(diffs, fmt.Sprintf("%s went %s, came back %s", wd[i].field, shown(*wd[i].doc), shown(*gd[i].doc)))
		}
	}
	keys := map[string]bool{}
	for k := range want.Annotations {
		keys[k] = true
	}
	for k := range got.Annotations {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, wok := want.Annotations[k]
		g, gok := got.Annotations[k]
		switch {
		case wok && !gok:
			diffs = append(diffs, fmt.Sprintf("annotation %s went %q, came back absent", k, w))
		case !wok && gok:
			diffs = append(diffs, fmt.Sprintf("annotation %s went absent, came back %q", k, g))
		case w != g:
			diffs = append(diffs, fmt.Sprintf("annotation %s went %q, came back %q", k, w, g))
		}
	}
	return strings.Join(diffs, "; ")
}

func shown(doc json.RawMessage) string {
	if doc == nil {
		return "absent"
	}
	return string(doc)
}

// sameDocument compares two documents as JSON values (nil: absent), numbers by their text.
func sameDocument(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	decode := func(doc json.RawMessage) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(doc))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil
	}
	av, aok := decode(a)
	bv, bok := decode(b)
	if !aok || !bok {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(av, bv)
}
