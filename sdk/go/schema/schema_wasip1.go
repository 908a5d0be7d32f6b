//go:build wasip1

package schema

import (
	"errors"
	"reflect"
)

// errInComponent: inside a component, schemas are not derived. sdk/go/build.sh runs the
// plugin's Describe and Versions natively, at build time, and the component answers them from
// that result; this keeps the JSON-Schema library, and its package initialisers, out of every
// fresh instance.
var errInComponent = errors.New("schema: schemas are derived at build time (sdk/go/build.sh), not inside a component: call schema.Of only from Describe or Versions")

// Of is, inside a component, a panic: see For.
func Of[T any]() map[string]any { panic(errInComponent) }

// For is, inside a component, an error: schemas are derived when sdk/go/build.sh runs the
// plugin's Describe and Versions natively.
func For(reflect.Type) (map[string]any, error) { return nil, errInComponent }
