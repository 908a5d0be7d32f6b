//go:build !wasip1

package orchard

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// withHostDeadline runs the rest of the test as in an instance whose environment has
// CallDeadlineEnv=value (set false: no such variable), read afresh as the SDK reads it.
func withHostDeadline(t *testing.T, value string, set bool) {
	t.Helper()
	t.Setenv(CallDeadlineEnv, value) // restored at the end of the test
	if !set {
		os.Unsetenv(CallDeadlineEnv)
	}
	old := hostBudget
	hostBudget = sync.OnceValues(readHostBudget)
	t.Cleanup(func() { hostBudget = old })
}

func TestEachCallsContextEndsAMarginBeforeTheHostsCallDeadline(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration // the context's deadline from the call's start
	}{
		{"2500", 2250 * time.Millisecond},  // a tenth of the budget
		{"1500", 1350 * time.Millisecond},  // a tenth of the budget
		{"10000", 9500 * time.Millisecond}, // capped at 500 ms
		{"600000", 600*time.Second - 500*time.Millisecond},
		{"1", 900 * time.Microsecond},
	} {
		t.Run(c.value, func(t *testing.T) {
			withHostDeadline(t, c.value, true)
			f := &fetcher{url: "unused"}
			r := NewRaw[spec, filter, state](&deadlineOnly{f})
			start := time.Now()
			if _, fail := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x"); fail != nil {
				t.Fatal(fail)
			}
			end := time.Now()
			if f.deadline.Before(start.Add(c.want)) || f.deadline.After(end.Add(c.want)) {
				t.Fatalf("deadline %v after the call's start, want %v (the host's %s ms less the margin)",
					f.deadline.Sub(start), c.want, c.value)
			}
			if f.ctx.Err() == nil {
				t.Fatal("the call's context outlives the call")
			}
			// Each call from its own start, not the first call's (the value is read once).
			start = time.Now()
			if _, fail := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x"); fail != nil {
				t.Fatal(fail)
			}
			if f.deadline.Before(start.Add(c.want)) {
				t.Fatalf("the second call's deadline %v is before its start (%v) plus %v", f.deadline, start, c.want)
			}
		})
	}
}

func TestTheMarginIsATenthOfTheBudgetAtMostHalfASecond(t *testing.T) {
	for budget, want := range map[time.Duration]time.Duration{
		time.Millisecond:       100 * time.Microsecond,
		200 * time.Millisecond: 20 * time.Millisecond,
		5 * time.Second:        500 * time.Millisecond,
		10 * time.Second:       500 * time.Millisecond,
		10 * time.Minute:       500 * time.Millisecond,
	} {
		if got := deadlineMargin(budget); got != want {
			t.Errorf("margin of %v: %v, want %v", budget, got, want)
		}
	}
}

func TestWithoutAUsableHostDeadlineEachCallGetsCallTimeout(t *testing.T) {
	for _, c := range []struct {
		value string
		set   bool
	}{{"", false}, {"", true}, {"soon", true}, {"0", true}, {"-5", true}, {"1.5", true}, {"99999999999999999999", true}} {
		t.Run(c.value, func(t *testing.T) {
			withHostDeadline(t, c.value, c.set)
			f := &fetcher{url: "unused"}
			r := NewRaw[spec, filter, state](&deadlineOnly{f})
			start := time.Now()
			if _, fail := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x"); fail != nil {
				t.Fatal(fail)
			}
			if f.deadline.Before(start.Add(CallTimeout)) || f.deadline.After(time.Now().Add(CallTimeout)) {
				t.Fatalf("%q: deadline %v, want the call's start (%v) plus CallTimeout", c.value, f.deadline, start)
			}
		})
	}
}

func TestTheHostsCallDeadlineStopsTheTransportsWait(t *testing.T) {
	withHostDeadline(t, "200", true)
	srv, _ := server(t)
	f := &fetcher{url: srv.URL + "/block"}
	r := NewRaw[spec, filter, state](f)
	start := time.Now()
	_, fail := r.GetByID(NewRawObject("obj", spec{Name: "a"}), "x")
	if fail == nil || fail.Kind != KindTransient || !strings.Contains(fail.Message, "context deadline exceeded") {
		t.Fatalf("deadline while waiting: %v", fail)
	}
	// Stopped at the context's deadline, the host's 200 ms less the 20 ms margin.
	if took := time.Since(start); took < 180*time.Millisecond || took > CallTimeout {
		t.Fatalf("stopped after %v, want the host's 200 ms less the margin", took)
	}
}

func TestParseBudgetTakesOnlyPositiveMilliseconds(t *testing.T) {
	for v, want := range map[string]time.Duration{"1": time.Millisecond, "10000": 10 * time.Second, "600000": 10 * time.Minute} {
		if got, ok := parseBudget(v); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", " 5", "5ms", "0", "-1", "0x10", "9223372036855"} {
		if got, ok := parseBudget(v); ok {
			t.Errorf("%q: %v, want none", v, got)
		}
	}
}

// deadlineOnly is the fetcher without its request: GetByID records the call's context only.
type deadlineOnly struct{ *fetcher }

func (d *deadlineOnly) GetByID(obj *Object[spec], id string) (*Resource[state], error) {
	d.ctx = obj.Context()
	d.deadline, _ = obj.Context().Deadline()
	return &Resource[state]{ID: id}, nil
}
