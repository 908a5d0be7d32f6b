package orchard

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// A small blocking HTTP client: over wasi:http inside a component, over net/http natively
// (unit tests). For net/http's own client, and every client built on it, see Transport
// (transport.go): both send through the same code. Inside a component every request goes
// through the host's allow-list: a denied request is an InvalidConfiguration failure (the
// admin must allow the host; retrying cannot help). No response at all is a Transient failure.
// Any HTTP status is a *Response.
//
//	r, err := orchard.Get(url).WithContext(obj.Context()).BasicAuth(user, password).Send()
//	if err != nil { return nil, err }
//	if r.Status == 404 { return nil, nil }
//	if err := r.Check("get exchange"); err != nil { return nil, err }
//	err = r.JSON(&exchange)

// MaxResponseBody bounds the body of a response (64 MiB); a larger one is a Transient failure.
var MaxResponseBody = 64 << 20

// Request is an HTTP request being built.
type Request struct {
	Method  string
	URL     string
	Headers [][2]string
	Body    []byte
	ctx     context.Context
	err     error
}

// NewRequest starts a request.
func NewRequest(method, url string) *Request {
	return &Request{Method: strings.ToUpper(method), URL: url}
}

func Get(url string) *Request    { return NewRequest("GET", url) }
func Post(url string) *Request   { return NewRequest("POST", url) }
func Put(url string) *Request    { return NewRequest("PUT", url) }
func Patch(url string) *Request  { return NewRequest("PATCH", url) }
func Delete(url string) *Request { return NewRequest("DELETE", url) }

// Header adds a header.
func (r *Request) Header(name, value string) *Request {
	r.Headers = append(r.Headers, [2]string{name, value})
	return r
}

// BasicAuth adds an authorization header for HTTP basic authentication.
func (r *Request) BasicAuth(user, password string) *Request {
	token := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return r.Header("authorization", "Basic "+token)
}

// WithContext sends the request under ctx (usually obj.Context(), the call's context): a
// context past its deadline, or cancelled, fails the request before it is sent, and stops
// waiting for the answer at the deadline (a Transient failure that errors.Is
// context.DeadlineExceeded). Without it, only the host's own timeouts apply.
func (r *Request) WithContext(ctx context.Context) *Request {
	r.ctx = ctx
	return r
}

// JSON sets the body to body marshalled with encoding/json (HTML characters not escaped; a
// json.RawMessage is sent as is) and adds the header content-type: application/json. A value
// encoding/json cannot marshal makes Send fail with an Unrecoverable failure (a bug of the
// plugin, not of the spec), before anything is sent.
func (r *Request) JSON(body any) *Request {
	text, err := jsonText(body)
	if err != nil {
		r.err = Unrecoverable("%s %s: body is not JSON: %v", r.Method, r.URL, err)
		return r
	}
	r.Body = []byte(text)
	return r.Header("content-type", "application/json")
}

// Send sends the request and reads the whole response.
func (r *Request) Send() (*Response, error) {
	if r.err != nil {
		return nil, r.err
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, InvalidConfiguration("invalid URL %q", r.URL)
	}
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := contextError(ctx, r); err != nil {
		return nil, err
	}
	return send(ctx, r, u)
}

// denied is the failure of a request the host's allow-list refused (natively: the allow-list
// of AllowHostsNatively).
func denied(r *Request) *Failure {
	return InvalidConfiguration("request to %s denied by the host's allow-list", r.URL)
}

// CallError is a request stopped by its context: past the deadline or cancelled. It is a
// Transient failure (errors.As finds the *Failure) and errors.Is finds its cause
// (context.DeadlineExceeded, context.Canceled).
type CallError struct {
	Failure *Failure
	Cause   error
}

func (e *CallError) Error() string   { return e.Failure.Error() }
func (e *CallError) Unwrap() []error { return []error{e.Failure, e.Cause} }

