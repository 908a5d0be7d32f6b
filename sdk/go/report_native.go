//go:build !wasip1

package orchard

import (
	"fmt"
	"sync"
)

// NativeReportLimit is how many connection details, and how many drifts, the native collector
// keeps (later ones are dropped).
const NativeReportLimit = 1024

// Reports is what TakeReports returns.
type Reports struct {
	// ConnectionDetails are [key, value] pairs in the order reported.
	ConnectionDetails []ConnectionDetail
	Drifts            []Drift
}

// A ConnectionDetail as reported.
type ConnectionDetail struct {
	Key   string
	Value []byte
}

// String is the detail as `key: "value"`, for a test's %v.
func (c ConnectionDetail) String() string { return fmt.Sprintf("%s: %q", c.Key, c.Value) }

// Detail is the last value reported for key, and whether there was one.
func (r Reports) Detail(key string) (string, bool) {
	for i := len(r.ConnectionDetails) - 1; i >= 0; i-- {
		if r.ConnectionDetails[i].Key == key {
			return string(r.ConnectionDetails[i].Value), true
		}
	}
	return "", false
}

var (
	collectedMu sync.Mutex
	collected   Reports
)

// TakeReports returns what was reported since the last call, and empties the collector
// (natively only: a component sends its reports to the host).
func TakeReports() Reports {
	collectedMu.Lock()
	defer collectedMu.Unlock()
	got := collected
	collected = Reports{}
	return got
}

func sendDetail(key string, value []byte) {
	collectedMu.Lock()
	defer collectedMu.Unlock()
	if len(collected.ConnectionDetails) < NativeReportLimit {
		collected.ConnectionDetails = append(collected.ConnectionDetails, ConnectionDetail{key, append([]byte(nil), value...)})
	}
}

func sendDrift(d Drift) {
	collectedMu.Lock()
	defer collectedMu.Unlock()
	if len(collected.Drifts) < NativeReportLimit {
		collected.Drifts = append(collected.Drifts, d)
	}
}
