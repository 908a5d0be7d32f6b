package orchard

import (
	"context"
	"time"
)

// CallTimeout is the deadline the SDK gives each call's context (Object.Context): the call's
// start plus CallTimeout. The host does not pass its deadline to the plugin (wit/actuator.wit
// has no such value): it stops a call CallTimeout after its start, a limit its administrator
// sets per plugin (the Plugin object's spec.limits.callTimeoutMs, or --call-timeout-ms; 10 s by
// default). So the SDK assumes the host's default; a plugin whose Plugin object sets another
// limit sets CallTimeout to it in an init function. The host measures from a little earlier
// (the instance's start-up, for the first call of a pass, about a millisecond for Go), and it
// stops the call at its own deadline regardless: the context's deadline is for the plugin's
// own requests and loops, to give up cleanly with a Transient failure rather than be stopped.
// 0 or less: no deadline.
var CallTimeout = 10 * time.Second

// callContext is the context of one call: parent (context.Background() when nil) with the
// call's deadline.
func callContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	if CallTimeout <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithDeadline(parent, time.Now().Add(CallTimeout))
}

// Context is the call's context, for every request the call makes (Transport honours it, as
// Request.WithContext does): its deadline is the call's (see CallTimeout), and it is cancelled
// when the call returns. When the host stops a call (its deadline, a memory cap), it stops the
// whole instance: no code of the plugin runs after that, so nothing has to watch for it.
// Outside a call (a test object from NewObject given straight to a method), it is the context
// of WithContext, or context.Background().
func (o *Object[S]) Context() context.Context {
	if o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

// WithContext sets the object's context (tests). Through NewRaw, the call's context is derived
// from it: a test gives a deadline (or a cancellation) to the call this way, e.g. one already
// past to see that no request is sent.
func (o *Object[S]) WithContext(ctx context.Context) *Object[S] { o.ctx = ctx; return o }
