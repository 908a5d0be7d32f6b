// The exported interface orchard:actuator/actuator, dispatched to the actuator the plugin
// registers with orchard.Export. Written by sdk/go/generate.sh over wit-bindgen's stub file
// (from sdk/go/export_stub.go.in); not generated.

package export_orchard_actuator_actuator

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"orchard.dev/sdk/internal/wit/imports/orchard_actuator_types"
)

type (
	object   = orchard_actuator_types.ManagedObject
	resource = orchard_actuator_types.ExternalResource
	failure  = orchard_actuator_types.Failure
	status   = orchard_actuator_types.Status
)

// Exports is the contract in the generated types; the SDK implements it.
type Exports interface {
	Describe() orchard_actuator_types.Description
	GetById(obj object, id string) witTypes.Result[witTypes.Option[resource], failure]
	ListForAdoption(obj object) witTypes.Result[witTypes.Option[[]resource], failure]
	ListForImport(obj object, filter string) witTypes.Result[[]resource, failure]
	Create(obj object) witTypes.Result[resource, status]
	Delete(obj object, res resource) status
	Reconcilers(obj object, res resource) witTypes.Result[[]string, failure]
	RunReconciler(name string, obj object, res resource) status
	Available(obj object, res resource) (orchard_actuator_types.Availability, status)
	Observed(res resource) string
}

// Impl is set by orchard.Export (in an init function of the plugin).
var Impl Exports

func impl() Exports {
	if Impl == nil {
		panic("orchard: no actuator exported: call orchard.Export in an init function of package main")
	}
	return Impl
}

func Describe() orchard_actuator_types.Description { return impl().Describe() }

func GetById(obj object, id string) witTypes.Result[witTypes.Option[resource], failure] {
	return impl().GetById(obj, id)
}

func ListForAdoption(obj object) witTypes.Result[witTypes.Option[[]resource], failure] {
	return impl().ListForAdoption(obj)
}

func ListForImport(obj object, filter string) witTypes.Result[[]resource, failure] {
	return impl().ListForImport(obj, filter)
}

func Create(obj object) witTypes.Result[resource, status] { return impl().Create(obj) }

func Delete(obj object, res resource) status { return impl().Delete(obj, res) }

func Reconcilers(obj object, res resource) witTypes.Result[[]string, failure] {
	return impl().Reconcilers(obj, res)
}

func RunReconciler(name string, obj object, res resource) status {
	return impl().RunReconciler(name, obj, res)
}

func Available(obj object, res resource) (orchard_actuator_types.Availability, status) {
	return impl().Available(obj, res)
}

func Observed(res resource) string { return impl().Observed(res) }
