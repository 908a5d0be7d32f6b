package orchard

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"
)

// CallDeadlineEnv is the environment variable through which the host gives the plugin its call
// deadline: the plugin's limit (the Plugin object's spec.limits.callTimeoutMs, or the host's
// --call-timeout-ms; 10 s by default) in milliseconds, the same for every call of the plugin
// (the contract is host/src/runtime/state.rs's CALL_DEADLINE_ENV, docs/sandbox.md).
const CallDeadlineEnv = "ORCHARD_CALL_DEADLINE_MS"

// CallTimeout is the deadline the SDK gives each call's context when the host does not give
// its own (an older host, or a test run natively without CallDeadlineEnv set): the call's start
// plus CallTimeout, the host's default, with no margin (no host deadline to finish before).
// 0 or less: no deadline. When the host gives its deadline, each call's context has it less
// deadlineMargin, and CallTimeout is not used.
var CallTimeout = 10 * time.Second

// hostBudget reads CallDeadlineEnv once, the first time a call needs it: the host's call
// deadline, and whether the host gave one (a positive integer of milliseconds). A variable so
// that a test can read the environment again.
var hostBudget = sync.OnceValues(readHostBudget)

func readHostBudget() (time.Duration, bool) { return parseBudget(os.Getenv(CallDeadlineEnv)) }

// parseBudget is the budget of CallDeadlineEnv's value v; false when v is not a positive
// integer of milliseconds (absent, malformed, zero, too large).
func parseBudget(v string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// maxDeadlineMargin caps deadlineMargin: 500 ms is ample for the guest to notice its deadline
// and answer, whatever the budget.
const maxDeadlineMargin = 500 * time.Millisecond

// deadlineMargin is how much earlier than the host's deadline a call's context ends: a tenth of
// the host's budget, at most maxDeadlineMargin. The host counts the budget from a little before
// the call starts (the instance's start-up, for the first call of a pass) and stops the whole
// instance at its deadline, one epoch tick late at most; a context ending exactly then (or just
// after) would lose that race every time, and a plugin waiting on a slow API would never return
// its own Transient failure, only the host's "exceeded its deadline". The margin leaves the
// guest the time to stop waiting, build its failure and return it before the host stops it: a
// tenth keeps most of a short budget for the work (150 ms of 1.5 s), the cap keeps the work
// nearly all of a long one (500 ms of 10 s).
func deadlineMargin(budget time.Duration) time.Duration {
	return min(budget/10, maxDeadlineMargin)
}

// callBudget is the time one call's context has: the host's budget (CallDeadlineEnv) less
// deadlineMargin, else CallTimeout (no host deadline to finish before, so no margin).
func callBudget() time.Duration {
	if d, ok := hostBudget(); ok {
		return d - deadlineMargin(d)
	}
	return CallTimeout
}

// callContext is the context of one call: parent (context.Background() when nil) with the
// call's deadline, the call's start (now, on the monotonic clock) plus callBudget: the host's
// budget less deadlineMargin, so that a request waiting until this deadline fails with the
// plugin's own Transient failure before the host stops the call at its own deadline.
func callContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	budget := callBudget()
	if budget <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithDeadline(parent, time.Now().Add(budget))
}

// Context is the call's context, for every request the call makes (Transport honours it, as
// Request.WithContext does): its deadline is the call's start plus the host's call deadline
// less a margin (CallDeadlineEnv, deadlineMargin; CallTimeout when the host gives none), so a
// request the deadline stops fails with the plugin's own failure, and it is cancelled
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
