// The exported interface orchard:shortcuts/shortcuts (0.1.0), dispatched to the actuator the
// plugin registers with orchard.Export: the shortcuts it declares when it implements
// orchard.ShortcutDeclarer, else none. Written by sdk/go/generate.sh over wit-bindgen's stub
// file (from sdk/go/export_shortcuts_stub.go.in); not generated.

package export_orchard_shortcuts_shortcuts

import (
	"orchard.dev/sdk/internal/wit/imports/orchard_shortcuts_shortcuts"
)

// Exports is the interface in the generated types; the SDK implements it.
type Exports interface {
	Shortcuts() orchard_shortcuts_shortcuts.Shortcut
}

// Impl is set by orchard.Export (in an init function of the plugin).
var Impl Exports

// Shortcuts declares none when no actuator was exported: the generic flow is always safe
// (and the actuator interface's first call traps, naming the missing orchard.Export).
func Shortcuts() orchard_shortcuts_shortcuts.Shortcut {
	if Impl == nil {
		return 0
	}
	return Impl.Shortcuts()
}
