//go:build !wasip1

package orchard

import (
	"fmt"
	"os"
)

var levelNames = [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

func logLine(level Level, message string) {
	fmt.Fprintf(os.Stderr, "%s %s\n", levelNames[level], message)
}

// Export registers the actuator the component exports. Natively (unit tests) it does nothing:
// call the actuator, or NewRaw(actuator), directly. With BuiltDescriptionEnv set (sdk/go/build.sh)
// it writes the actuator's description there and exits.
func Export[S, F, T any](a Actuator[S, F, T]) {
	path := os.Getenv(BuiltDescriptionEnv)
	if path == "" {
		return
	}
	if err := describeAtBuild(NewRaw(a), path); err != nil {
		fmt.Fprintf(os.Stderr, "orchard: %s: %v\n", BuiltDescriptionEnv, err)
		os.Exit(1)
	}
	os.Exit(0)
}
