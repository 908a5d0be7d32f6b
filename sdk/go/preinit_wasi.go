//go:build wasip1

package orchard

import (
	"os"
	"strings"
	"time"
	_ "unsafe" // go:linkname
)

// A component is pre-initialised when it is built (sdk/go/build.sh runs tools/preinit): the Go
// runtime's start-up and every package's init functions run once, there, and each instance
// starts from the memory they left, which takes their cost (≈ 0.5 ms a call for net/http's
// initialisers alone) off every call. What each instance must still do itself runs in resume,
// which the pre-initialised module exports as _initialize: the component calls it once, when
// the instance is made, before any other export.
//
// So package init is the build's: what an init function reads there — the clock, random
// numbers, the environment (empty) — is the same in every instance. Read those in calls.

//go:linkname witUseGCAllocations go.bytecodealliance.org/pkg/wit/runtime.useGCAllocations
var witUseGCAllocations bool

// runtimeReseed is added to package runtime by the build (runtime_reseed.go.in).
//
//go:linkname runtimeReseed runtime.orchardReseed
func runtimeReseed()

//go:wasmimport wasi_snapshot_preview1 environ_sizes_get
//go:noescape
func environSizesGet(count, size *uint32) uint32

//go:wasmimport wasi_snapshot_preview1 environ_get
//go:noescape
func environGet(environ *uint32, buf *byte) uint32

// resume readies a fresh instance of the pre-initialised module, in this order:
//  1. The first call into the WASI adapter makes the adapter's state and stack, which it
//     allocates with this module's cabi_realloc. Once package init has run, the wit runtime's
//     cabi_realloc calls the adapter itself (to pause its clock around Go's allocator), which
//     the adapter cannot take while it makes its state: so the first call is made here, with
//     the start-up allocator (as during the runtime's own start-up).
//  2. The runtime's random state is seeded from the instance's entropy, not the build's.
//  3. The instance's environment (the host's call deadline, CallDeadlineEnv) is read: the
//     runtime read the build's, which is empty.
//
//go:wasmexport orchard-resume
func resume() {
	witUseGCAllocations = false
	_ = time.Now()
	witUseGCAllocations = true
	runtimeReseed()
	for _, kv := range instanceEnviron() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			_ = os.Setenv(k, v) // fails only on an empty key or a NUL, which WASI cannot give
		}
	}
}

// instanceEnviron is the instance's environment as WASI gives it ("K=V" strings).
func instanceEnviron() []string {
	var count, size uint32
	if environSizesGet(&count, &size) != 0 || count == 0 {
		return nil
	}
	pointers := make([]uint32, count) // where each string starts: the strings are in order
	buf := make([]byte, size)
	if environGet(&pointers[0], &buf[0]) != 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(buf), "\x00"), "\x00")
}
