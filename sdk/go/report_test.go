//go:build !wasip1

package orchard

import (
	"reflect"
	"testing"
)

func str(s string) *string { return &s }

func TestReportsAreCollectedNatively(t *testing.T) {
	TakeReports()
	ReportConnectionDetail("password", []byte("s3cret"))
	ReportDrift("kind", "Native", "Master")
	ReportDrift("ttl", nil, 60)
	ReportSensitiveDrift("apiKey", "a", "b")
	got := TakeReports()
	if v, ok := got.Detail("password"); !ok || v != "s3cret" {
		t.Fatalf("password: %q %v", v, ok)
	}
	want := []Drift{
		{Field: "kind", Observed: str(`"Native"`), Desired: str(`"Master"`)},
		{Field: "ttl", Desired: str("60")},
		{Field: "apiKey", Observed: str(`"a"`), Desired: str(`"b"`), Sensitive: true},
	}
	if !reflect.DeepEqual(got.Drifts, want) {
		t.Fatalf("drifts: %+v", got.Drifts)
	}
	if again := TakeReports(); len(again.Drifts)+len(again.ConnectionDetails) != 0 {
		t.Fatalf("not emptied: %+v", again)
	}
}

func TestDiffComparesDottedFieldsAndReportsOnDemand(t *testing.T) {
	TakeReports()
	type settings struct {
		TTL int `json:"ttl"`
	}
	type zone struct {
		Kind     string            `json:"kind"`
		Settings settings          `json:"settings"`
		Labels   map[string]string `json:"labels,omitempty"`
	}
	observed := zone{Kind: "Native", Settings: settings{60}, Labels: map[string]string{"a": "1"}}
	desired := map[string]any{"kind": "Native", "settings": map[string]any{"ttl": 300}}
	d := Diff(observed, desired, "kind", "settings.ttl", "labels")
	if !reflect.DeepEqual(d.Fields(), []string{"settings.ttl", "labels"}) {
		t.Fatalf("fields: %v", d.Fields())
	}
	if n := len(TakeReports().Drifts); n != 0 {
		t.Fatalf("reported before Report: %d", n)
	}
	if n := d.Report(); n != 2 {
		t.Fatalf("Report: %d", n)
	}
	got := TakeReports().Drifts
	want := []Drift{
		{Field: "settings.ttl", Observed: str("60"), Desired: str("300")},
		{Field: "labels", Observed: str(`{"a":"1"}`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("drifts: %+v", got)
	}
	if !NewDiff().Field("m", map[string]int{"a": 1, "b": 2}, map[string]any{"b": 2, "a": 1}).Empty() {
		t.Fatal("equal JSON values differ")
	}
	if NewDiff().SensitiveField("p", "a", "b").Drifts()[0].Sensitive != true {
		t.Fatal("not sensitive")
	}
}
