package orchard

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// A small blocking HTTP client: over wasi:http inside a component (net/http has no transport
// there), over net/http natively (unit tests). Inside a component every request goes through
// the host's allow-list: a denied request is an InvalidConfiguration failure (the admin must
// allow the host; retrying cannot help). No response at all is a Transient failure. Any HTTP
// status is a *Response.
//
//	r, err := orchard.Get(url).BasicAuth(user, password).Send()
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

// JSON sets a JSON body and its content type.
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
	return send(r, u)
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

// JSON decodes the body; a Transient failure when it is not JSON of that shape.
func (r *Response) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return Transient("response is not the JSON expected: %v: %.200q", err, r.Body)
	}
	return nil
}

// Check is nil for a 2xx response, else a failure carrying status and body: 4xx other than
// 404, 408, 409 and 429 are InvalidConfiguration (the request itself is wrong), the rest
// Transient.
func (r *Response) Check(what string) error {
	if r.OK() {
		return nil
	}
	body := strings.TrimSpace(r.Text())
	if len(body) > 1000 {
		body = body[:1000]
	}
	message := fmt.Sprintf("%s: HTTP %d: %s", what, r.Status, body)
	if r.Status >= 400 && r.Status < 500 && r.Status != 404 && r.Status != 408 && r.Status != 409 && r.Status != 429 {
		return &Failure{KindInvalidConfiguration, message}
	}
	return &Failure{KindTransient, message}
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
