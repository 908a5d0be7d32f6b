//go:build wasip1

package orchard

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"

	wreport "orchard.dev/sdk/internal/wit/imports/orchard_actuator_report"
)

func sendDetail(key string, value []byte) { wreport.ConnectionDetail(key, value) }

func option(s *string) witTypes.Option[string] {
	if s == nil {
		return witTypes.None[string]()
	}
	return witTypes.Some(*s)
}

func sendDrift(d Drift) { wreport.Drift(d.Field, option(d.Observed), option(d.Desired), d.Sensitive) }
