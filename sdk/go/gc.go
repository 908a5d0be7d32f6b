package orchard

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The garbage collector runs only where the SDK says so.
//
// Inside a component, the host lowers every list and string it passes to the plugin (call
// arguments, HTTP bodies) through the guest's cabi_realloc, which Go implements with its
// allocator. A GC cycle that finishes there reads the wall clock, an import the component
// model forbids inside cabi_realloc: the call traps ("cannot leave component instance").
// So the automatic collector is off (SetGCPercent(-1)), and the SDK collects at points where
// calling imports is allowed: after decoding a call's arguments, and while reading HTTP
// bodies, once GCEvery bytes were allocated since the last collection. A plugin that
// allocates a lot in a loop of its own may call GCCheckpoint.
func init() {
	debug.SetGCPercent(-1)
}

// GCEvery is how many bytes may be allocated between two collections (8 MiB).
var GCEvery uint64 = 8 << 20

var (
	gcSample    = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	gcLastAlloc uint64
)

// GCCheckpoint collects garbage when GCEvery bytes were allocated since the last collection.
// Cheap otherwise (one runtime metric read). Never call it from code that runs inside
// cabi_realloc (the SDK's own code never does).
func GCCheckpoint() { gcCheckpoint() }

func gcCheckpoint() {
	metrics.Read(gcSample)
	allocated := gcSample[0].Value.Uint64()
	if allocated-gcLastAlloc >= GCEvery {
		runtime.GC()
		gcLastAlloc = allocated
	}
}
