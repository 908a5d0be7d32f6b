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
// call the actuator, or NewRaw(actuator), directly.
func Export[S, F, T any](a Actuator[S, F, T]) {}
