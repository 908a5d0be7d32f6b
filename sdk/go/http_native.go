//go:build !wasip1

package orchard

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// nativeClient sends the SDK's requests natively (go test): net/http's transport, 30 s for
// the whole exchange like the host's default response timeout, no redirects followed (a
// component's requests follow none either: wasi:http answers the 3xx itself).
var nativeClient = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func send(ctx context.Context, r *Request, u *url.URL) (*Response, error) {
	if !nativeAllows(u) {
		return nil, denied(r)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return nil, InvalidConfiguration("invalid request %s %s: %v", r.Method, r.URL, err)
	}
	for _, h := range r.Headers {
		req.Header.Add(h[0], h[1])
	}
	resp, err := nativeClient.Do(req)
	if err != nil {
		if cerr := contextError(ctx, r); cerr != nil {
			return nil, cerr
		}
		return nil, Transient("HTTP transport error: %s %s: %v", r.Method, r.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(MaxResponseBody)+1))
	if err != nil {
		if cerr := contextError(ctx, r); cerr != nil {
			return nil, cerr
		}
		return nil, Transient("HTTP transport error: %s %s: reading body: %v", r.Method, r.URL, err)
	}
	if len(body) > MaxResponseBody {
		return nil, Transient("%s %s: response body larger than %d bytes", r.Method, r.URL, MaxResponseBody)
	}
	out := &Response{Status: resp.StatusCode, Body: body}
	for k, vs := range resp.Header {
		for _, v := range vs {
			out.Headers = append(out.Headers, [2]string{k, v})
		}
	}
	return out, nil
}

// The native stand-in of the host's allow-list (AllowHostsNatively); nil: everything allowed.
var (
	nativeAllowMu sync.Mutex
	nativeAllow   *[]allowedHost
)

type allowedHost struct {
	scheme, host string
	port         string // "" = any port
}

// AllowHostsNatively puts the native requests (go test) of the SDK's client and of Transport
// behind an allow-list like the host's, so that a test sees what a component sees: entries are
// those of --allow-host, scheme://host[:port|:*] (port omitted: the scheme's default; * any),
// and a request to any other destination fails with the same InvalidConfiguration failure as
// inside a component ("request to <url> denied by the host's allow-list"). No entries deny
// everything, as the host's empty list does. Until it is called, natively everything is
// allowed. It returns a function that restores the previous list (defer it). A malformed entry
// panics: it is for tests.
func AllowHostsNatively(entries ...string) (restore func()) {
	list := make([]allowedHost, 0, len(entries))
	for _, e := range entries {
		list = append(list, parseAllowedHost(e))
	}
	nativeAllowMu.Lock()
	previous := nativeAllow
	nativeAllow = &list
	nativeAllowMu.Unlock()
	return func() {
		nativeAllowMu.Lock()
		nativeAllow = previous
		nativeAllowMu.Unlock()
	}
}

func parseAllowedHost(entry string) allowedHost {
	scheme, rest, ok := strings.Cut(entry, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		panic("AllowHostsNatively: " + entry + " is not scheme://host[:port] (scheme http or https)")
	}
	rest = strings.TrimRight(rest, "/")
	if strings.Contains(rest, "/") || rest == "" {
		panic("AllowHostsNatively: " + entry + ": a path is not allowed, nor an empty host")
	}
	port := defaultPort(scheme)
	host := rest
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.HasSuffix(rest, "]") {
		host, port = rest[:i], rest[i+1:]
		if port == "*" {
			port = ""
		}
	}
	host = strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(host), "["), "]")
	return allowedHost{scheme, host, port}
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func nativeAllows(u *url.URL) bool {
	nativeAllowMu.Lock()
	defer nativeAllowMu.Unlock()
	if nativeAllow == nil {
		return true
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = defaultPort(scheme)
	}
	for _, a := range *nativeAllow {
		if a.scheme == scheme && a.host == host && (a.port == "" || a.port == port) {
			return true
		}
	}
	return false
}