// Timeout says whether the deadline stopped the request (net.Error's method).
func (e *CallError) Timeout() bool { return errors.Is(e.Cause, context.DeadlineExceeded) }

// contextError is the CallError of a request whose context is done, nil otherwise. The
// deadline is compared with the clock too: inside a component nothing runs the context's
// timer while the plugin's code runs or waits on the host.
func contextError(ctx context.Context, r *Request) error {
	cause := ctx.Err()
	if cause == nil {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			cause = context.DeadlineExceeded
		}
	}
	if cause == nil {
		return nil
	}
	return &CallError{Transient("HTTP transport error: %s %s: %v", r.Method, r.URL, cause), cause}
}

// Response is a complete response.
type Response struct {
	Status  int
	Headers [][2]string
	Body    []byte
}

// OK says whether the status is 2xx.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status < 300 }

// Header is the first value of a header (case-insensitive), "" when absent.
func (r *Response) Header(name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h[0], name) {
			return h[1]
		}
	}
	return ""
}

// Text is the body as text.
func (r *Response) Text() string { return string(r.Body) }

// JSON decodes the body with encoding/json into v. A body that is not JSON of that shape is
// a Transient failure ("response is not the JSON expected: …", quoting the body's first 200
// bytes): the system answered something unexpected, perhaps for a moment (a proxy's error
// page); it is not the spec's fault.
func (r *Response) JSON(v any) error { return DecodeJSON(r.Body, v) }

// DecodeJSON is Response.JSON for a body read another way (e.g. from an *http.Response).
func DecodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return Transient("response is not the JSON expected: %v: %.200q", err, body)
	}
	return nil
}

// Check is nil for a 2xx response, else an *HTTPError carrying status and body, which is a
// failure (errors.As finds the *Failure): 4xx other than 404, 408, 409 and 429 are
// InvalidConfiguration (the request itself is wrong), the rest Transient.
func (r *Response) Check(what string) error {
	if r.OK() {
		return nil
	}
	return &HTTPError{StatusCode: r.Status, Body: r.Body, What: what}
}

// HTTPError is an HTTP answer that is not a success (not 2xx), from Response.Check or
// CheckResponse. It is a failure: errors.As finds its *Failure (see Failure), with the kind
// Check gives the status. IsNotFound tells a 404.
type HTTPError struct {
	StatusCode int
	// Body is the answer's body (bounded by MaxResponseBody; CheckResponse keeps 64 KiB).
	Body []byte
	// What names the request in the message ("get exchange x"; "GET <url>" by default).
	What string
}

func (e *HTTPError) Error() string { return e.Failure().Error() }

// Unwrap is the failure the error stands for.
func (e *HTTPError) Unwrap() error { return e.Failure() }

// Failure is the failure the host receives: the message names what, the status and the body
// (its first 1000 bytes).
func (e *HTTPError) Failure() *Failure {
	body := strings.TrimSpace(string(e.Body))
	if len(body) > 1000 {
		body = body[:1000]
	}
	message := fmt.Sprintf("%s: HTTP %d: %s", e.What, e.StatusCode, body)
	s := e.StatusCode
	if s >= 400 && s < 500 && s != 404 && s != 408 && s != 409 && s != 429 {
		return &Failure{KindInvalidConfiguration, message}
	}
	return &Failure{KindTransient, message}
}

// IsNotFound says whether err is (or wraps) an *HTTPError of status 404.
func IsNotFound(err error) bool { return HTTPStatus(err) == 404 }

// IsConflict says whether err is (or wraps) an *HTTPError of status 409.
func IsConflict(err error) bool { return HTTPStatus(err) == 409 }

// HTTPStatus is the status code of the *HTTPError err is or wraps, 0 when there is none.
func HTTPStatus(err error) int {
	var h *HTTPError
	if errors.As(err, &h) {
		return h.StatusCode
	}
	return 0
}

// PathSegment is one URL path segment, percent-encoded (`/` too): "a/b" -> "a%2Fb".
func PathSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
