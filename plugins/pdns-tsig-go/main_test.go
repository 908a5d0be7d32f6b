//go:build !wasip1

package main

// Run: sdk/go/test.sh plugins/pdns-tsig-go

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	orchard "orchard.dev/sdk"
)

// The schemas from the types are those the C actuator (plugins/pdns-tsig) writes by hand.
func TestTheSchemasAreTheCActuators(t *testing.T) {
	d := TsigKey{}.Describe()
	for _, c := range []struct {
		what string
		got  any
		want string
	}{
		{"resource", d.ResourceSchema, `{"type":"object","required":["name"],"properties":{` +
			`"name":{"type":"string","minLength":1,"maxLength":253,` +
			`"pattern":"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$",` +
			`"x-kubernetes-validations":[{"rule":"self == oldSelf","message":"name is immutable"}]},` +
			`"algorithm":{"type":"string","default":"hmac-sha256","enum":["hmac-md5","hmac-sha1",` +
			`"hmac-sha224","hmac-sha256","hmac-sha384","hmac-sha512"]},` +
			`"keyFrom":{"type":"string","minLength":1,"maxLength":253,` +
			`"description":"Key of the credentials Secret holding the secret (base64)"}}}`},
		{"filter", d.FilterSchema, `{"type":"object","properties":{"name":{"type":"string","maxLength":253},` +
			`"algorithm":{"type":"string","maxLength":32}}}`},
		{"observed", d.ObservedSchema, `{"type":"object","properties":{"name":{"type":"string"},"algorithm":{"type":"string"}}}`},
	} {
		text, _ := json.Marshal(c.got)
		var got, want any
		if err := json.Unmarshal(text, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s schema:\n got %s\nwant %s", c.what, text, c.want)
		}
	}
}

// The generated client, against a fake PowerDNS: the API key header, the path, a 404 as
// "no such key", a 409 as a failure, and the allow-list of the host.
func TestTheGeneratedClientOverTheSDKsTransport(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("X-API-Key"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/api/v1/servers/localhost/tsigkeys/k1.":
			w.Write([]byte(`{"id":"k1.","name":"k1","algorithm":"hmac-sha256","key":"c2VjcmV0","type":"TSIGKey"}`))
		case r.Method == "POST":
			w.WriteHeader(409)
			w.Write([]byte(`{"error":"A TSIG key with the name 'k1' already exists"}`))
		default:
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"not found"}`))
		}
	}))
	defer srv.Close()
	obj := orchard.NewObject("k1", &Spec{Name: "k1", Algorithm: "hmac-sha256"}).
		WithCredential("url", srv.URL+"/").WithCredential("apiKey", "the-key")

	res, err := TsigKey{}.GetByID(obj, "k1.")
	if err != nil || res == nil || res.ID != "k1." || res.State != (State{"k1", "hmac-sha256"}) {
		t.Fatalf("get: %+v, %v", res, err)
	}
	if res, err := (TsigKey{}).GetByID(obj, "gone."); err != nil || res != nil {
		t.Fatalf("a 404 is no key: %+v, %v", res, err)
	}
	_, err = TsigKey{}.Create(obj)
	if !orchard.IsConflict(err) || orchard.AsFailure(err).Kind != orchard.KindTransient ||
		!strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create over an existing key: %v", err)
	}
	if s, err := (TsigKey{}).Delete(obj, &orchard.Resource[State]{ID: "gone."}); err != nil || !s.IsDone() {
		t.Fatalf("delete of a key that is gone: %v, %v", s, err)
	}
	want := []string{
		"GET /api/v1/servers/localhost/tsigkeys/k1. the-key",
		"GET /api/v1/servers/localhost/tsigkeys/gone. the-key",
		"POST /api/v1/servers/localhost/tsigkeys the-key",
		"DELETE /api/v1/servers/localhost/tsigkeys/gone. the-key",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("requests:\n got %q\nwant %q", seen, want)
	}

	defer orchard.AllowHostsNatively("http://192.0.2.1:8081")()
	_, err = TsigKey{}.GetByID(obj, "k1.")
	if f := orchard.AsFailure(err); f == nil || f.Kind != orchard.KindInvalidConfiguration ||
		!strings.Contains(f.Message, "denied by the host's allow-list") {
		t.Fatalf("a host the allow-list refuses: %v", err)
	}
}
