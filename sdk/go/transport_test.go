//go:build !wasip1

package orchard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// server is a test server that counts its requests; a request to /block waits until the
// client gives up (its context) or the test ends.
func server(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var count atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		switch r.URL.Path {
		case "/block":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/missing":
			w.WriteHeader(404)
			fmt.Fprint(w, "no such exchange")
		case "/bad":
			w.WriteHeader(400)
			fmt.Fprint(w, "bad name")
		default:
			body, _ := io.ReadAll(r.Body)
			user, password, _ := r.BasicAuth()
			w.Header().Set("X-Seen", r.Method+" "+r.Header.Get("Content-Type")+" "+user+":"+password)
			fmt.Fprintf(w, "%s", body)
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, &count
}

var client = &http.Client{Transport: Transport()}

func TestTheTransportSendsAndAnswersLikeNetHTTP(t *testing.T) {
	srv, _ := server(t)
	req, _ := http.NewRequest("PUT", srv.URL+"/echo", strings.NewReader(`{"a":1}`))
	req.SetBasicAuth("u", "p")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "close") // hop-by-hop: dropped, not an error
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Status != "200 OK" || string(body) != `{"a":1}` ||
		resp.Header.Get("x-seen") != "PUT application/json u:p" || resp.ContentLength != 7 || resp.Request != req {
		t.Fatalf("got %d %q %q %q", resp.StatusCode, resp.Status, body, resp.Header.Get("x-seen"))
	}
	if err := CheckResponse(resp, "put"); err != nil {
		t.Fatalf("2xx: %v", err)
	}

	old := MaxResponseBody
	MaxResponseBody = 3
	defer func() { MaxResponseBody = old }()
	_, err = client.Post(srv.URL+"/echo", "text/plain", strings.NewReader("four"))
	if f := AsFailure(err); f == nil || f.Kind != KindTransient || !strings.Contains(f.Message, "larger than 3 bytes") {
		t.Fatalf("cap: %v", err)
	}
}

func TestADisallowedHostFailsThroughTheStandardClientAsThroughTheSDKs(t *testing.T) {
	srv, count := server(t)
	defer AllowHostsNatively("http://api.example.com", "https://127.0.0.1:1")()
	url := srv.URL + "/echo"

	_, before := Get(url).Send()
	_, after := client.Get(url)
	want := InvalidConfiguration("request to %s denied by the host's allow-list", url)
	var f *Failure
	if !errors.As(before, &f) || *f != *want {
		t.Fatalf("the SDK's client: %v", before)
	}
	if !errors.As(after, &f) || *f != *want || *AsFailure(after) != *want {
		t.Fatalf("net/http's client: %v", after)
	}
	// Returned as is by an actuator, it is the same failure for the host.
	r := NewRaw[spec, filter, state](&fetcher{url: url})
	if _, got := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x"); got == nil || *got != *want {
		t.Fatalf("through an actuator: %v", got)
	}
	if n := count.Load(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}

	defer AllowHostsNatively("http://127.0.0.1:*")()
	if resp, err := client.Get(url); err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed: %v", err)
	}
	if r, err := Get(url).Send(); err != nil || r.Status != 200 {
		t.Fatalf("allowed, the SDK's client: %v", err)
	}
	defer AllowHostsNatively()()
	if _, err := client.Get(url); AsFailure(err).Kind != KindInvalidConfiguration {
		t.Fatalf("an empty list allows nothing: %v", err)
	}
}

func TestNativeAllowListEntriesAreTheHosts(t *testing.T) {
	for entry, allowed := range map[string]map[string]bool{
		"http://127.0.0.1":     {"http://127.0.0.1/a": true, "http://127.0.0.1:80/a": true, "http://127.0.0.1:8080/a": false, "https://127.0.0.1/a": false},
		"https://API.example/": {"https://api.example/x": true, "https://api.example:443/x": true, "http://api.example/x": false},
		"http://[::1]:*":       {"http://[::1]:9/x": true, "http://127.0.0.1:9/x": false},
	} {
		restore := AllowHostsNatively(entry)
		for url, want := range allowed {
			u, _ := neturl.Parse(url)
			if got := nativeAllows(u); got != want {
				t.Errorf("%s, %s: %v", entry, url, got)
			}
		}
		restore()
	}
}

// fetcher is an actuator whose GetByID asks url with net/http's client and the call's context.
type fetcher struct {
	Base[spec, filter, state]
	url      string
	deadline time.Time
	ctx      context.Context
}

