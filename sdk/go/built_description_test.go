package orchard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The file sdk/go/build.sh adds to the component's build holds what Describe and Versions
// answer natively, schemas as text.
func TestTheDescriptionBuiltNativelyIsWhatDescribeAnswers(t *testing.T) {
	raw := NewRaw[spec, filter, state](&fake{})
	path := filepath.Join(t.TempDir(), "built_description_wasip1.go")
	if err := describeAtBuild(raw, path); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "//go:build wasip1\n\npackage orchard\n") {
		t.Fatalf("not a wasip1 file of package orchard:\n%s", src)
	}
	_, quoted, ok := strings.Cut(string(src), "builtDescriptionJSON = ")
	if !ok {
		t.Fatalf("no builtDescriptionJSON:\n%s", src)
	}
	text, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(quoted), " }"))
	if err != nil {
		t.Fatal(err)
	}
	var got builtDescription
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	want, err := raw.Describe()
	if err != nil {
		t.Fatal(err)
	}
	if got.DescribeError != "" || got.Description.Name != want.Name ||
		got.Description.ResourceSchema != want.ResourceSchema || got.Description.ObservedSchema != want.ObservedSchema ||
		!reflect.DeepEqual(got.Description.FilterSchema, want.FilterSchema) {
		t.Fatalf("built %+v, Describe answers %+v", got.Description, want)
	}
	if got.Versions != nil || got.VersionsError != "" {
		t.Fatalf("versions of an actuator without Versioned: %+v %q", got.Versions, got.VersionsError)
	}
}
