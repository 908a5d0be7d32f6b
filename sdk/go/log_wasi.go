//go:build wasip1

package orchard

import wlog "orchard.dev/sdk/internal/wit/imports/orchard_actuator_log"

func logLine(level Level, message string) { wlog.Log(wlog.Level(level), message) }
