package orchard

import "fmt"

// Level of a log line; inside a component the lines go to the host's tracing, tagged with
// the plugin and the object.
type Level int

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// Log writes one line at a level.
func Log(level Level, message string) { logLine(level, message) }

func Debugf(format string, args ...any) { logLine(LevelDebug, fmt.Sprintf(format, args...)) }
func Infof(format string, args ...any)  { logLine(LevelInfo, fmt.Sprintf(format, args...)) }
func Warnf(format string, args ...any)  { logLine(LevelWarn, fmt.Sprintf(format, args...)) }
func Errorf(format string, args ...any) { logLine(LevelError, fmt.Sprintf(format, args...)) }
