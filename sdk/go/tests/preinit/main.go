// A fixture of sdk/go/tests/component.sh: a Go component is pre-initialised when it is built, so
// what package init computed is the build's, and what a call computes is its instance's own.
// get-by-id answers, without I/O, random numbers drawn at init and in the call, the
// monotonic time the call measured, and the environment the instance was given.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	orchard "orchard.dev/sdk"
	"orchard.dev/sdk/schema"
)

// Spec is spec.resource.
type Spec struct {
	Name string `json:"name" jsonschema:"required"`
}

// Draws is what get-by-id answers.
type Draws struct {
	AtInit  string `json:"atInit"`  // math/rand/v2 in package init: the build's
	InCall  string `json:"inCall"`  // math/rand/v2 in the call: the instance's
	MapSeed string `json:"mapSeed"` // the order of a map made in the call (its seed: the instance's)
	SleptOK bool   `json:"sleptOK"` // a 1 ms sleep measured ≥ 1 ms on the monotonic clock
	Env     string `json:"env"`     // the instance's environment: the host's call deadline
}

var atInit = rand.Uint64()

// Random is the actuator.
type Random struct {
	orchard.Base[Spec, struct{}, Draws]
}

func init() { orchard.Export[Spec, struct{}, Draws](Random{}) }

func main() {}

// Describe is the kind.
func (Random) Describe() orchard.Description {
	return orchard.Description{
		Name: "preinit-random", Group: "fixtures.orchard.dev", Version: "v1alpha1", Kind: "Random",
		Plural: "randoms", ResourceSchema: schema.Of[Spec](), ObservedSchema: schema.Of[Draws](),
	}
}

// GetByID draws.
func (Random) GetByID(_ *orchard.Object[Spec], id string) (*orchard.Resource[Draws], error) {
	m := map[int]bool{}
	for i := range 64 {
		m[i] = true
	}
	order := ""
	for k := range m {
		order += fmt.Sprint(k, ",")
	}
	start := time.Now()
	time.Sleep(time.Millisecond)
	slept := time.Since(start) >= time.Millisecond
	return &orchard.Resource[Draws]{ID: id, State: Draws{
		AtInit: fmt.Sprint(atInit), InCall: fmt.Sprint(rand.Uint64()), MapSeed: order, SleptOK: slept,
		Env: os.Getenv(orchard.CallDeadlineEnv),
	}}, nil
}

// Create is not called by the test.
func (Random) Create(*orchard.Object[Spec]) (*orchard.Resource[Draws], error) {
	return nil, orchard.Unrecoverable("a fixture")
}

// Delete is not called by the test.
func (Random) Delete(*orchard.Object[Spec], *orchard.Resource[Draws]) (orchard.Status, error) {
	return orchard.Done(), nil
}
