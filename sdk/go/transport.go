package orchard

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Transport is an http.RoundTripper that sends over wasi:http inside a component (natively, in
// go test, over net/http), so that net/http's own client, and every client that takes an
// *http.Client (generated API clients, vendor SDKs), work inside the sandbox unchanged:
//
//	client := &http.Client{Transport: orchard.Transport()}
//	req, _ := http.NewRequestWithContext(obj.Context(), "GET", url, nil)
//	resp, err := client.Do(req)
//
// It sends through the same code as the SDK's own client (Get(url).Send()), so it keeps its
// rules: every request goes through the host's allow-list, and a denied one fails with the
// same InvalidConfiguration failure ("request to <url> denied by the host's allow-list"; the
// *http.Client wraps it in a *url.Error, errors.As still finds the *Failure, and an actuator
// may return the error as is); no answer at all is a Transient failure; the host's connect and
// response timeouts and its response size cap apply, and the body is read whole (at most
// MaxResponseBody bytes) before RoundTrip returns. Every HTTP status is a response: pass it to
// CheckResponse for a failure with the status and the body (IsNotFound tells a 404).
//
// The request's context is honoured: one past its deadline (or cancelled) fails before
// anything is sent, and the wait for the answer stops at the deadline, with a Transient
// *CallError that errors.Is context.DeadlineExceeded. http.Client.Timeout works through the
// same deadline. Use obj.Context(), the call's context, so that a request never outlives the
// call.
//
// What the host's wasi:http decides is not the caller's: the authority is the URL's host
// (req.Host is ignored), and hop-by-hop headers (Connection, Keep-Alive, Transfer-Encoding,
// Upgrade, Te, Proxy-*, Host) and Content-Length are not sent (the transport sets the length
// of the body itself). No redirect is followed by the transport (http.Client follows them, each
// through the allow-list), no proxy is used, and responses are not decompressed (no
// Accept-Encoding is added).
func Transport() http.RoundTripper { return transport{} }

type transport struct{}

// hopByHop are the headers net/http's own transport manages, and wasi:http refuses.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Host": true, "Content-Length": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Http2-Settings": true,
}

func (transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper closes the request body, whatever happens.
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, Transient("HTTP transport error: %s %s: reading the request body: %v", req.Method, req.URL, err)
		}
	}
	if req.URL == nil {
		return nil, InvalidConfiguration("%s: request without a URL", req.Method)
	}
	method := req.Method
	if method == "" {
		method = "GET"
	}
	r := NewRequest(method, req.URL.String())
	r.Body = body
	r.ctx = req.Context()
	for name, values := range req.Header {
		if hopByHop[http.CanonicalHeaderKey(name)] {
			continue
		}
		for _, v := range values {
			r.Headers = append(r.Headers, [2]string{name, v})
		}
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		password, _ := u.Password()
		r.BasicAuth(u.Username(), password)
	}
	got, err := r.Send()
	if err != nil {
		return nil, err
	}
	header := make(http.Header, len(got.Headers))
	for _, h := range got.Headers {
		header.Add(h[0], h[1])
	}
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", got.Status, http.StatusText(got.Status)),
		StatusCode: got.Status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        header,
		Body:          io.NopCloser(bytes.NewReader(got.Body)),
		ContentLength: int64(len(got.Body)),
		Request:       req,
	}, nil
}

// CheckResponseBodyLimit is how much of an error answer's body CheckResponse keeps (64 KiB).
const CheckResponseBodyLimit = 64 << 10

// CheckResponse is nil for a 2xx response (its body left to the caller), else an *HTTPError
// with the status and the body, which it reads (its first CheckResponseBodyLimit bytes) and
// closes: the same failure as Response.Check — InvalidConfiguration for a 4xx other than
// 404, 408, 409 and 429, Transient for the rest — so an actuator returns it as is.
// what names the request in the message ("get exchange x"); "" names it "METHOD <url>".
//
//	resp, err := client.Do(req)
//	if err != nil { return nil, err }
//	if err := orchard.CheckResponse(resp, "get exchange " + name); orchard.IsNotFound(err) {
//		return nil, nil // it does not exist
//	} else if err != nil {
//		return nil, err
//	}
//	defer resp.Body.Close()
func CheckResponse(resp *http.Response, what string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, CheckResponseBodyLimit))
		resp.Body.Close()
	}
	if what == "" && resp.Request != nil && resp.Request.URL != nil {
		what = strings.ToUpper(resp.Request.Method) + " " + resp.Request.URL.String()
	}
	return &HTTPError{StatusCode: resp.StatusCode, Body: body, What: what}
}
