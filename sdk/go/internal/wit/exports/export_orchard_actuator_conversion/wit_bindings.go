// The exported interface orchard:actuator/conversion (WIT 0.1.2), dispatched to the actuator
// the plugin registers with orchard.Export: its versions and conversion when it implements
// orchard.Versioned, else none (one version). Written by sdk/go/generate.sh over wit-bindgen's
// stub file (from sdk/go/export_conversion_stub.go.in); not generated.

package export_orchard_actuator_conversion

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"orchard.dev/sdk/internal/wit/imports/orchard_actuator_conversion"
	"orchard.dev/sdk/internal/wit/imports/orchard_actuator_types"
)

type (
	apiVersion  = orchard_actuator_conversion.ApiVersion
	convertible = orchard_actuator_conversion.Convertible
	failure     = orchard_actuator_types.Failure
)

// Exports is the contract in the generated types; the SDK implements it.
type Exports interface {
	Versions() []apiVersion
	Convert(obj convertible, from string, to string) witTypes.Result[convertible, failure]
}

// Impl is set by orchard.Export (in an init function of the plugin).
var Impl Exports

func impl() Exports {
	if Impl == nil {
		panic("orchard: no actuator exported: call orchard.Export in an init function of package main")
	}
	return Impl
}

func Versions() []apiVersion { return impl().Versions() }

func Convert(obj convertible, from string, to string) witTypes.Result[convertible, failure] {
	return impl().Convert(obj, from, to)
}
