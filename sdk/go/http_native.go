//go:build !wasip1

package orchard

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"time"
)

var nativeClient = &http.Client{Timeout: 30 * time.Second}

func send(r *Request, _ *url.URL) (*Response, error) {
	req, err := http.NewRequest(r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return nil, InvalidConfiguration("invalid request %s %s: %v", r.Method, r.URL, err)
	}
	for _, h := range r.Headers {
		req.Header.Add(h[0], h[1])
	}
	resp, err := nativeClient.Do(req)
	if err != nil {
		return nil, Transient("HTTP transport error: %s %s: %v", r.Method, r.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(MaxResponseBody)+1))
	if err != nil {
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