func (f *fetcher) Describe() Description { return Description{Name: "fetcher"} }
func (f *fetcher) GetByID(obj *Object[spec], id string) (*Resource[state], error) {
	f.ctx = obj.Context()
	f.deadline, _ = obj.Context().Deadline()
	req, err := http.NewRequestWithContext(obj.Context(), "GET", f.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if err := CheckResponse(resp, "get "+id); IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &Resource[state]{ID: id}, nil
}
func (f *fetcher) Create(*Object[spec]) (*Resource[state], error)         { return nil, nil }
func (f *fetcher) Delete(*Object[spec], *Resource[state]) (Status, error) { return Done(), nil }

func TestTheCallsDeadlineReachesTheContextAndTheTransport(t *testing.T) {
	srv, count := server(t)
	f := &fetcher{url: srv.URL + "/echo"}
	r := NewRaw[spec, filter, state](f)

	// The call's context: its start plus CallTimeout, cancelled when the call returns.
	start := time.Now()
	if _, fail := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x"); fail != nil {
		t.Fatal(fail)
	}
	if f.deadline.Before(start.Add(CallTimeout)) || f.deadline.After(time.Now().Add(CallTimeout)) {
		t.Fatalf("deadline %v, call started %v", f.deadline, start)
	}
	if f.ctx.Err() == nil {
		t.Fatal("the call's context outlives the call")
	}

	// A deadline from the test's object (WithContext) reaches the plugin; one already past
	// fails the request before it is sent.
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	sent := count.Load()
	_, fail := r.GetByID(NewRawObject("obj", spec{Name: "a"}).WithContext(past), "x")
	if fail == nil || fail.Kind != KindTransient || !strings.Contains(fail.Message, "context deadline exceeded") {
		t.Fatalf("past deadline: %v", fail)
	}
	if want, _ := past.Deadline(); !f.deadline.Equal(want) {
		t.Fatalf("deadline %v, want the test's %v", f.deadline, want)
	}
	if count.Load() != sent {
		t.Fatal("a request past its deadline was sent")
	}
	// The SDK's own client too.
	if _, err := Get(srv.URL + "/echo").WithContext(past).Send(); !errors.Is(err, context.DeadlineExceeded) || AsFailure(err).Kind != KindTransient {
		t.Fatalf("the SDK's client, past deadline: %v", err)
	}

	// While waiting for the answer: the call's deadline stops the wait (the server would
	// answer only when the test ends).
	old := CallTimeout
	CallTimeout = 200 * time.Millisecond
	defer func() { CallTimeout = old }()
	f.url = srv.URL + "/block"
	start = time.Now()
	_, fail = r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x")
	if fail == nil || fail.Kind != KindTransient || !strings.Contains(fail.Message, "context deadline exceeded") {
		t.Fatalf("deadline while waiting: %v", fail)
	}
	if took := time.Since(start); took < CallTimeout || took > 10*time.Second {
		t.Fatalf("stopped after %v", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Get(srv.URL + "/block").WithContext(ctx).Send()
	var ce *CallError
	if !errors.As(err, &ce) || !ce.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the SDK's client while waiting: %v", err)
	}
}

func TestCheckResponseIsATypedFailureLikeCheck(t *testing.T) {
	srv, _ := server(t)
	resp, err := client.Get(srv.URL + "/missing")
	if err != nil {
		t.Fatal(err)
	}
	err = CheckResponse(resp, "get exchange e")
	var h *HTTPError
	if !IsNotFound(err) || IsConflict(err) || HTTPStatus(err) != 404 || !errors.As(err, &h) || string(h.Body) != "no such exchange" {
		t.Fatalf("404: %v", err)
	}
	old := (&Response{Status: 404, Body: []byte("no such exchange")}).Check("get exchange e")
	if *AsFailure(err) != *AsFailure(old) || AsFailure(err).Message != "get exchange e: HTTP 404: no such exchange" ||
		AsFailure(err).Kind != KindTransient || !IsNotFound(old) {
		t.Fatalf("not Check's failure: %v / %v", err, old)
	}
	if !IsNotFound(fmt.Errorf("wrapped: %w", err)) || IsNotFound(errors.New("404")) || IsNotFound(nil) {
		t.Fatal("IsNotFound")
	}
	resp, _ = client.Get(srv.URL + "/bad")
	if err := CheckResponse(resp, ""); AsFailure(err).Kind != KindInvalidConfiguration ||
		AsFailure(err).Message != "GET "+srv.URL+"/bad: HTTP 400: bad name" {
		t.Fatalf("400: %v", err)
	}
	// An actuator that returns it as is: no error log, the failure as is.
	f := &fetcher{url: srv.URL + "/missing"}
	if res, fail := NewRaw[spec, filter, state](f).GetByID(NewRawObject("obj", spec{Name: "a"}), "x"); res != nil || fail != nil {
		t.Fatalf("404 is none: %v, %v", res, fail)
	}
}

func TestDriftsPrintAsValues(t *testing.T) {
	TakeReports()
	ReportDrift("kind", "Native", "Master")
	ReportDrift("ttl", nil, 60)
	ReportSensitiveDrift("apiKey", "a", "b")
	ReportConnectionDetail("password", []byte("s3cret"))
	got := fmt.Sprintf("%v", TakeReports())
	want := `{[password: "s3cret"] [kind: "Native" -> "Master" ttl: (absent) -> 60 apiKey (sensitive): "a" -> "b"]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
