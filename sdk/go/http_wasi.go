//go:build wasip1

package orchard

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	clock "orchard.dev/sdk/internal/wit/imports/wasi_clocks_monotonic_clock"
	outgoing "orchard.dev/sdk/internal/wit/imports/wasi_http_outgoing_handler"
	ht "orchard.dev/sdk/internal/wit/imports/wasi_http_types"
	poll "orchard.dev/sdk/internal/wit/imports/wasi_io_poll"
	streams "orchard.dev/sdk/internal/wit/imports/wasi_io_streams"
)

const (
	writeChunk = 4096 // what one blocking-write-and-flush accepts (wasi:io)
	readChunk  = 64 << 10
)

func method(name string) ht.Method {
	switch name {
	case "GET":
		return ht.MakeMethodGet()
	case "HEAD":
		return ht.MakeMethodHead()
	case "POST":
		return ht.MakeMethodPost()
	case "PUT":
		return ht.MakeMethodPut()
	case "DELETE":
		return ht.MakeMethodDelete()
	case "PATCH":
		return ht.MakeMethodPatch()
	case "OPTIONS":
		return ht.MakeMethodOptions()
	}
	return ht.MakeMethodOther(name)
}

func errorCode(r *Request, code ht.ErrorCode) error {
	if code.Tag() == ht.ErrorCode_HttpRequestDenied {
		return denied(r)
	}
	return Transient("HTTP transport error: %s %s: error code %d", r.Method, r.URL, code.Tag())
}

// wait blocks until pollable is ready, or until the context's deadline: then the request's
// CallError. Nothing can cancel a context while the component waits on the host (one thread,
// no timer runs), so the deadline is the only way out; the host's own timeouts hold anyway.
func wait(ctx context.Context, r *Request, pollable *poll.Pollable) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		pollable.Block()
		return nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return contextError(ctx, r)
	}
	timer := clock.SubscribeDuration(uint64(left.Nanoseconds()))
	defer timer.Drop()
	for _, i := range poll.Poll([]*poll.Pollable{pollable, timer}) {
		if i == 0 {
			return nil
		}
	}
	return &CallError{Transient("HTTP transport error: %s %s: %v", r.Method, r.URL, context.DeadlineExceeded), context.DeadlineExceeded}
}

func send(ctx context.Context, r *Request, u *url.URL) (*Response, error) {
	transport := func(format string, args ...any) error {
		return Transient("HTTP transport error: %s %s: %s", r.Method, r.URL, fmt.Sprintf(format, args...))
	}
	entries := make([]witTypes.Tuple2[string, []uint8], 0, len(r.Headers)+1)
	for _, h := range r.Headers {
		entries = append(entries, witTypes.Tuple2[string, []uint8]{F0: strings.ToLower(h[0]), F1: []byte(h[1])})
	}
	if len(r.Body) > 0 {
		entries = append(entries, witTypes.Tuple2[string, []uint8]{F0: "content-length", F1: []byte(fmt.Sprint(len(r.Body)))})
	}
	fields := ht.FieldsFromList(entries)
	if fields.IsErr() {
		return nil, InvalidConfiguration("%s %s: invalid header (error %d)", r.Method, r.URL, fields.Err().Tag())
	}
	req := ht.MakeOutgoingRequest(fields.Ok())
	scheme := ht.MakeSchemeHttp()
	if u.Scheme == "https" {
		scheme = ht.MakeSchemeHttps()
	}
	path := u.RequestURI()
	if req.SetMethod(method(r.Method)).IsErr() || req.SetScheme(witTypes.Some(scheme)).IsErr() ||
		req.SetAuthority(witTypes.Some(u.Host)).IsErr() || req.SetPathWithQuery(witTypes.Some(path)).IsErr() {
		req.Drop()
		return nil, InvalidConfiguration("invalid URL %q", r.URL)
	}
	// Write and finish the body before handing the request over: the reliable order.
	body := req.Body()
	if body.IsErr() {
		req.Drop()
		return nil, transport("no request body")
	}
	bodyOut := body.Ok()
	if len(r.Body) > 0 {
		stream := bodyOut.Write()
		if stream.IsErr() {
			return nil, transport("no body stream")
		}
		out := stream.Ok()
		for i := 0; i < len(r.Body); i += writeChunk {
			if err := contextError(ctx, r); err != nil {
				out.Drop()
				req.Drop()
				return nil, err
			}
			end := min(i+writeChunk, len(r.Body))
			if res := out.BlockingWriteAndFlush(r.Body[i:end]); res.IsErr() {
				out.Drop()
				return nil, transport("writing body")
			}
		}
		out.Drop()
	}
	if res := ht.OutgoingBodyFinish(bodyOut, witTypes.None[*ht.Fields]()); res.IsErr() {
		return nil, transport("finishing body")
	}
	if err := contextError(ctx, r); err != nil {
		req.Drop()
		return nil, err
	}
	handled := outgoing.Handle(req, witTypes.None[*ht.RequestOptions]())
	if handled.IsErr() {
		return nil, errorCode(r, handled.Err())
	}
	// Dropping the future (on every return) cancels a request still in flight.
	future := handled.Ok()
	defer future.Drop()
	pollable := future.Subscribe()
	err := wait(ctx, r, pollable)
	pollable.Drop()
	if err != nil {
		return nil, err
	}
	outcome := future.Get()
	if outcome.IsNone() {
		return nil, transport("no response")
	}
	if outcome.Some().IsErr() {
		return nil, transport("response already taken")
	}
	got := outcome.Some().Ok()
	if got.IsErr() {
		return nil, errorCode(r, got.Err())
	}
	incoming := got.Ok()
	defer incoming.Drop()
	resp := &Response{Status: int(incoming.Status())}
	headers := incoming.Headers()
	for _, e := range headers.Entries() {
		resp.Headers = append(resp.Headers, [2]string{e.F0, string(e.F1)})
	}
	headers.Drop()
	consumed := incoming.Consume()
	if consumed.IsErr() {
		return nil, transport("response body already taken")
	}
	incomingBody := consumed.Ok()
	stream := incomingBody.Stream()
	if stream.IsErr() {
		incomingBody.Drop()
		return nil, transport("no response body stream")
	}
	in := stream.Ok()
	ready := in.Subscribe()
	for {
		chunk := in.Read(readChunk)
		if chunk.IsOk() && len(chunk.Ok()) == 0 {
			// Nothing yet: wait for more (or the end), within the deadline.
			if err := wait(ctx, r, ready); err != nil {
				ready.Drop()
				in.Drop()
				incomingBody.Drop()
				return nil, err
			}
			continue
		}
		if chunk.IsErr() {
			if chunk.Err().Tag() == streams.StreamError_Closed {
				break
			}
			ready.Drop()
			in.Drop()
			incomingBody.Drop()
			return nil, transport("reading body")
		}
		resp.Body = append(resp.Body, chunk.Ok()...)
		if len(resp.Body) > MaxResponseBody {
			ready.Drop()
			in.Drop()
			incomingBody.Drop()
			return nil, Transient("%s %s: response body larger than %d bytes", r.Method, r.URL, MaxResponseBody)
		}
		// Each chunk was allocated through cabi_realloc, with the collector off: collect here.
		gcCheckpoint()
	}
	ready.Drop()
	in.Drop()
	ht.IncomingBodyFinish(incomingBody).Drop()
	return resp, nil
}
