package orchard

// What a plugin reports beside its answers (orchard:actuator/report, WIT 0.1.1):
//
//	orchard.ReportConnectionDetail("password", []byte(password))
//	orchard.ReportDrift("kind", "Native", "Master")        // values: anything encoding/json takes
//	d := orchard.Diff(observed, desired, "tags", "settings.ttl")
//	if !d.Empty() { /* change the resource back */ d.Report() }
//
// The host writes the connection details of a pass into the Secret named by
// spec.writeConnectionSecretTo.name (owned by the object), never into status, Events or logs;
// it records drifts in an Event DriftCorrected and in status.drift. Natively (unit tests)
// nothing is sent: reports are collected in-process and TakeReports returns them.

import (
	"encoding/json"
	"reflect"
	"strings"
)

// A Drift is a field a reconciler changed back to the spec: Observed and Desired are JSON
// text, nil for absent.
type Drift struct {
	Field     string
	Observed  *string
	Desired   *string
	Sensitive bool
}

// String is the drift as `field: observed -> desired`, its values as JSON text ("(absent)" for
// none), so that a test's %v of a drift or of TakeReports() shows values, not pointers. A
// sensitive field is marked "(sensitive)": the host masks it, a native test shows it.
func (d Drift) String() string {
	value := func(v *string) string {
		if v == nil {
			return "(absent)"
		}
		return *v
	}
	field := d.Field
	if d.Sensitive {
		field += " (sensitive)"
	}
	return field + ": " + value(d.Observed) + " -> " + value(d.Desired)
}

// ReportConnectionDetail reports a connection detail: key a Secret data key; a later value of
// a key replaces an earlier one.
func ReportConnectionDetail(key string, value []byte) { sendDetail(key, value) }

// ReportDrift reports that field was observed and was changed back to desired (values
// marshalled with encoding/json; nil: absent).
func ReportDrift(field string, observed, desired any) {
	sendDrift(Drift{Field: field, Observed: toJSON(observed), Desired: toJSON(desired)})
}

// ReportSensitiveDrift is ReportDrift of a secret field: the host masks both values.
func ReportSensitiveDrift(field string, observed, desired any) {
	sendDrift(Drift{Field: field, Observed: toJSON(observed), Desired: toJSON(desired), Sensitive: true})
}

func toJSON(v any) *string {
	if v == nil {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// Differences holds the fields whose observed and desired values differ; Report sends them
// (nothing is sent before).
type Differences struct{ drifts []Drift }

// NewDiff starts an empty Differences, to be filled with Field.
func NewDiff() *Differences { return &Differences{} }

// Field adds field when observed and desired differ as JSON values; chainable.
func (d *Differences) Field(field string, observed, desired any) *Differences {
	return d.add(field, observed, desired, false)
}

// SensitiveField is Field of a secret field: the host masks both values.
func (d *Differences) SensitiveField(field string, observed, desired any) *Differences {
	return d.add(field, observed, desired, true)
}

func (d *Differences) add(field string, observed, desired any, sensitive bool) *Differences {
	o, w := toJSON(observed), toJSON(desired)
	if !sameJSON(o, w) {
		d.drifts = append(d.drifts, Drift{Field: field, Observed: o, Desired: w, Sensitive: sensitive})
	}
	return d
}

// sameJSON compares two JSON texts as values (object keys in any order).
func sameJSON(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb any
	if json.Unmarshal([]byte(*a), &va) != nil || json.Unmarshal([]byte(*b), &vb) != nil {
		return *a == *b
	}
	return reflect.DeepEqual(va, vb)
}

// Empty says whether observed and desired agree on every field.
func (d *Differences) Empty() bool { return len(d.drifts) == 0 }

// Fields are the names of the fields that differ, in order.
func (d *Differences) Fields() []string {
	out := make([]string, len(d.drifts))
	for i, x := range d.drifts {
		out[i] = x.Field
	}
	return out
}

// Drifts are the differences, in order.
func (d *Differences) Drifts() []Drift { return d.drifts }

// Report reports every difference as a drift and returns how many.
func (d *Differences) Report() int {
	for _, x := range d.drifts {
		sendDrift(x)
	}
	return len(d.drifts)
}

// Diff compares observed and desired (structs, maps: anything encoding/json marshals to an
// object) on each of fields, a dotted path of JSON names ("settings.ttl"); a field missing on
// one side is absent there. Nothing is reported until Report.
func Diff(observed, desired any, fields ...string) *Differences {
	o, w := asObject(observed), asObject(desired)
	d := NewDiff()
	for _, f := range fields {
		d.Field(f, lookup(o, f), lookup(w, f))
	}
	return d
}

func asObject(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

func lookup(v any, path string) any {
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok = m[key]; !ok {
			return nil
		}
	}
	return v
}
